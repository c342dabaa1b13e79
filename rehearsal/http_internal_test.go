package rehearsal

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Over HTTP each of the crowd's requests is sent once, whatever the answer:
// a repeat is the rehearsal's own step after the Retry-After it was told,
// so the client must not repeat one behind its back (which would hide it
// from the counts and stretch the latencies). Each answer comes back as
// its code and Retry-After; an answer outside the contract as its status.
func TestHTTPClientSendsOnce(t *testing.T) {
	var asked atomic.Int32
	answer := atomic.Value{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		a := answer.Load().(string)
		w.Header().Set("Retry-After", "2")
		if a == "" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"later"}}`, a)
	}))
	defer ts.Close()
	c := newHTTPClient(ts.URL, "s", 2, []byte("secret-of-thirty-two-bytes-or-so"))
	who := persona{user: "u1", created: time.Now().Add(-time.Hour)}
	ctx := context.Background()
	for _, tc := range []struct {
		answer, want string
		call         func(sh *shopper) reply
	}{
		{"overloaded", "overloaded", func(sh *shopper) reply { return c.reserve(ctx, who, sh, "k") }},
		{"unavailable", "unavailable", func(sh *shopper) reply { return c.status(ctx, who, sh, "tk") }},
		{"unavailable", "unavailable", func(sh *shopper) reply { return c.ticket(ctx, who, sh) }},
		{"", "http_502", func(sh *shopper) reply { return c.confirm(ctx, who, sh, "pay") }},
	} {
		answer.Store(tc.answer)
		asked.Store(0)
		sh := &shopper{}
		sh.x().resID = "res_1"
		rep := tc.call(sh)
		if rep.code != tc.want || rep.retryAfter != 2*time.Second || asked.Load() != 1 {
			t.Errorf("answered %q: reply %+v after %d requests; want %s, Retry-After 2s, one request", tc.answer, rep, asked.Load(), tc.want)
		}
	}
	ts.Close()
	if rep := c.cancel(ctx, who, &shopper{extra: &extra{resID: "res_1"}}); rep.code != "transport" || rep.retryAfter != time.Second {
		t.Errorf("no answer: %+v; want transport, come back in a second", rep)
	}
}
