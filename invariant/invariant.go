// Package invariant checks, continuously, the one hard invariant of a sale:
//
//	counter + confirmed + pending == initial
//
// and has the authority to pause the sale by itself when it fails. A
// correctness property verified only afterwards is a report, delivered after
// the money moved.
//
// The gate and the record cannot be read in one atomic step, and at full
// load some holds are always in flight between them (taken in the gate, not
// yet written; expired in the record, not yet restocked). So the watcher
// does not compare the two sums naively, which would pause a healthy sale.
// It checks two things that hold exactly, whatever is in flight:
//
//  1. Inside the gate, read atomically: counter + held == initial, where
//     held is the units the gate's own wins and restocks account for. A
//     second writer changing the counter breaks it at once, and the gate's
//     audit log names the writer.
//  2. Across the two: the record's live units (confirmed + pending), read
//     between two gate snapshots, can never exceed the most the gate can
//     have held meanwhile (wins by the second snapshot minus restocks by
//     the first), because a hold enters the gate before the record and
//     leaves the record before the gate. If they do, the gate has
//     forgotten holds the record still has, and it would sell their units
//     again.
//
// The naive difference is still computed and published for operators; in a
// healthy sale it is zero or slightly negative (holds in flight).
//
// A sale whose counter is split over shards (flashsale.ShardOf) is checked
// the same way on the gate's sums, read at one consistent point of the
// transfers between shards, with units in flight counted in the counter:
//
//	sum of shard counters + units in flight + confirmed + pending == initial
//
// plus, since a sum could hide writes to two shards that cancel out, every
// shard's own counter + held == allotment (the snapshot's ShardDrift). A
// sale with a lost shard (failed over, being rebuilt) is not judged until
// the shard is back: that shard sells nothing meanwhile, and the others'
// bookkeeping is still checked by every reserve's own script.
//
// Overselling is neither prevented nor caused here: it is detected. Within a
// second of counter + confirmed + pending drifting from initial, the watcher
// pauses the sale, whichever of the gate, restock or a rebuild let it
// happen.
package invariant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
	"github.com/flashsale/flashsale/metrics"
)

// Store is the part of the record the watcher reads.
type Store interface {
	SaleTotals(ctx context.Context, saleID string) (flashsale.SaleTotals, error)
}

// Sales lists the sales to watch.
type Sales interface {
	Active(ctx context.Context) ([]*flashsale.Sale, error)
}

// Result is the outcome of one check of one sale.
type Result struct {
	OK        bool
	CheckedAt time.Time
	Initial   int64
	Counter   int64
	Confirmed int64
	Pending   int64
	// Difference is counter + confirmed + pending − initial. Positive
	// means units that do not exist could be sold.
	Difference int64
	// Reason says why the check failed; empty when OK.
	Reason string
}

// Config configures a Watcher. Gate, Store, Sales and Pause are required.
type Config struct {
	Gate  flashsale.GateAdmin
	Store Store
	Sales Sales
	// Pause pauses a sale whose invariant failed.
	Pause func(ctx context.Context, saleID, reason string)
	Now   func() time.Time
	// Interval between checks of each sale (default 1s; the contract asks
	// for at least every 2s).
	Interval time.Duration
	Logger   *slog.Logger
	Metrics  *metrics.Metrics
}

// Watcher checks every active sale at each interval. Safe for concurrent
// use.
type Watcher struct {
	cfg Config

	mu      sync.Mutex
	results map[string]Result
	loop    loop.Loop
}

// New returns a Watcher.
func New(cfg Config) *Watcher {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cfg: cfg, results: make(map[string]Result)}
}

// Start runs checks every Interval until Stop.
func (w *Watcher) Start(ctx context.Context) {
	w.loop.Start(ctx, w.cfg.Interval, "invariant: check", w.cfg.Logger, w.CheckAll)
}

// Stop stops the watcher and waits for its round to finish.
func (w *Watcher) Stop() { w.loop.Stop() }

// Last returns the last result for the sale, if it was checked.
func (w *Watcher) Last(saleID string) (Result, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.results[saleID]
	return r, ok
}

// CheckAll checks every active sale once.
func (w *Watcher) CheckAll(ctx context.Context) error {
	sales, err := w.cfg.Sales.Active(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, sale := range sales {
		if _, err := w.Check(ctx, sale); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sale.SKU, err))
		}
	}
	return errors.Join(errs...)
}

// Check checks one sale, pausing it if the invariant fails. A sale that is
// paused, or whose counter is not in the gate, is not judged: a paused sale
// sells nothing, and the warmer fails closed a sale whose counter is gone.
func (w *Watcher) Check(ctx context.Context, sale *flashsale.Sale) (Result, error) {
	first, err := w.cfg.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		return Result{}, err
	}
	totals, err := w.cfg.Store.SaleTotals(ctx, sale.ID)
	if err != nil {
		return Result{}, err
	}
	second, err := w.cfg.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		return Result{}, err
	}
	now := w.cfg.Now()
	live := totals.Confirmed + totals.Pending
	res := Result{
		OK:        true,
		CheckedAt: now,
		Initial:   int64(sale.InitialStock),
		Counter:   second.Counter,
		Confirmed: totals.Confirmed,
		Pending:   totals.Pending,
	}
	res.Difference = second.Counter + live - res.Initial
	judged := second.Loaded && first.Loaded && !second.Paused && first.Epoch == second.Epoch &&
		sale.State != flashsale.SalePaused && first.Unloaded == 0 && second.Unloaded == 0
	if judged {
		res.Reason = verdict(first, second, live)
		res.OK = res.Reason == ""
	}
	w.mu.Lock()
	w.results[sale.ID] = res
	w.mu.Unlock()
	w.cfg.Metrics.Invariant(sale.SKU, res.OK, res.Difference, now)
	if !res.OK {
		reason := "the invariant failed: " + res.Reason
		if second.Drift() != 0 && second.Counter == second.AuditedCounter {
			// An audited writer other than reserve and restock: name it.
			writer := w.lastWriter(ctx, sale.ID)
			if writer != "" {
				reason += "; the audit log names " + writer
			}
		}
		w.cfg.Logger.Error("invariant failed: pausing the sale", "sku", sale.SKU, "sale", sale.ID,
			"reason", reason, "counter", res.Counter, "confirmed", res.Confirmed, "pending", res.Pending,
			"initial", res.Initial, "difference", res.Difference)
		w.cfg.Pause(ctx, sale.ID, reason)
	}
	return res, nil
}

// verdict returns why the invariant fails, or "".
func verdict(first, second flashsale.GateSnapshot, live int64) string {
	if second.ShardDrift != 0 {
		return fmt.Sprintf("the counters of the shards disagree with their own bookkeeping by %d units in all: something wrote to them outside the reserve and restock path",
			second.ShardDrift)
	}
	if second.Counter != second.AuditedCounter {
		return fmt.Sprintf("the counter is %d but the audited changes leave it at %d: an unaudited writer changed it",
			second.Counter, second.AuditedCounter)
	}
	if d := second.Drift(); d != 0 && second.Shards > 1 {
		return fmt.Sprintf("the shards' allotments and the units in flight between them come to %d, not the initial %d: a transfer created or lost %+d units",
			second.Initial+d, second.Initial, d)
	}
	if d := second.Drift(); d != 0 {
		return fmt.Sprintf("counter + held = %d, not the initial %d: the counter was changed outside the reserve and restock path by %+d",
			second.Counter+second.Held(), second.Initial, d)
	}
	if most := second.Won - first.Restocked; live > most {
		return fmt.Sprintf("the record holds %d live units but the gate holds at most %d: the gate forgot holds and would sell their units again",
			live, most)
	}
	return ""
}

// lastWriter names the source of the newest audited counter change that
// was not the reserve path's own.
func (w *Watcher) lastWriter(ctx context.Context, saleID string) string {
	entries, err := w.cfg.Gate.Audit(ctx, saleID, 200)
	if err != nil {
		return ""
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		switch e.Op {
		case "reserve", "restock", "void", "pause", "resume", "load", "rebuild",
			"transfer-out", "transfer-in", "transfer-refund":
			continue
		}
		return fmt.Sprintf("%q (%s %+d at %s)", e.Source, e.Op, e.Delta, e.At.UTC().Format(time.RFC3339))
	}
	return ""
}
