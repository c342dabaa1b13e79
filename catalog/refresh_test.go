package catalog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// gatedStore is a record whose reads can be held at a gate, to order a
// read begun before a change after one begun after it. Safe for
// concurrent use.
type gatedStore struct {
	flashsale.SaleStore

	mu    sync.Mutex
	sales map[string]*flashsale.Sale
	down  bool
	// hold, when set, is where the next SaleBySKU waits, having read.
	hold    chan struct{}
	holding chan struct{}
}

func (g *gatedStore) set(s *flashsale.Sale) {
	g.mu.Lock()
	cp := *s
	g.sales[s.SKU] = &cp
	g.mu.Unlock()
}

func (g *gatedStore) SaleBySKU(_ context.Context, sku string) (*flashsale.Sale, error) {
	g.mu.Lock()
	s, ok := g.sales[sku]
	down, hold, holding := g.down, g.hold, g.holding
	g.hold, g.holding = nil, nil
	var cp flashsale.Sale
	if ok {
		cp = *s
	}
	g.mu.Unlock()
	if hold != nil {
		close(holding)
		<-hold
	}
	switch {
	case down:
		return nil, errors.New("the record is down")
	case !ok:
		return nil, flashsale.ErrNotFound
	}
	return &cp, nil
}

func (g *gatedStore) Sales(context.Context) ([]*flashsale.Sale, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return nil, errors.New("the record is down")
	}
	var out []*flashsale.Sale
	for _, s := range g.sales {
		cp := *s
		out = append(out, &cp)
	}
	return out, nil
}

// holdNext makes the next SaleBySKU wait after its read until the
// returned release is called; reading returns once it has read.
func (g *gatedStore) holdNext() (reading <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	hold, holding := make(chan struct{}), make(chan struct{})
	g.hold, g.holding = hold, holding
	return holding, func() { close(hold) }
}

func newGated() (*gatedStore, *testenv.Clock) {
	return &gatedStore{sales: map[string]*flashsale.Sale{}}, testenv.NewClock(time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC))
}

func stateOf(t *testing.T, c *Catalog, sku string) flashsale.SaleState {
	t.Helper()
	s, err := c.BySKU(context.Background(), sku)
	if errors.Is(err, flashsale.ErrNotFound) {
		return "404"
	}
	if err != nil {
		t.Fatalf("BySKU(%q): %v", sku, err)
	}
	return s.State
}

// A change made by another server shows at the next read after Refresh,
// however fresh the cached entry was (the clock never moves here, so
// nothing but Refresh can renew it).
func TestRefreshShowsAChangeAtOnce(t *testing.T) {
	store, clock := newGated()
	c := New(store, Config{Now: clock.Now})
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleOpen, Version: 1})
	if got := stateOf(t, c, "kicks"); got != flashsale.SaleOpen {
		t.Fatalf("first read: %s", got)
	}
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SalePaused, Version: 2})
	if got := stateOf(t, c, "kicks"); got != flashsale.SaleOpen {
		t.Fatalf("within the TTL, without Refresh: %s; the cache should still answer", got)
	}
	g := c.Generation()
	if err := c.Refresh(context.Background(), "kicks"); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, c, "kicks"); got != flashsale.SalePaused {
		t.Fatalf("after Refresh: %s, want paused", got)
	}
	if c.Generation() == g {
		t.Fatal("Refresh left the generation as it was: the room's snapshots would not follow")
	}
}

// A sale created by another server is found at once after Refresh, even
// while the listing of every sale (which lacks it) is fresh and the SKU
// was cached as having no sale.
func TestRefreshFindsANewSale(t *testing.T) {
	store, clock := newGated()
	c := New(store, Config{Now: clock.Now})
	if _, err := c.Active(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, c, "kicks"); got != "404" {
		t.Fatalf("before the sale: %s", got)
	}
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleOpen, Version: 1})
	if got := stateOf(t, c, "kicks"); got != "404" {
		t.Fatalf("without Refresh: %s; the listing should still answer", got)
	}
	if err := c.Refresh(context.Background(), "kicks"); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, c, "kicks"); got != flashsale.SaleOpen {
		t.Fatalf("after Refresh: %s, want open", got)
	}
	// And one never asked for before.
	store.set(&flashsale.Sale{ID: "sale_2", SKU: "boots", State: flashsale.SaleOpen, Version: 1})
	if err := c.Refresh(context.Background(), "boots"); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, c, "boots"); got != flashsale.SaleOpen {
		t.Fatalf("a SKU first heard of by Refresh: %s, want open", got)
	}
}

// A read that began before a change and ends after the Refresh that
// reports it does not put the old sale back; nor does one that found no
// sale undo the Refresh that found the new one.
func TestAnOlderReadDoesNotUndoRefresh(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before *flashsale.Sale // nil: no sale yet
		after  *flashsale.Sale
	}{
		{"pause", &flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleOpen, Version: 1},
			&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SalePaused, Version: 2}},
		{"create", nil, &flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleOpen, Version: 1}},
		{"a new sale of the SKU", &flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleClosed, Version: 3},
			&flashsale.Sale{ID: "sale_2", SKU: "kicks", State: flashsale.SaleScheduled, Version: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, clock := newGated()
			c := New(store, Config{TTL: time.Minute, Now: clock.Now})
			want := flashsale.SaleState("404")
			if tc.before != nil {
				store.set(tc.before)
				want = tc.before.State
			}
			// A request's fill reads the old sale, then stalls.
			reading, release := store.holdNext()
			done := make(chan flashsale.SaleState)
			go func() {
				s, err := c.BySKU(context.Background(), "kicks")
				if err != nil {
					done <- "404"
					return
				}
				done <- s.State
			}()
			<-reading
			store.set(tc.after)
			if err := c.Refresh(context.Background(), "kicks"); err != nil {
				t.Fatal(err)
			}
			release()
			if got := <-done; got != want {
				t.Fatalf("the stalled read answered %s, want the %s it read", got, want)
			}
			if got := stateOf(t, c, "kicks"); got != tc.after.State {
				t.Fatalf("after the stalled read ended: %s, want %s", got, tc.after.State)
			}
		})
	}
}

// A Refresh the record does not answer leaves the entry old: the next
// read asks the record, and serves the last sale known only while the
// record still does not answer.
func TestRefreshWithTheRecordDown(t *testing.T) {
	store, clock := newGated()
	c := New(store, Config{Now: clock.Now})
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleOpen, Version: 1})
	if got := stateOf(t, c, "kicks"); got != flashsale.SaleOpen {
		t.Fatal(got)
	}
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SalePaused, Version: 2})
	store.mu.Lock()
	store.down = true
	store.mu.Unlock()
	if err := c.Refresh(context.Background(), "kicks"); err == nil {
		t.Fatal("Refresh with the record down returned no error")
	}
	if got := stateOf(t, c, "kicks"); got != flashsale.SaleOpen {
		t.Fatalf("with the record down: %s, want the last known (open)", got)
	}
	store.mu.Lock()
	store.down = false
	store.mu.Unlock()
	if got := stateOf(t, c, "kicks"); got != flashsale.SalePaused {
		t.Fatalf("with the record back: %s, want paused without waiting for the TTL", got)
	}
}

// Relist (after a time without notifications) makes every entry old and
// renews the listing: changes made meanwhile show at the next read, and
// a read begun before the Relist caches nothing.
func TestRelistForgetsWhatMayHaveChanged(t *testing.T) {
	store, clock := newGated()
	c := New(store, Config{Now: clock.Now})
	ctx := context.Background()
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleOpen, Version: 1})
	store.set(&flashsale.Sale{ID: "sale_2", SKU: "boots", State: flashsale.SaleOpen, Version: 1})
	if _, err := c.Active(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sku := range []string{"kicks", "boots", "socks"} {
		stateOf(t, c, sku)
	}
	// Changed while nobody listened.
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SalePaused, Version: 2})
	store.set(&flashsale.Sale{ID: "sale_3", SKU: "socks", State: flashsale.SaleOpen, Version: 1})
	if stateOf(t, c, "kicks") != flashsale.SaleOpen || stateOf(t, c, "socks") != "404" {
		t.Fatal("the cache should still answer before Relist")
	}
	// A fill of boots reads, then stalls across the Relist.
	store.set(&flashsale.Sale{ID: "sale_2", SKU: "boots", State: flashsale.SaleOpen, Version: 1})
	c.expire("boots")
	reading, release := store.holdNext()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.BySKU(ctx, "boots")
	}()
	<-reading
	store.set(&flashsale.Sale{ID: "sale_2", SKU: "boots", State: flashsale.SalePaused, Version: 2})
	if err := c.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	release()
	<-done
	for sku, want := range map[string]flashsale.SaleState{"kicks": flashsale.SalePaused, "socks": flashsale.SaleOpen,
		"boots": flashsale.SalePaused} {
		if got := stateOf(t, c, sku); got != want {
			t.Errorf("%s after Relist: %s, want %s", sku, got, want)
		}
	}
}

// A SKU cached as having no sale is found at the next listing of every
// sale that has it, however fresh the entry: a notification that never
// came costs at most one listing.
func TestListingReplacesAnAbsentEntry(t *testing.T) {
	store, clock := newGated()
	c := New(store, Config{Now: clock.Now})
	if got := stateOf(t, c, "kicks"); got != "404" {
		t.Fatalf("before the sale: %s", got)
	}
	store.set(&flashsale.Sale{ID: "sale_1", SKU: "kicks", State: flashsale.SaleOpen, Version: 1})
	if got := stateOf(t, c, "kicks"); got != "404" {
		t.Fatalf("before the listing: %s; the cached absence should still answer", got)
	}
	if _, err := c.Active(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, c, "kicks"); got != flashsale.SaleOpen {
		t.Fatalf("after a listing that has it: %s, want open", got)
	}
}
