// Package sweeper is the background service that gives the units of
// expired holds back to stock, every second, and every few rounds
// reconciles the gate with the record.
//
// The restock is where real oversells are born: a sweeper that returns the
// same hold twice inflates the stock silently, and the extra units then sell
// through a perfectly correct purchase path. The sweeper therefore decides
// nothing itself: it runs package restock, where the record decides (a
// conditional UPDATE sets restocked_at only where it is still NULL, and
// only the sweeper whose UPDATE took the row restocks the gate), and where
// the reconciler finishes any restock interrupted between its two steps.
// However many sweepers run, and wherever one dies, a hold comes back
// exactly once.
//
// Overselling could be caused here, by an expiry given back twice; so the
// sweeper gives nothing back itself, only through package restock, which the
// record lets decide once. It prevents nothing: package memory and package
// redis do.
package sweeper

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
	"github.com/flashsale/flashsale/restock"
)

// Sales lists the sales whose gates the reconciler looks after.
type Sales interface {
	Active(ctx context.Context) ([]*flashsale.Sale, error)
}

// Config configures a Sweeper. Restock and Sales are required.
type Config struct {
	// Restock gives the units back, and reconciles.
	Restock *restock.Service
	Sales   Sales
	Now     func() time.Time
	// Interval between sweeps (default 1s); a hold outlives its expiry by
	// at most about this long.
	Interval time.Duration
	// Batch is how many expired holds one claim takes (default 500).
	Batch int
	// ReconcileEvery is how many sweeps pass between reconciliations
	// (default 5).
	ReconcileEvery int
	Logger         *slog.Logger
}

// Sweeper is a background service. Safe for concurrent use; several may
// run against one record and one gate.
type Sweeper struct {
	cfg  Config
	loop loop.Loop
}

// New returns a Sweeper.
func New(cfg Config) *Sweeper {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{cfg: cfg}
}

// Start runs sweeps (and, every few, a reconciliation) until Stop.
func (s *Sweeper) Start(ctx context.Context) {
	round := 0
	s.loop.Start(ctx, s.cfg.Interval, "sweeper", s.cfg.Logger, func(ctx context.Context) error {
		_, err := s.SweepOnce(ctx)
		if round%s.cfg.ReconcileEvery == 0 {
			if _, rerr := s.ReconcileAll(ctx); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		round++
		return err
	})
}

// Stop stops the sweeper and waits for its round to finish.
func (s *Sweeper) Stop() { s.loop.Stop() }

// SweepOnce claims every hold expired by now, batch by batch, and gives
// their units back to the gate (restock.Service.Expire). It reports how
// many units the gate took back.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	units := 0
	for {
		claimed, n, err := s.cfg.Restock.Expire(ctx, now, s.cfg.Batch)
		units += n
		if err != nil || claimed < s.cfg.Batch {
			return units, err
		}
	}
}

// ReconcileAll reconciles every active sale.
func (s *Sweeper) ReconcileAll(ctx context.Context) (int, error) {
	sales, err := s.cfg.Sales.Active(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, sale := range sales {
		n, err := s.Reconcile(ctx, sale)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// Reconcile finishes the give-backs of the sale left halfway
// (restock.Service.Reconcile), and reports the units returned.
func (s *Sweeper) Reconcile(ctx context.Context, sale *flashsale.Sale) (int, error) {
	return s.cfg.Restock.Reconcile(ctx, sale)
}
