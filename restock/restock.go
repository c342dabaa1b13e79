// Package restock gives units back to stock: the one place where stock
// increases, as package memory and package redis hold the one place where
// it decreases.
//
// The restock is where real oversells are born. A hold given back twice
// inflates the stock silently, and the extra units then sell through a
// perfectly correct purchase path. So every give-back is two steps, in one
// order, written here once: the record decides, with a conditional
// statement that only one caller's can win (an expiry claim, a cancel, an
// order moved to cancelled or refunded, a tombstone insert); and only once
// the record has ended the hold is the gate asked, whose Restock and Void
// are themselves idempotent per reservation. A give-back cut between the two
// steps (the gate did not answer, the process died) is finished by
// Reconcile, which compares the gate's holds with the record. Every path
// shares one policy for a gate that failed or that has no counter for the
// sale, and one tombstone.
//
// Only this package calls the gate's Restock and Void: they are on Gate,
// which the engine hands to New alone; everywhere else the gate is a
// flashsale.Gate or flashsale.GateAdmin, which lack them.
//
// Overselling could be caused here, and is closed here: a unit given back
// twice sells twice. The record decides once (a conditional update), and
// only then does the gate give back, itself idempotent per reservation.
package restock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/metrics"
)

// Gate is the stock gate whole: flashsale.GateAdmin and the two calls that
// give units back. Implementations (package memory, package redis) are
// safe for concurrent use and pass the conformance suite in package
// gatetest.
type Gate interface {
	flashsale.GateAdmin

	// Restock returns a hold's units to stock, once: it reports true if
	// this call moved the units, false if the gate held nothing under
	// that id (already restocked, or never taken). It returns
	// flashsale.ErrNotLoaded if the gate has no counter for the sale.
	Restock(ctx context.Context, saleID, reservationID, source string) (bool, error)

	// Void is Restock for a hold the record never acknowledged: it also
	// forgets the hold's idempotency key (if the key still names this
	// hold), so the shopper's retry under that key is a fresh attempt
	// rather than a replay, and un-spends the hold's admission (h's
	// AdmissionID), so that attempt may use the same admission token. It
	// reports whether this call moved the units.
	Void(ctx context.Context, saleID string, h flashsale.Hold, source string) (bool, error)
}

// Record is the part of the record that decides when a hold is over.
// Each method's answer says whether this call ended the hold (and only
// one call can), and so whether its caller gives the units back.
type Record interface {
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]*flashsale.Reservation, error)
	CancelReservation(ctx context.Context, id, userID string, now time.Time) (*flashsale.Reservation, bool, error)
	ChangeOrder(ctx context.Context, c flashsale.OrderChange) (*flashsale.Order, bool, error)
	VoidReservation(ctx context.Context, r *flashsale.Reservation) (bool, error)
	ReservationStates(ctx context.Context, saleID string, ids []string) (map[string]flashsale.ReservationState, error)
}

// Config configures a Service. Record and Gate are required.
type Config struct {
	Record Record
	Gate   Gate
	// Now is the clock of cancels, tombstones and the orphan grace
	// (default time.Now).
	Now func() time.Time
	// GateTimeout bounds one gate call (default 500ms). A gate call is
	// not cancelled with its caller: once the record has decided, the
	// give-back is worth finishing.
	GateTimeout time.Duration
	// OrphanGrace is how old a hold the record does not know must be
	// before Reconcile voids it (default 30s): far longer than any record
	// write in flight.
	OrphanGrace time.Duration
	// Logger hears of give-backs the gate did not take (nil: discarded).
	Logger *slog.Logger
	// Metrics counts the units given back, by source, and times the gate
	// calls (nil: none).
	Metrics *metrics.Metrics
}

// Service gives units back. It keeps no state of its own: several, in one
// process or on many servers behind a load balancer, may run against one
// record and one gate, since the record's conditional statements decide
// between them (TestEveryPathGivesBackOnce races them). Safe for
// concurrent use; the zero value is not usable, call New.
type Service struct {
	cfg Config
	// afterClaim, in tests, runs between an expiry's claim and its
	// give-back; returning true abandons the batch there, as a sweeper
	// killed between its two steps would.
	afterClaim func(*flashsale.Reservation) bool
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.GateTimeout <= 0 {
		cfg.GateTimeout = 500 * time.Millisecond
	}
	if cfg.OrphanGrace <= 0 {
		cfg.OrphanGrace = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg}
}

// errAbandoned is Expire's error when a test abandoned the batch.
var errAbandoned = errors.New("restock: abandoned after the claim (test)")

// Expire claims up to limit holds that expired by now (the record marks
// them expired and restocked, each for exactly one claimer), and gives
// back the units of each. It returns how many holds it claimed and how
// many units the gate took back; a claim of fewer than limit means no
// more are due. A give-back the gate did not take, and the rest of the
// batch when ctx ends (the sweeper stopped), are left to Reconcile.
func (s *Service) Expire(ctx context.Context, now time.Time, limit int) (claimed, units int, err error) {
	expired, err := s.cfg.Record.ExpireDue(ctx, now, limit)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range expired {
		if s.afterClaim != nil && s.afterClaim(r) {
			return len(expired), units, errAbandoned
		}
		if err := ctx.Err(); err != nil {
			return len(expired), units, err
		}
		if moved, _ := s.restock(ctx, "sweeper", r.SaleID, r.ID, r.Quantity); moved {
			units += r.Quantity
		}
	}
	return len(expired), units, nil
}

// Cancel cancels the shopper's pending reservation in the record and gives
// its units back. A repeated cancel asks the gate too, whose restock is
// idempotent per reservation: so that when any cancel returns, the units
// are back, even while the first canceller is still on its way to the
// gate. The record's errors are returned as they are
// (flashsale.ErrNotFound, CodeReservationExpired, CodeReservationConfirmed);
// the gate's are not: the record has decided, and Reconcile finishes.
func (s *Service) Cancel(ctx context.Context, id, userID string) (*flashsale.Reservation, error) {
	r, _, err := s.cfg.Record.CancelReservation(ctx, id, userID, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	_, _ = s.restock(ctx, "cancel", r.SaleID, r.ID, r.Quantity)
	return r, nil
}

// ChangeOrder moves an order (flashsale.OrderStore.ChangeOrder). Cancelling
// or refunding ends the order's reservation in the same transaction, and
// if that took the row, the units go back to the gate; restocked reports
// whether the gate took them. The record's errors are returned as they
// are; the gate's are not: the record has decided, and Reconcile finishes.
func (s *Service) ChangeOrder(ctx context.Context, c flashsale.OrderChange) (o *flashsale.Order, restocked bool, err error) {
	o, ended, err := s.cfg.Record.ChangeOrder(ctx, c)
	if err != nil || !ended {
		return o, false, err
	}
	restocked, _ = s.restock(ctx, "order."+string(c.To), o.SaleID, o.ReservationID, o.Quantity)
	return o, restocked, nil
}

// Void gives back the units of a hold the gate took and the record did not
// (its write failed, was refused, or never came): the record decides by
// inserting the hold's tombstone, which fails if the reservation was
// written after all, and only then does the gate give the units back. A
// retry, a concurrent Reconcile or a write that did commit can never make
// it count twice. epoch is the epoch in the gate's answer that took the
// hold, or 0 if the caller does not have it (see tombstone). It reports
// whether the gate took the units back; if the record cannot be reached
// now, Reconcile finishes.
func (s *Service) Void(ctx context.Context, sale *flashsale.Sale, h flashsale.Hold, epoch int64) bool {
	if epoch == 0 {
		epoch = s.gateEpoch(ctx, sale)
	}
	inserted, err := s.cfg.Record.VoidReservation(ctx, tombstone(sale, h, epoch, s.cfg.Now()))
	if err != nil {
		s.cfg.Logger.Warn("restock: could not void the hold in the record now; the reconciler will",
			"sku", sale.SKU, "reservation", h.ReservationID, "err", err)
		return false
	}
	if !inserted {
		// The record has the reservation after all: it is live.
		return false
	}
	moved, _ := s.void(ctx, "void", sale.ID, h)
	return moved
}

// FinishVoid gives back a hold the record has already voided but the gate
// still keeps (a void cut between its two steps). It reports whether this
// call moved the units; an error is the gate's (never ErrNotLoaded).
func (s *Service) FinishVoid(ctx context.Context, saleID string, h flashsale.Hold) (bool, error) {
	return s.void(ctx, "void", saleID, h)
}

// tombstone is the voided reservation that stands for a hold the record
// never took: restocked at, keeping no idempotency key (so the shopper's
// retry under it is a fresh attempt).
//
// Its epoch is the epoch of the gate that took the hold, as a reservation
// row's is (CreateReservation writes one only at its sale's epoch): the
// epoch in the gate's answer when the caller has it (the purchase path),
// else the gate's epoch now (gateEpoch). The record's own epoch is not the
// hold's: a rebuild bumps it before the gate's, so a hold taken just
// before would be dated after it.
func tombstone(sale *flashsale.Sale, h flashsale.Hold, epoch int64, at time.Time) *flashsale.Reservation {
	return &flashsale.Reservation{ID: h.ReservationID, SaleID: sale.ID, SKU: sale.SKU, UserID: h.UserID,
		Quantity: h.Quantity, State: flashsale.ReservationVoided, PaymentFingerprint: h.Instrument, Epoch: epoch,
		CreatedAt: h.CreatedAt, ExpiresAt: h.CreatedAt.Add(sale.Hold()), RestockedAt: at}
}

// gateEpoch is the epoch of the gate's counter for the sale: the epoch a
// hold the gate keeps and the record lacks was taken under, since a
// rebuild, which alone moves a loaded gate's epoch, replaces every hold
// with the record's live ones. If the gate cannot say, the sale's epoch
// as the caller read it stands in.
func (s *Service) gateEpoch(ctx context.Context, sale *flashsale.Sale) int64 {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GateTimeout)
	defer cancel()
	snap, err := s.cfg.Gate.Snapshot(gctx, sale.ID)
	if err != nil || !snap.Loaded || snap.Epoch < 1 {
		return sale.Epoch
	}
	return snap.Epoch
}

// restock gives back, through the gate's Restock, a hold the record has
// ended (see giveBack).
func (s *Service) restock(ctx context.Context, source, saleID, reservationID string, units int) (bool, error) {
	return s.giveBack(ctx, "restock", source, reservationID, units, func(ctx context.Context) (bool, error) {
		return s.cfg.Gate.Restock(ctx, saleID, reservationID, source)
	})
}

// void gives back, through the gate's Void, a hold the record has voided
// (see giveBack).
func (s *Service) void(ctx context.Context, source, saleID string, h flashsale.Hold) (bool, error) {
	return s.giveBack(ctx, "void", source, h.ReservationID, h.Quantity, func(ctx context.Context) (bool, error) {
		return s.cfg.Gate.Void(ctx, saleID, h, source)
	})
}

// giveBack runs one give-back call of the gate (op, for the gate metrics)
// for a hold the record has already ended, under the one policy of every
// path:
//
//   - the call is bounded by GateTimeout and not cancelled with its
//     caller: the record has decided, and the give-back is worth finishing;
//   - flashsale.ErrNotLoaded is no failure: a gate with no counter for the
//     sale keeps none of its holds, and the rebuild that loads it again
//     reads the record, where this hold is already over;
//   - any other error is returned (and logged): the reconciler finishes
//     the give-back when the gate answers again;
//   - units the gate took are counted (flashsale_restocked_units_total,
//     by source).
//
// It reports whether this call moved the units.
func (s *Service) giveBack(ctx context.Context, op, source, reservationID string, units int, call func(context.Context) (bool, error)) (bool, error) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GateTimeout)
	defer cancel()
	start := time.Now()
	moved, err := call(gctx)
	s.cfg.Metrics.Gate(op, time.Since(start), err)
	switch {
	case errors.Is(err, flashsale.ErrNotLoaded):
		s.cfg.Logger.Debug("restock: the gate has no counter for the sale; its rebuild will find the hold over",
			"source", source, "reservation", reservationID)
		return false, nil
	case err != nil:
		s.cfg.Logger.Warn("restock: the record ended the hold but the gate did not take its units; the reconciler will",
			"source", source, "reservation", reservationID, "err", err)
		return false, err
	case moved:
		s.cfg.Metrics.Restocked(source, units)
	}
	return moved, nil
}
