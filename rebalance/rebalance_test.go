package rebalance

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// gate answers Consolidate with what the test sets, and signals each call.
type gate struct {
	mu     sync.Mutex
	report map[string]flashsale.Consolidation
	calls  chan string
}

func (g *gate) Consolidate(_ context.Context, saleID string) (flashsale.Consolidation, error) {
	g.mu.Lock()
	c := g.report[saleID]
	g.mu.Unlock()
	select {
	case g.calls <- saleID:
	default:
	}
	return c, nil
}

type sales []*flashsale.Sale

func (s sales) Active(context.Context) ([]*flashsale.Sale, error) { return s, nil }

func TestLostShardsAreRebuilt(t *testing.T) {
	g := &gate{report: map[string]flashsale.Consolidation{
		"open":   {Lost: []int{2}},
		"paused": {Lost: []int{0}},
	}}
	var rebuilt []string
	r := New(Config{Gate: g, Sales: sales{
		{ID: "open", SKU: "a", Shards: 3, State: flashsale.SaleOpen},
		{ID: "paused", SKU: "b", Shards: 3, State: flashsale.SalePaused},
		{ID: "whole", SKU: "c", Shards: 1, State: flashsale.SaleOpen},
	}, RebuildShards: func(_ context.Context, saleID string, shards []int) error {
		if !slices.Equal(shards, []int{2}) {
			t.Errorf("rebuild of %s shards %v", saleID, shards)
		}
		rebuilt = append(rebuilt, saleID)
		return nil
	}})
	if err := r.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A paused sale is the operator's to rebuild whole; an unsplit sale
	// has nothing to consolidate.
	if !slices.Equal(rebuilt, []string{"open"}) {
		t.Fatalf("rebuilt %v; want only the open sale's lost shard", rebuilt)
	}
}

func TestNotifyWakesAPass(t *testing.T) {
	g := &gate{calls: make(chan string, 1)}
	r := New(Config{Gate: g, Sales: sales{{ID: "s", Shards: 2}}, Interval: time.Hour})
	r.Start(t.Context())
	defer r.Stop()
	<-g.calls // the first pass, at start
	r.Notify()
	select {
	case <-g.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify did not wake a pass (the interval is an hour)")
	}
}
