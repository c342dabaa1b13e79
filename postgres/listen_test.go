package postgres

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// heard collects what a SaleListener hands on.
type heard struct {
	changes chan SaleChange
	relists atomic.Int64
}

func listenTo(t *testing.T, dbURL string) (*SaleListener, *heard) {
	t.Helper()
	h := &heard{changes: make(chan SaleChange, 64)}
	l := NewSaleListener(ListenConfig{URL: dbURL,
		Changed:    func(_ context.Context, c SaleChange) { h.changes <- c },
		Relist:     func(context.Context) { h.relists.Add(1) },
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	l.Start(t.Context())
	t.Cleanup(l.Stop)
	waitUntil(t, "the listener listens", func() bool { return h.relists.Load() >= 1 })
	return l, h
}

// waitUntil polls cond until it holds, failing the test after a deadline
// generous enough for a loaded machine. It proves nothing by waiting: it
// only gives a notification time to arrive.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// next returns the next change heard, failing the test if none comes.
func (h *heard) next(t *testing.T) SaleChange {
	t.Helper()
	select {
	case c := <-h.changes:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no notification came")
		return SaleChange{}
	}
}

func listenedSale(sku string) *flashsale.Sale {
	at := time.Date(2030, 3, 1, 10, 0, 0, 0, time.UTC)
	return &flashsale.Sale{ID: flashsale.NewID("sale_"), SKU: sku, Name: "Listened", InitialStock: 10,
		OpensAt: at, HoldSeconds: 600, PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1,
		State: flashsale.SaleOpen, Epoch: 1, Version: 1, CreatedAt: at, UpdatedAt: at}
}

// Every write to a sale (create, change, pause, resume, rebuild, close)
// is heard, in the order committed, with the version it wrote; a write
// that rolls back is not; another schema's sales are not.
func TestSaleListenerHearsEveryChange(t *testing.T) {
	ctx := t.Context()
	dbURL := testenv.Postgres(t)
	st, err := Open(ctx, dbURL, WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := Open(ctx, testenv.Postgres(t), WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, h := listenTo(t, dbURL)

	want := func(what string, s *flashsale.Sale, version int64) {
		t.Helper()
		c := h.next(t)
		if c.SKU != s.SKU || c.Sale != s.ID || c.Version != version {
			t.Fatalf("after %s: heard %+v; want %s %s at version %d", what, c, s.SKU, s.ID, version)
		}
	}
	// Another schema's sale, first: if it were heard, it would come first.
	if err := other.CreateSale(ctx, listenedSale("kicks")); err != nil {
		t.Fatal(err)
	}
	s := listenedSale("kicks")
	if err := st.CreateSale(ctx, s); err != nil {
		t.Fatal(err)
	}
	want("create", s, 1)
	edit := *s
	edit.Name = "Renamed"
	if err := st.UpdateSale(ctx, &edit, 1); err != nil {
		t.Fatal(err)
	}
	want("change", s, 2)
	if _, err := st.SetSaleState(ctx, s.ID, flashsale.SalePaused, "operator", s.OpensAt); err != nil {
		t.Fatal(err)
	}
	want("pause", s, 3)
	if _, _, err := st.BeginRebuild(ctx, s.ID, s.OpensAt); err != nil {
		t.Fatal(err)
	}
	want("rebuild", s, 4)
	if _, err := st.SetSaleState(ctx, s.ID, flashsale.SaleOpen, "", s.OpensAt); err != nil {
		t.Fatal(err)
	}
	want("resume", s, 5)
	// Refused (another active sale holds the SKU): rolled back, unheard.
	if err := st.CreateSale(ctx, listenedSale("kicks")); err == nil {
		t.Fatal("a second active sale of the SKU was created")
	}
	if _, err := st.SetSaleState(ctx, s.ID, flashsale.SaleClosed, "", s.OpensAt); err != nil {
		t.Fatal(err)
	}
	want("close", s, 6)
}

// When its connection breaks, the listener connects again (the database
// refusing it meanwhile), relists, and hears changes again.
func TestSaleListenerReconnectsAndRelists(t *testing.T) {
	ctx := t.Context()
	dbURL := testenv.Postgres(t)
	st, err := Open(ctx, dbURL, WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	_, h := listenTo(t, u.String())
	if n := h.relists.Load(); n != 1 {
		t.Fatalf("%d relists on first listening; want 1", n)
	}

	proxy.Cut()
	s := listenedSale("boots")
	if err := st.CreateSale(ctx, s); err != nil {
		t.Fatal(err)
	}
	// Created while nobody listened: only the relist on reconnecting
	// stands for it.
	proxy.Restore()
	waitUntil(t, "the listener relists after reconnecting", func() bool { return h.relists.Load() >= 2 })
	select {
	case c := <-h.changes:
		t.Fatalf("heard %+v, made while the connection was cut", c)
	default:
	}
	if _, err := st.SetSaleState(ctx, s.ID, flashsale.SalePaused, "operator", s.OpensAt); err != nil {
		t.Fatal(err)
	}
	if c := h.next(t); c.Sale != s.ID || c.Version != 2 {
		t.Fatalf("after reconnecting, heard %+v; want the pause of %s", c, s.ID)
	}
}
