package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/waitroom"
)

// The commands speak through the Go client but print the server's own
// JSON, byte for byte as it sent it (indented): fields the client's types
// leave out when empty (requireInstrument: false) included.
func TestCommandsPrintTheServersJSON(t *testing.T) {
	s := newCLIServer(t)
	created := s.cli(t, "sale", "create", "--sku", "as-sent", "--stock", "4")
	shown := s.cli(t, "sale", "show", "as-sent")
	var want bytes.Buffer
	if err := json.Indent(&want, httpGet(t, s.srv.URL+"/admin/sales/as-sent"), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if shown != want.String() {
		t.Fatalf("sale show printed:\n%s\nthe server answers:\n%s", shown, want.String())
	}
	for name, out := range map[string]string{"create": created, "show": shown} {
		if !strings.Contains(out, `"requireInstrument": false`) {
			t.Errorf("%s printed the client's view, not the server's answer:\n%s", name, out)
		}
	}
}

// A flag's value the client cannot send as given (a zero it would leave
// out for the server's default, a --server that is no URL) is refused
// here, as the server would refuse it: exit status 1, naming the flag, and
// nothing is created.
func TestFlagValuesTheClientWouldDrop(t *testing.T) {
	s := newCLIServer(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sale", "create", "--sku", "z", "--stock", "1", "--hold-seconds", "0"}, "--hold-seconds must be at least 1"},
		{[]string{"sale", "create", "--sku", "z", "--stock", "1", "--per-user-limit", "0"}, "--per-user-limit must be at least 1"},
		{[]string{"sale", "create", "--sku", "z", "--stock", "1", "--shards", "0"}, "--shards must be at least 1"},
		{[]string{"sale", "counter-log", "z", "--limit", "0"}, "--limit 0: the limit is from 1 to 10000"},
		{[]string{"outbox", "dead", "--limit", "-3"}, "--limit -3: the limit is from 1 to 10000"},
	} {
		_, _, err := runCLI(append(tc.args, "--server", s.srv.URL), nil)
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("flashsale %s: %v (exit %d); want exit 1 saying %q", strings.Join(tc.args, " "), err, exitCode(err), tc.want)
		}
	}
	// A negative one is the server's to refuse, in the flag's words.
	_, _, err := runCLI([]string{"sale", "create", "--sku", "z", "--stock", "1", "--hold-seconds", "-5", "--server", s.srv.URL}, nil)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "--hold-seconds must be at least 1") {
		t.Errorf("--hold-seconds -5: %v", err)
	}
	if out := s.cli(t, "sale", "list"); strings.Contains(out, "z ") {
		t.Errorf("a refused create made a sale:\n%s", out)
	}
	for _, server := range []string{"127.0.0.1:8080", "ftp://example.com", "http://"} {
		_, _, err := runCLI([]string{"sale", "list", "--server", server}, nil)
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "not a URL such as http://127.0.0.1:8080") {
			t.Errorf("--server %s: %v (exit %d)", server, err, exitCode(err))
		}
	}
	// A server that is not there, and an answer outside the contract's
	// shape, say so.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	if _, _, err := runCLI([]string{"outbox", "stats", "--server", gone.URL}, nil); err == nil ||
		!strings.Contains(err.Error(), "the server at "+gone.URL+" did not answer (--server)") {
		t.Errorf("a server that is not there: %v", err)
	}
	teapot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	defer teapot.Close()
	if _, _, err := runCLI([]string{"sale", "show", "x", "--server", teapot.URL}, nil); err == nil ||
		err.Error() != "the server answered HTTP 418" {
		t.Errorf("an answer outside the contract: %v", err)
	}
}

// verify fetches a draw through the client from a sale's URL or its
// draw's, the server mounted under a path or not; a sale without a draw
// says the draw may not have run.
func TestVerifyFetchesTheDraw(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	var ps []string
	for i := range 20 {
		ps = append(ps, waitroom.Pseudonym("sale_w", fmt.Sprintf("user-%d", i)))
	}
	doc, _ := json.Marshal(waitroom.DrawDocument{SKU: "w/1", SaleID: "sale_w", Fairness: "random",
		Algorithm: waitroom.DrawAlgorithm, SeedCommitment: waitroom.SeedCommitment(seed), Seed: fmt.Sprintf("%x", seed),
		Order: waitroom.Order(seed, ps)})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.EscapedPath() == "/shop/sale/w%2F1/draw" {
			_, _ = w.Write(doc)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":"not_found","message":"No draw."}}`)
	}))
	defer ts.Close()
	for _, src := range []string{ts.URL + "/shop/sale/w%2F1", ts.URL + "/shop/sale/w%2F1/draw/"} {
		if out := cli(t, "verify", src, "--user", "user-3"); !strings.Contains(out, "OK:") || !strings.Contains(out, "was drawn at place") {
			t.Errorf("verify %s:\n%s", src, out)
		}
	}
	for src, want := range map[string]string{
		ts.URL + "/shop/sale/fifo": ts.URL + "/shop/sale/fifo/draw answered 404: the draw may not have run yet",
		ts.URL + "/shop/draws/1":   "is not a sale's URL",
	} {
		_, _, err := runCLI([]string{"verify", src}, nil)
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), want) {
			t.Errorf("verify %s: %v; want %q", src, err, want)
		}
	}
}

// sale watch reconnects a cut feed naming the last event it saw
// (Last-Event-ID), so that the server resumes after it.
func TestSaleWatchResumes(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(asked)
		asked = append(asked, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: %d\nevent: sale\ndata: {\"sku\":\"w\",\"state\":\"open\",\"initialStock\":3,\"counter\":%d}\n\n", 7+n, 3-n)
		// Then the stream ends: the feed is cut.
	}))
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &lineWriter{n: 3, cancel: cancel}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"sale", "watch", "w", "--server", ts.URL}, env(nil), w, &bytes.Buffer{})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch printed no three lines in 20s")
	}
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(w.buf.String(), "\n")
	if len(asked) < 2 || asked[0] != "" || asked[1] != "7" || !strings.Contains(lines[0], "left=3/3") ||
		!strings.Contains(lines[1], "the feed was cut") || !strings.Contains(lines[2], "left=2/3") {
		t.Fatalf("Last-Event-ID asked with: %q; printed:\n%s", asked, w.buf.String())
	}
}

// shopperOf is the Go client of the server at base speaking for user,
// with a JWT from "flashsale token".
func shopperOf(t *testing.T, base, user string) *client.Shopper {
	t.Helper()
	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	return c.Shopper(strings.TrimSpace(cli(t, "token", "--user", user)))
}

// reserveOne takes the shopper through the waiting room of a sale that
// admits at once and reserves a unit with the idempotency key.
func reserveOne(t *testing.T, sh *client.Shopper, sku, key string) *client.Reservation {
	t.Helper()
	ctx := context.Background()
	tk, err := sh.Ticket(ctx, sku)
	if err != nil {
		t.Fatalf("ticket: %v", err)
	}
	st, err := sh.Status(ctx, sku, tk.Token)
	if err != nil || st.State != client.StateAdmitted {
		t.Fatalf("status: %+v %v, want admitted", st, err)
	}
	res, err := sh.Reserve(ctx, sku, client.ReserveRequest{AdmissionToken: st.AdmissionToken, IdempotencyKey: key})
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	return res
}

// buyOne reserves a unit for the shopper and confirms it; it returns the
// order's id.
func buyOne(t *testing.T, sh *client.Shopper, sku, key, paymentRef string) string {
	t.Helper()
	res := reserveOne(t, sh, sku, key)
	orderID, err := sh.Confirm(context.Background(), res.ReservationID, paymentRef)
	if err != nil {
		t.Fatalf("confirm: %v", err)
	}
	return orderID
}
