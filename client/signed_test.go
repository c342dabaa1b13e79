package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/client"
)

// TestShopperStatusSignedIn: Shopper.Status polls as the page does, the
// ticket in X-Ticket and out of the URL, with the shopper's JWT; a poll or
// an admission signed in as another account is refused, so a copy of a
// ticket speaks for no one; Shopper.Admission admits the ticket's owner.
func TestShopperStatusSignedIn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("signed", func(s *client.NewSale) { s.ChallengeBits = 4 })
		var mu sync.Mutex
		var polls []*http.Request
		h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if strings.HasSuffix(r.URL.Path, "/status") {
				mu.Lock()
				polls = append(polls, r.Clone(context.Background()))
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		}
		alice, bob := h.shopper("alice"), h.shopper("bob")
		tk, err := alice.Ticket(ctx, "signed")
		if err != nil {
			t.Fatal(err)
		}
		st, err := alice.Status(ctx, "signed", tk.Token)
		if err != nil || st.State != client.StateChallenge || st.Challenge == nil {
			t.Fatalf("alice's status: %+v %v, want a challenge", st, err)
		}
		mu.Lock()
		if len(polls) != 1 || polls[0].URL.RawQuery != "" || polls[0].Header.Get("X-Ticket") != tk.Token ||
			!strings.HasPrefix(polls[0].Header.Get("Authorization"), "Bearer ") {
			t.Errorf("the poll was sent as %v %v", polls[0].URL, polls[0].Header)
		}
		mu.Unlock()

		_, err = bob.Status(ctx, "signed", tk.Token)
		wantCode(t, "bob polling alice's ticket", err, client.ErrInvalidToken, 401)
		nonce, err := client.SolveChallenge(ctx, *st.Challenge)
		if err != nil {
			t.Fatal(err)
		}
		req := client.AdmissionRequest{Token: tk.Token, Salt: st.Challenge.Salt, Nonce: nonce}
		_, err = bob.Admission(ctx, "signed", req)
		wantCode(t, "bob posting alice's proof of work", err, client.ErrInvalidToken, 401)
		adm, err := alice.Admission(ctx, "signed", req)
		if err != nil || adm.AdmissionToken == "" {
			t.Fatalf("alice's admission: %+v %v", adm, err)
		}
		if _, err := alice.Reserve(ctx, "signed", client.ReserveRequest{AdmissionToken: adm.AdmissionToken}); err != nil {
			t.Fatalf("alice's reserve: %v", err)
		}
	})
}

// TestWithAnswers: the hook sees every answer's status and body as sent,
// a success's and an error's, fields the client's types do not have
// included.
func TestWithAnswers(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/admin/sales/gone" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"not_found","message":"No such sale."}}`)
			return
		}
		fmt.Fprint(w, `{"sku":"s","state":"open","newerField":{"x":1}}`)
	}))
	defer ts.Close()
	type answer struct {
		status int
		body   string
	}
	var got []answer
	c, err := client.New(ts.URL, client.WithAnswers(func(status int, body []byte) {
		got = append(got, answer{status, string(body)})
	}))
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Admin("").Sale(context.Background(), "s")
	if err != nil || v.SKU != "s" {
		t.Fatalf("sale: %+v %v", v, err)
	}
	_, err = c.Admin("").Sale(context.Background(), "gone")
	wantCode(t, "no such sale", err, client.ErrNotFound, 404)
	if len(got) != 2 || got[0].status != 200 || !json.Valid([]byte(got[0].body)) ||
		!strings.Contains(got[0].body, `"newerField":{"x":1}`) || got[1].status != 404 || !strings.Contains(got[1].body, "not_found") {
		t.Fatalf("answers seen: %+v", got)
	}
}

// TestLiveAfter: a reconnection names the last event it saw
// (Last-Event-ID), and Live names none.
func TestLiveAfter(t *testing.T) {
	var mu sync.Mutex
	var lastIDs []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: sale\nid: 8\ndata: {\"sku\":\"s\"}\n\n")
	}))
	defer ts.Close()
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	fn := func(ev client.LiveEvent) error { seen = append(seen, ev.ID); return nil }
	if err := c.Admin("").Live(context.Background(), "s", fn); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin("").LiveAfter(context.Background(), "s", seen[0], fn); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lastIDs) != "[ 8]" || fmt.Sprint(seen) != "[8 8]" {
		t.Fatalf("Last-Event-ID sent: %q; events: %q", lastIDs, seen)
	}
}
