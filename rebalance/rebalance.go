// Package rebalance looks after the sales whose counter is split over
// shards (see flashsale.ShardOf): a background service that, every
// interval and whenever it is told a shard was lost,
//
//   - finishes the transfers between shards that a dead process left in
//     flight, so that no unit stays stranded between two shards (the
//     consolidation pass);
//   - sends units to shards that ran dry from the shards with the most,
//     before their shoppers have to pull them one reserve at a time;
//   - has lost shards (whose Redis master failed over, or whose counter
//     vanished) rebuilt from the record, while the other shards keep
//     selling.
//
// It never decides what a shard holds: the gate's transfers move units
// atomically and audited, and a lost shard's counter is recomputed from
// the record by package control.
//
// Overselling could be caused here by a shard rebuilt or a transfer finished
// twice; so transfers are idempotent per id, a lost shard is rebuilt only
// from the record under a new epoch, and a sale resumes only once the sums
// check out. It is prevented in each shard's gate (package redis).
package rebalance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// Gate is the part of a sharded gate (redis.ShardedGate) the rebalancer
// drives.
type Gate interface {
	Consolidate(ctx context.Context, saleID string) (flashsale.Consolidation, error)
}

// Sales lists the sales to look after.
type Sales interface {
	Active(ctx context.Context) ([]*flashsale.Sale, error)
}

// Config configures a Rebalancer. Gate and Sales are required.
type Config struct {
	Gate  Gate
	Sales Sales
	// RebuildShards rebuilds a sale's lost shards from the record
	// (control.Service.RebuildShards); nil leaves them to the operator.
	RebuildShards func(ctx context.Context, saleID string, shards []int) error
	// Interval between passes (default 1s).
	Interval time.Duration
	Logger   *slog.Logger
}

// Rebalancer is the background service. Safe for concurrent use; several
// may run against one gate (every step they take is idempotent).
type Rebalancer struct {
	cfg  Config
	wake chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Rebalancer.
func New(cfg Config) *Rebalancer {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Rebalancer{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Notify asks for a pass now (a shard was found lost); it never blocks.
func (r *Rebalancer) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start runs passes until Stop.
func (r *Rebalancer) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.cancel, r.done = cancel, make(chan struct{})
	r.mu.Unlock()
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			if err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("rebalance", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-r.wake:
			}
		}
	}()
}

// Stop stops the rebalancer and waits for its pass to finish.
func (r *Rebalancer) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// RunOnce makes one pass over the active sales split over shards.
func (r *Rebalancer) RunOnce(ctx context.Context) error {
	sales, err := r.cfg.Sales.Active(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, sale := range sales {
		if sale.Shards <= 1 {
			continue
		}
		if err := r.sale(ctx, sale); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sale.SKU, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Rebalancer) sale(ctx context.Context, sale *flashsale.Sale) error {
	c, err := r.cfg.Gate.Consolidate(ctx, sale.ID)
	if err != nil {
		return err
	}
	if c.Landed+c.Refunded+c.Moved > 0 || c.Waiting > 0 {
		r.cfg.Logger.Info("rebalanced", "sku", sale.SKU, "landed", c.Landed, "refunded", c.Refunded,
			"waiting", c.Waiting, "moved", c.Moved)
	}
	if len(c.Lost) == 0 || sale.State == flashsale.SalePaused || r.cfg.RebuildShards == nil {
		return nil
	}
	r.cfg.Logger.Warn("shards of the stock gate lost; rebuilding them from the record", "sku", sale.SKU, "shards", c.Lost)
	return r.cfg.RebuildShards(ctx, sale.ID, c.Lost)
}
