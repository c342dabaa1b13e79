package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/sqlite"
)

// TestOrderAndOutboxCommands: a shopper buys; the operator cancels the
// order from the command line at the version it read (a stale version is
// refused); the relay of the embedded default publishes every event to the
// log; a dead letter is listed and replayed from the command line.
func TestOrderAndOutboxCommands(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServer(t, dir)
	defer stop()
	cli(t, "sale", "create", "--server", base, "--sku", "cli-tee", "--stock", "2", "--opens-at", "+0s")
	orderID := buyOne(t, shopperOf(t, base, "dora"), "cli-tee", "k", "pay-1")

	if out := cli(t, "order", "list", "cli-tee", "--server", base); !strings.HasPrefix(out, "ORDER") || !strings.Contains(out, orderID) ||
		!strings.Contains(out, "confirmed") {
		t.Fatalf("order list printed:\n%s", out)
	}
	if out := cli(t, "order", "list", "cli-tee", "--server", base, "-o", "json"); !strings.Contains(out, orderID) || !strings.Contains(out, `"version": 1`) {
		t.Fatalf("order list -o json printed:\n%s", out)
	}
	var o, e syncBuffer
	err := run(context.Background(), []string{"order", "cancel", orderID, "--server", base, "--version", "7"}, env(nil), &o, &e)
	if err == nil || !strings.Contains(err.Error(), "version_conflict") {
		t.Fatalf("cancel at a stale version: %v", err)
	}
	out := cli(t, "order", "cancel", orderID, "--server", base, "--version", "1", "--reason", "fraud", "--operator", "alice")
	if !strings.Contains(out, `"state": "cancelled"`) || !strings.Contains(out, `"version": 2`) {
		t.Fatalf("order cancel printed:\n%s", out)
	}
	if out := cli(t, "order", "history", orderID, "--server", base); !strings.Contains(out, `"actor": "operator:alice"`) ||
		!strings.Contains(out, `"reason": "fraud"`) {
		t.Fatalf("order history printed:\n%s", out)
	}
	if out := cli(t, "sale", "show", "cli-tee", "--server", base); !strings.Contains(out, `"counter": 2`) {
		t.Fatalf("the cancelled order's unit did not come back:\n%s", out)
	}

	// Another order, shipped, then refunded.
	second := buyOne(t, shopperOf(t, base, "erin"), "cli-tee", "k2", "pay-2")
	if out := cli(t, "order", "ship", second, "--server", base, "--version", "1"); !strings.Contains(out, `"state": "shipped"`) {
		t.Fatalf("order ship printed:\n%s", out)
	}
	if out := cli(t, "order", "refund", second, "--server", base, "--version", "2", "--reason", "returned"); !strings.Contains(out, `"state": "refunded"`) {
		t.Fatalf("order refund printed:\n%s", out)
	}

	// The relay publishes to the log sink: every event of the sale is
	// published within a few seconds.
	wantTypes := []string{"sale.opened", "reservation.created", "order.confirmed", "order.cancelled", "reservation.cancelled"}
	deadline := time.Now().Add(15 * time.Second)
	adm, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	for {
		events, _ := adm.Admin("").SaleEvents(context.Background(), "cli-tee", 0)
		published := map[string]bool{}
		for _, ev := range events {
			if ev.PublishedAt != nil {
				published[string(ev.Type)] = true
			}
		}
		all := true
		for _, typ := range wantTypes {
			all = all && published[typ]
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s the published events are %v, want %v", published, wantTypes)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A dead letter, made beside the server in its own record.
	st2, err := sqlite.Open(t.Context(), filepath.Join(dir, "flashsale.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	ev := flashsale.NewEvent("", flashsale.EventSaleSoldOut, "sale_x", "x", time.Now(), flashsale.SaleData{})
	if _, err := st2.AppendEvents(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	if _, err := st2.ClaimEvents(t.Context(), flashsale.EventClaim{Relay: "test", Token: "tok", Now: time.Now().Add(time.Hour), Lease: time.Hour, Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	if ok, err := st2.BuryEvent(t.Context(), "tok", ev.ID, time.Now(), "HTTP 410 from the receiver"); err != nil || !ok {
		t.Fatalf("bury: %v, %v", ok, err)
	}
	if out := cli(t, "outbox", "dead", "--server", base); !strings.HasPrefix(out, "EVENT") || !strings.Contains(out, ev.ID) || !strings.Contains(out, "HTTP 410") {
		t.Fatalf("outbox dead printed:\n%s", out)
	}
	if out := cli(t, "outbox", "dead", "--server", base, "-o", "json"); !strings.Contains(out, `"eventId": "`+ev.ID+`"`) {
		t.Fatalf("outbox dead -o json printed:\n%s", out)
	}
	if out := cli(t, "outbox", "stats", "--server", base); !strings.Contains(out, `"dead": 1`) {
		t.Fatalf("outbox stats printed:\n%s", out)
	}
	if out := cli(t, "outbox", "replay", ev.ID, "--server", base); !strings.Contains(out, `"attempts": 0`) || strings.Contains(out, "deadAt") {
		t.Fatalf("outbox replay printed:\n%s", out)
	}
	if err := run(context.Background(), []string{"outbox", "replay", ev.ID, "--server", base}, env(nil), &o, &e); err == nil ||
		!strings.Contains(err.Error(), "invalid_state") {
		t.Fatalf("replaying twice: %v", err)
	}
}
