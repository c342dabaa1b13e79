package catalog

import (
	"context"
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
