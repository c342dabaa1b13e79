package faults_test

import (
	"context"
	"testing"
)

// TestEveryRequestTwice: a network that delivers every request twice, both
// copies at once: each reserve (same Idempotency-Key), confirm and cancel
// of every shopper arrives twice, under concurrent load. Both copies get
// the same answer, byte for byte; one reservation per key; one order per
// reservation; a cancellation's units come back once; the totals are
// exact.
func TestEveryRequestTwice(t *testing.T) {
	needFaults(t)
	r := newRig(t, rigConfig{start: true})
	const sku = "watch"
	r.createSale(sku, stock, nil)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	l := r.startLoad(ctx, sku, shoppers, workers, func(i int) shopperPlan {
		p := mixed(i)
		p.twice = true
		return p
	})
	outcomes := l.wait(t, within)
	r.settle(sku)
	r.verify(sku, outcomes, row{fault: "6 every request delivered twice, at once"})
}
