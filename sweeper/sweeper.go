// Package sweeper returns the units of expired holds to stock, exactly once,
// however many sweepers run and wherever one dies.
//
// The restock is where real oversells are born: a sweeper that returns the
// same hold twice inflates the stock silently, and the extra units then sell
// through a perfectly correct purchase path. So the record decides: a
// conditional UPDATE sets restocked_at only where it is still NULL, and only
// the sweeper whose UPDATE took the row restocks the gate. The gate's
// restock is itself idempotent per reservation, and the reconciler finishes
// any restock interrupted between its two steps, so a crash can neither
// count a unit twice nor lose one.
package sweeper

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
	"github.com/flashsale/flashsale/metrics"
)

// Store is the part of the record the sweeper uses.
type Store interface {
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]*flashsale.Reservation, error)
	ReservationStates(ctx context.Context, saleID string, ids []string) (map[string]flashsale.ReservationState, error)
	VoidReservation(ctx context.Context, r *flashsale.Reservation) (bool, error)
}

// Sales lists the sales whose gates the reconciler looks after.
type Sales interface {
	Active(ctx context.Context) ([]*flashsale.Sale, error)
}

// Config configures a Sweeper. Store, Gate and Sales are required.
type Config struct {
	Store Store
	Gate  flashsale.GateAdmin
	Sales Sales
	Now   func() time.Time
	// Interval between sweeps (default 1s); a hold outlives its expiry by
	// at most about this long.
	Interval time.Duration
	// Batch is how many expired holds one claim takes (default 500).
	Batch int
	// ReconcileEvery is how many sweeps pass between reconciliations
	// (default 5).
	ReconcileEvery int
	// OrphanGrace is how old a hold the record does not know must be
	// before the reconciler voids it (default 30s): far longer than any
	// record write in flight.
	OrphanGrace time.Duration
	Logger      *slog.Logger
	Metrics     *metrics.Metrics

	// afterClaim, in tests, runs between the record's claim and the gate's
	// restock; returning true abandons the batch there, as a sweeper killed
	// between its two steps would.
	afterClaim func(*flashsale.Reservation) bool
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
	if cfg.OrphanGrace <= 0 {
		cfg.OrphanGrace = 30 * time.Second
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

// SweepOnce claims every hold expired by now, batch by batch, and returns
// their units to the gate. It reports how many units it restocked.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	units := 0
	for {
		claimed, err := s.cfg.Store.ExpireDue(ctx, now, s.cfg.Batch)
		if err != nil {
			return units, err
		}
		for _, r := range claimed {
			if s.cfg.afterClaim != nil && s.cfg.afterClaim(r) {
				return units, errors.New("sweeper: abandoned after the claim (test)")
			}
			moved, err := s.cfg.Gate.Restock(ctx, r.SaleID, r.ID, "sweeper")
			switch {
			case errors.Is(err, flashsale.ErrNotLoaded):
				// The gate lost the sale; its rebuild reads the record, where
				// this hold is already expired.
			case err != nil:
				// The record has decided; the reconciler finishes the
				// restock when the gate answers again.
				s.cfg.Logger.Warn("sweeper: gate restock failed; the reconciler will finish it",
					"reservation", r.ID, "err", err)
			case moved:
				units += r.Quantity
				s.cfg.Metrics.Restocked("sweeper", r.Quantity)
			}
		}
		if len(claimed) < s.cfg.Batch {
			return units, nil
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

// Reconcile compares the holds the gate keeps for a sale with the record
// and finishes what was left halfway: a hold the record has ended
// (expired, cancelled, voided) but the gate still keeps is restocked; a
// hold the record never took, older than OrphanGrace, is voided in the
// record and then restocked. Both steps are exactly-once, so reconciling
// twice, or beside a sweeper, changes nothing more. It reports the units
// returned.
func (s *Sweeper) Reconcile(ctx context.Context, sale *flashsale.Sale) (int, error) {
	holds, err := s.cfg.Gate.Holds(ctx, sale.ID)
	if err != nil || len(holds) == 0 {
		return 0, err
	}
	const chunk = 1000
	units := 0
	now := s.cfg.Now()
	for start := 0; start < len(holds); start += chunk {
		part := holds[start:min(start+chunk, len(holds))]
		ids := make([]string, len(part))
		for i, h := range part {
			ids[i] = h.ReservationID
		}
		states, err := s.cfg.Store.ReservationStates(ctx, sale.ID, ids)
		if err != nil {
			return units, err
		}
		for _, h := range part {
			state, known := states[h.ReservationID]
			switch {
			case known && state.Live():
				continue
			case known && state == flashsale.ReservationVoided:
				moved, err := s.cfg.Gate.Void(ctx, sale.ID, h, "reconcile")
				if err != nil {
					return units, err
				}
				if moved {
					units += h.Quantity
					s.cfg.Metrics.Restocked("reconcile", h.Quantity)
				}
			case known:
				moved, err := s.cfg.Gate.Restock(ctx, sale.ID, h.ReservationID, "reconcile")
				if err != nil {
					return units, err
				}
				if moved {
					units += h.Quantity
					s.cfg.Metrics.Restocked("reconcile", h.Quantity)
					s.cfg.Logger.Warn("reconciler finished an interrupted restock",
						"sku", sale.SKU, "reservation", h.ReservationID, "state", state)
				}
			case now.Sub(h.CreatedAt) >= s.cfg.OrphanGrace:
				tomb := &flashsale.Reservation{ID: h.ReservationID, SaleID: sale.ID, UserID: h.UserID,
					Quantity: h.Quantity, State: flashsale.ReservationVoided, PaymentFingerprint: h.Instrument,
					CreatedAt: h.CreatedAt, ExpiresAt: h.CreatedAt.Add(sale.Hold()), RestockedAt: now, Epoch: sale.Epoch}
				inserted, err := s.cfg.Store.VoidReservation(ctx, tomb)
				if err != nil {
					return units, err
				}
				if !inserted {
					// The record took the hold after all; leave it.
					continue
				}
				moved, err := s.cfg.Gate.Void(ctx, sale.ID, h, "reconcile")
				if err != nil {
					return units, err
				}
				if moved {
					units += h.Quantity
					s.cfg.Metrics.Restocked("reconcile", h.Quantity)
					s.cfg.Logger.Warn("reconciler voided a hold the record never took",
						"sku", sale.SKU, "reservation", h.ReservationID)
				}
			}
		}
	}
	return units, nil
}
