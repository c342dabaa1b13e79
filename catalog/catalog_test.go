package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// oneSaleStore is a record of one sale that counts its reads; the methods
// the catalog does not call are left to the embedded nil interface.
type oneSaleStore struct {
	flashsale.SaleStore
	s     *flashsale.Sale
	reads int
}

func (o *oneSaleStore) SaleBySKU(context.Context, string) (*flashsale.Sale, error) {
	o.reads++
	cp := *o.s
	return &cp, nil
}

// Generation moves with every change a cache above the catalog could have
// missed (a refill from the record, a Put, a Forget) and holds while reads
// are served from memory.
func TestGeneration(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC))
	store := &oneSaleStore{s: &flashsale.Sale{ID: "sale_1", SKU: "sku", Version: 1}}
	c := New(store, Config{TTL: time.Second, Now: clock.Now})

	g0 := c.Generation()
	if _, err := c.BySKU(ctx, "sku"); err != nil {
		t.Fatal(err)
	}
	g1 := c.Generation()
	if g1 == g0 {
		t.Fatal("a fill from the record left the generation as it was")
	}
	if _, err := c.BySKU(ctx, "sku"); err != nil || store.reads != 1 {
		t.Fatalf("cached read: %v, %d record reads", err, store.reads)
	}
	if c.Generation() != g1 {
		t.Fatal("a read served from memory changed the generation")
	}

	paused := *store.s
	paused.State, paused.Version = flashsale.SalePaused, 2
	c.Put(&paused)
	g2 := c.Generation()
	if g2 == g1 {
		t.Fatal("Put left the generation as it was")
	}
	c.Forget("sku")
	if c.Generation() == g2 {
		t.Fatal("Forget left the generation as it was")
	}
}

// noSaleStore is a record without sales that counts its reads.
type noSaleStore struct {
	flashsale.SaleStore
	reads int
}

func (n *noSaleStore) SaleBySKU(context.Context, string) (*flashsale.Sale, error) {
	n.reads++
	return nil, flashsale.ErrNotFound
}

// A path that cannot name a sale is answered without asking the record,
// and leaves nothing in the cache.
func TestInvalidSKUNeedsNoLookup(t *testing.T) {
	store := &noSaleStore{}
	c := New(store, Config{})
	for _, sku := range []string{"", "a/b", "sku with spaces", "ü", strings.Repeat("a", 129)} {
		if _, err := c.BySKU(context.Background(), sku); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("BySKU(%q) = %v; want not found", sku, err)
		}
	}
	if store.reads != 0 || c.absent != 0 {
		t.Fatalf("%d record reads, %d entries kept; want none", store.reads, c.absent)
	}
	if _, err := c.BySKU(context.Background(), strings.Repeat("a", 128)); !errors.Is(err, flashsale.ErrNotFound) || store.reads != 1 {
		t.Fatalf("a valid SKU of 128: %v, %d reads; want one lookup", err, store.reads)
	}
}

// Asking for ever new SKUs without a sale, as a crawler or an attacker
// would, keeps only about a TTL's worth of them; one asked again within
// its TTL is still answered from memory.
func TestAbsentSKUsAreBounded(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC))
	store := &noSaleStore{}
	const ttl, step, n = 250 * time.Millisecond, 10 * time.Microsecond, 200_000
	c := New(store, Config{TTL: ttl, Now: clock.Now})
	perTTL := int(ttl / step) // SKUs asked within one TTL
	for i := range n {
		if _, err := c.BySKU(ctx, fmt.Sprintf("nope-%d", i)); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatal(err)
		}
		clock.Advance(step)
	}
	kept := 0
	c.bySKU.Range(func(any, any) bool { kept++; return true })
	if kept != c.absent || kept > 2*perTTL+minPrune {
		t.Fatalf("%d entries kept (counted %d) after %d absent SKUs; want at most %d", kept, c.absent, n, 2*perTTL+minPrune)
	}
	reads := store.reads
	if _, err := c.BySKU(ctx, fmt.Sprintf("nope-%d", n-1)); !errors.Is(err, flashsale.ErrNotFound) || store.reads != reads {
		t.Fatalf("the last SKU asked again: %v, %d more record reads; want it from memory", err, store.reads-reads)
	}
}

// listStore is a record of the sales in it, counting lookups by SKU.
type listStore struct {
	flashsale.SaleStore
	sales   map[string]*flashsale.Sale
	lookups int
}

func (l *listStore) SaleBySKU(_ context.Context, sku string) (*flashsale.Sale, error) {
	l.lookups++
	if s, ok := l.sales[sku]; ok {
		cp := *s
		return &cp, nil
	}
	return nil, flashsale.ErrNotFound
}

func (l *listStore) Sales(context.Context) ([]*flashsale.Sale, error) {
	var out []*flashsale.Sale
	for _, s := range l.sales {
		cp := *s
		out = append(out, &cp)
	}
	return out, nil
}

// A SKU missing from a fresh listing of every sale is answered without a
// lookup; one listed, one put by this process, and any once the listing
// is old are looked up; a sale created elsewhere is found from the next
// listing on.
func TestUnlistedSKUNeedsNoLookup(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC))
	store := &listStore{sales: map[string]*flashsale.Sale{"real": {ID: "sale_1", SKU: "real"}}}
	c := New(store, Config{Now: clock.Now})
	lookup := func(sku string, wantFound bool, wantLookups int) {
		t.Helper()
		before := store.lookups
		_, err := c.BySKU(ctx, sku)
		if found := err == nil; found != wantFound || (err != nil && !errors.Is(err, flashsale.ErrNotFound)) {
			t.Fatalf("BySKU(%q) = %v; want found %v", sku, err, wantFound)
		}
		if got := store.lookups - before; got != wantLookups {
			t.Fatalf("BySKU(%q) made %d record lookups; want %d", sku, got, wantLookups)
		}
	}
	lookup("nope", false, 1) // no listing yet
	if _, err := c.Active(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second) // past the cache's TTL, within the listing's
	lookup("nope", false, 0)
	lookup("other", false, 0)
	lookup("real", true, 1)
	c.Put(&flashsale.Sale{ID: "sale_2", SKU: "mine"})
	lookup("mine", true, 0)
	// Created by another server: not found until the next listing.
	store.sales["theirs"] = &flashsale.Sale{ID: "sale_3", SKU: "theirs"}
	lookup("theirs", false, 0)
	if _, err := c.Active(ctx); err != nil {
		t.Fatal(err)
	}
	lookup("theirs", true, 1)
	clock.Advance(ListingFresh)
	lookup("gone-stale", false, 1)
}
