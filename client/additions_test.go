package client_test

// Tests of the client's calls for the routes and fields the API gained
// with the storefront work (issue 25) and its neighbours: invites and
// redeem, the live stream, a sale's display, notifiedAdmissionSeconds and
// requireInstrument.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flashsale/flashsale/client"
)

// TestInvitesAndRedeem: an operator issues codes; a shopper redeems one
// for a place ahead of the line, harmlessly again; another account's use
// of it and a code of nowhere are refused; the sale counts them; the
// redeemed ticket waits like any other.
func TestInvitesAndRedeem(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		adm := h.admin()
		h.createSale("vip", func(s *client.NewSale) { s.InitialStock, s.OpensAt = 2, start.Add(time.Minute) })
		h.createSale("other")
		codes, err := adm.IssueInvites(ctx, "vip", 3)
		if err != nil || len(codes) != 3 || codes[0] == "" || codes[0] == codes[1] {
			t.Fatalf("invites: %q %v", codes, err)
		}
		alice := h.shopper("alice")
		tk, err := alice.Redeem(ctx, "vip", codes[0])
		if err != nil || tk.Token == "" || tk.Position < 1 {
			t.Fatalf("redeem: %+v %v", tk, err)
		}
		if again, err := alice.Redeem(ctx, "vip", codes[0]); err != nil || again.Position != tk.Position {
			t.Fatalf("redeem again: %+v %v", again, err)
		}
		_, err = h.shopper("bob").Redeem(ctx, "vip", codes[0])
		wantCode(t, "a code another account redeemed", err, client.ErrInviteUsed, 409)
		_, err = h.shopper("bob").Redeem(ctx, "other", codes[1])
		wantCode(t, "a code of another sale", err, client.ErrInviteInvalid, 403)
		_, err = h.shopper("bob").Redeem(ctx, "vip", "no-such-code")
		wantCode(t, "an unknown code", err, client.ErrInviteInvalid, 403)
		if v, err := adm.Sale(ctx, "vip"); err != nil || v.Invites == nil || v.Invites.Issued != 3 || v.Invites.Redeemed != 1 {
			t.Fatalf("the sale's invites: %+v %v", v, err)
		}
		h.onSleep = func(time.Duration) {
			if err := h.eng.Warmer.WarmOnce(ctx); err != nil {
				t.Error(err)
			}
		}
		st, err := (&client.Waiter{Client: h.c, SKU: "vip"}).Wait(ctx, tk.Token)
		if err != nil || st.State != client.StateAdmitted {
			t.Fatalf("the invited shopper's wait: %+v %v", st, err)
		}
		if _, err := alice.Reserve(ctx, "vip", client.ReserveRequest{AdmissionToken: st.AdmissionToken}); err != nil {
			t.Fatalf("the invited shopper's reserve: %v", err)
		}
	})
}

// TestLive: the live stream gives the sale's figures as events.
func TestLive(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("live")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errEnough := errors.New("enough")
	var got *client.SaleView
	err := h.admin().Live(ctx, "live", func(ev client.LiveEvent) error {
		if ev.Event != "sale" {
			return nil
		}
		v, err := ev.Sale()
		if err != nil {
			return err
		}
		got = v
		return errEnough
	})
	if !errors.Is(err, errEnough) || got == nil || got.SKU != "live" || got.InitialStock != 10 {
		t.Fatalf("live: %+v %v", got, err)
	}
}

// TestSaleSettings: display, notifiedAdmissionSeconds and
// requireInstrument go in with the sale and come back in its views.
func TestSaleSettings(t *testing.T) {
	h := newHarness(t, backends[0])
	ctx := context.Background()
	adm := h.admin()

	display := &client.Display{Title: "Air Max 1", Description: "Two hundred pairs.", PriceText: "€149",
		ShopURL: "https://shop.example/after", BrandColor: "#112233"}
	t.Run("display", func(t *testing.T) {
		v, err := adm.CreateSale(ctx, client.NewSale{SKU: "shown", InitialStock: 1, OpensAt: start, Display: display})
		if err != nil || v.Display == nil || *v.Display != *display {
			t.Fatalf("created: %+v %v", v, err)
		}
		if pub, err := h.c.Sale(ctx, "shown"); err != nil || pub.Display == nil || *pub.Display != *display {
			t.Fatalf("published: %+v %v", pub, err)
		}
		v, err = adm.UpdateSale(ctx, "shown", v.Version, client.SalePatch{Display: &client.Display{Title: "Air Max 90"}})
		if err != nil || v.Display == nil || v.Display.Title != "Air Max 90" {
			t.Fatalf("patched: %+v %v", v, err)
		}
	})
	t.Run("notifiedAdmissionSeconds", func(t *testing.T) {
		v, err := adm.CreateSale(ctx, client.NewSale{SKU: "told", InitialStock: 1, OpensAt: start, NotifiedAdmissionSeconds: 900})
		if err != nil || v.NotifiedAdmissionSeconds != 900 {
			t.Fatalf("created: %+v %v", v, err)
		}
	})
	t.Run("requireInstrument", func(t *testing.T) {
		v, err := adm.CreateSale(ctx, client.NewSale{SKU: "carded", InitialStock: 1, OpensAt: start, RequireInstrument: true})
		if err != nil || !v.RequireInstrument {
			t.Fatalf("created: %+v %v", v, err)
		}
	})
}

// TestLiveReadsTheEventStream: Live reads a text/event-stream as the
// contract's route will send it: named events, data over several lines,
// comments kept for the connection's sake, and an error answer as an
// *Error.
func TestLiveReadsTheEventStream(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":"unauthenticated","message":"no"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": hello\n\nevent: sale\nid: 1\ndata: {\"sku\":\"s\",\n")
		fmt.Fprint(w, "data:\"counter\":7}\n\nevent: sale\ndata: {\"sku\":\"s\",\"counter\":6}\n\n")
	}))
	defer ts.Close()
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	var counters []int64
	var ids []string
	err = c.Admin("tok").Live(context.Background(), "s", func(ev client.LiveEvent) error {
		v, err := ev.Sale()
		if err != nil || ev.Event != "sale" || v.Counter == nil {
			return fmt.Errorf("event %+v: %v", ev, err)
		}
		counters = append(counters, *v.Counter)
		ids = append(ids, ev.ID)
		return nil
	})
	if err != nil || fmt.Sprint(counters) != "[7 6]" || fmt.Sprint(ids) != "[1 ]" {
		t.Fatalf("live: %v %v %q", counters, err, ids)
	}
	err = c.Admin("").Live(context.Background(), "s", func(client.LiveEvent) error { return nil })
	wantCode(t, "live without the token", err, client.ErrUnauthenticated, 401)
}
