package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// The refusals of ConfirmReservation and CancelReservation, for the shopper.
func errExpired(r *flashsale.Reservation) error {
	return flashsale.Errorf(flashsale.CodeReservationExpired, "The reservation expired at %s.", r.ExpiresAt.Format(time.RFC3339))
}

func errCancelled() error {
	return flashsale.Errorf(flashsale.CodeReservationCancelled, "The reservation was cancelled.")
}

func errConfirmed() error {
	return flashsale.Errorf(flashsale.CodeReservationConfirmed, "The reservation is confirmed; it is an order now.")
}

// CreateReservation inserts r as pending if the sale is still at r.Epoch,
// with its reservation.created event and the events in also (those whose id
// the outbox has are skipped), which exist exactly when the reservation
// does. The insert holds off BeginRebuild until it commits, and fails once
// BeginRebuild has begun. On success r.State is pending and r.Version 1.
//
// Errors: ErrStaleEpoch (the sale's epoch moved on), ErrNotFound (no such
// sale), ErrDuplicate (the id, the shopper's idempotency key, the shopper's
// live hold, the instrument's live hold or a hold on the same admission
// exists).
func (s *Store) CreateReservation(ctx context.Context, r *flashsale.Reservation, also ...flashsale.Event) error {
	created := *r
	created.State, created.Version = flashsale.ReservationPending, 1
	events := append([]flashsale.Event{flashsale.ReservationEvent(flashsale.EventReservationCreated, &created, "", r.CreatedAt)}, also...)
	err := s.d.Write(ctx, func(x Statements) error {
		inserted, err := x.InsertReservation(ctx, r, events)
		if err != nil || inserted {
			return err
		}
		// Sales are never deleted: a sale that exists and refused the
		// insert is at another epoch.
		exists, err := x.SaleExists(ctx, r.SaleID)
		switch {
		case err != nil:
			return err
		case !exists:
			return fmt.Errorf("sale %s: %w", r.SaleID, flashsale.ErrNotFound)
		}
		return fmt.Errorf("at epoch %d: %w", r.Epoch, flashsale.ErrStaleEpoch)
	})
	if err != nil {
		return s.fail(err, "create reservation %s", r.ID)
	}
	s.eventsWritten()
	r.State = flashsale.ReservationPending
	r.Version = 1
	r.RestockedAt, r.ConfirmedAt, r.OrderID = time.Time{}, time.Time{}, ""
	return nil
}

// Reservation returns the reservation with the id, whatever its state
// (voided included: hiding those from shoppers is the API's job), with its
// SKU and, once confirmed, its OrderID. ErrNotFound if there is none.
func (s *Store) Reservation(ctx context.Context, id string) (*flashsale.Reservation, error) {
	r, err := s.reservation(ctx, s.d.Reads(), id)
	if err != nil {
		return nil, s.fail(err, "reservation %s", id)
	}
	return r, nil
}

func (s *Store) reservation(ctx context.Context, x Statements, id string) (*flashsale.Reservation, error) {
	return one(x.ReservationByID(ctx, id), s.scanReservation)
}

// ReservationByKey returns the shopper's reservation of the sale made under
// the idempotency key, or ErrNotFound. Voided tombstones keep no key and are
// never found here.
func (s *Store) ReservationByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Reservation, error) {
	r, err := one(s.d.Reads().ReservationByKey(ctx, saleID, userID, key), s.scanReservation)
	if err != nil {
		return nil, s.fail(err, "reservation of %s under key %q", userID, key)
	}
	return r, nil
}

// ConfirmReservation turns the shopper's pending reservation into an order
// if its hold has not ended at now: one conditional UPDATE, and the order's
// INSERT, its audit row (from nothing to confirmed, by "shopper:<userID>")
// and its order.confirmed event in the same transaction when it moved a
// row. A reservation that is already confirmed returns the order it became
// (the first paymentRef stays).
//
// Errors: ErrNotFound (no such reservation, another shopper's, or voided),
// CodeReservationExpired (expired, or pending with ExpiresAt at or before
// now), CodeReservationCancelled.
func (s *Store) ConfirmReservation(ctx context.Context, id, userID, paymentRef string, now time.Time) (*flashsale.Reservation, *flashsale.Order, error) {
	var (
		res     *flashsale.Reservation
		ord     *flashsale.Order
		created bool
	)
	err := s.d.Tx(ctx, func(x Statements) error {
		created = false
		var err error
		res, err = s.scanReservation(x.ConfirmPending(ctx, id, userID, now))
		if errors.Is(err, sql.ErrNoRows) {
			res, ord, err = s.confirmRefused(ctx, x, id, userID, now)
			return err
		}
		if err != nil {
			return err
		}
		ord, err = s.scanOrder(x.InsertOrder(ctx, flashsale.NewID("ord_"), res, paymentRef, now))
		if err != nil {
			return err
		}
		res.OrderID = ord.ID
		actor := "shopper:" + userID
		ev := flashsale.OrderEvent(flashsale.EventOrderConfirmed, ord, "", actor, "", false, now)
		if err := s.insertTransition(ctx, x, ord, "", actor, "", ev.ID, now); err != nil {
			return err
		}
		_, err = x.InsertEvents(ctx, []flashsale.Event{ev})
		created = err == nil
		return err
	})
	if err != nil {
		return nil, nil, s.fail(err, "confirm reservation %s", id)
	}
	if created {
		s.eventsWritten()
	}
	return res, ord, nil
}

// confirmRefused says why the confirming UPDATE moved no row, from the row
// as the same transaction reads it.
func (s *Store) confirmRefused(ctx context.Context, x Statements, id, userID string, now time.Time) (*flashsale.Reservation, *flashsale.Order, error) {
	cur, err := s.reservation(ctx, x, id)
	if err != nil {
		return nil, nil, fmt.Errorf("reservation %s: %w", id, err)
	}
	if cur.UserID != userID || cur.State == flashsale.ReservationVoided {
		return nil, nil, fmt.Errorf("reservation %s of %s: %w", id, userID, flashsale.ErrNotFound)
	}
	switch cur.State {
	case flashsale.ReservationConfirmed:
		ord, err := s.scanOrder(x.OrderOfReservation(ctx, id))
		if err != nil {
			return nil, nil, fmt.Errorf("order of reservation %s: %w", id, err)
		}
		return cur, ord, nil
	case flashsale.ReservationExpired:
		return nil, nil, errExpired(cur)
	case flashsale.ReservationCancelled:
		return nil, nil, errCancelled()
	case flashsale.ReservationPending:
		if !cur.ExpiresAt.After(now) {
			return nil, nil, errExpired(cur)
		}
	}
	// Pending and unexpired, yet the UPDATE did not take it: the row was
	// written after the UPDATE's snapshot (an engine with one writer never
	// gets here). Reading again will settle it.
	return nil, nil, fmt.Errorf("reservation %s is %s: %w", id, cur.State, flashsale.ErrVersionConflict)
}

// CancelReservation cancels the shopper's pending reservation and marks it
// restocked, in one conditional UPDATE, and writes its
// reservation.cancelled event in the same transaction; restocked reports
// whether this call did so, in which case (and only then) the caller
// returns the units to the gate. Cancelling a cancelled reservation
// returns it with restocked false.
//
// Errors: ErrNotFound (no such reservation, another shopper's, or voided),
// CodeReservationExpired, CodeReservationConfirmed.
func (s *Store) CancelReservation(ctx context.Context, id, userID string, now time.Time) (*flashsale.Reservation, bool, error) {
	var (
		res       *flashsale.Reservation
		restocked bool
	)
	err := s.d.Tx(ctx, func(x Statements) error {
		restocked = false
		r, err := s.scanReservation(x.CancelPending(ctx, id, userID, now))
		if err == nil {
			res, restocked = r, true
			_, err = x.InsertEvents(ctx, []flashsale.Event{flashsale.ReservationEvent(flashsale.EventReservationCancelled, r, "shopper", now)})
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := s.reservation(ctx, x, id)
		if err != nil {
			return fmt.Errorf("reservation %s: %w", id, err)
		}
		if cur.UserID != userID || cur.State == flashsale.ReservationVoided {
			return fmt.Errorf("reservation %s of %s: %w", id, userID, flashsale.ErrNotFound)
		}
		switch cur.State {
		case flashsale.ReservationCancelled:
			res = cur
			return nil
		case flashsale.ReservationExpired:
			return errExpired(cur)
		case flashsale.ReservationConfirmed:
			return errConfirmed()
		}
		return fmt.Errorf("reservation %s is %s: %w", id, cur.State, flashsale.ErrVersionConflict)
	})
	if err != nil {
		return nil, false, s.fail(err, "cancel reservation %s", id)
	}
	if restocked {
		s.eventsWritten()
	}
	return res, restocked, nil
}

// ExpireDue claims up to limit pending reservations whose hold ended at or
// before now (those that ended first), marks them expired and restocked at
// now in the same statement, writes their reservation.expired events in the
// same transaction, and returns them (with SKU). The statement takes each
// reservation at most once however many callers run it at once, and only
// while it is pending and not restocked, so each reservation is returned
// to exactly one caller, once. A limit below 1 claims nothing.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) ([]*flashsale.Reservation, error) {
	if limit < 1 {
		return nil, nil
	}
	var expired []*flashsale.Reservation
	err := s.d.Tx(ctx, func(x Statements) error {
		expired = nil
		if err := x.ExpireDue(ctx, now, limit, collect(&expired, s.scanReservation)); err != nil || len(expired) == 0 {
			return err
		}
		// One reservation.expired event per hold, in the same
		// transaction as the claim that ended it.
		events := make([]flashsale.Event, len(expired))
		for i, r := range expired {
			events[i] = flashsale.ReservationEvent(flashsale.EventReservationExpired, r, "expiry", now)
		}
		_, err := x.InsertEvents(ctx, events)
		return err
	})
	if err != nil {
		return nil, s.fail(err, "expire due holds")
	}
	if len(expired) > 0 {
		s.eventsWritten()
	}
	return expired, nil
}

// VoidReservation inserts r as a voided tombstone, restocked at
// r.RestockedAt, unless a reservation with r.ID exists; it reports whether
// it inserted. The tombstone keeps no idempotency key or request hash, so
// that the shopper's retry under the key is a fresh reservation; voided is
// not live, so it blocks neither the shopper nor the instrument.
func (s *Store) VoidReservation(ctx context.Context, r *flashsale.Reservation) (bool, error) {
	if r.RestockedAt.IsZero() {
		return false, fmt.Errorf("%s: void reservation %s: RestockedAt is required", s.d.Name(), r.ID)
	}
	inserted, err := write(ctx, s, func(x Statements) (bool, error) { return x.InsertVoided(ctx, r) })
	if err != nil {
		return false, s.fail(err, "void reservation %s", r.ID)
	}
	return inserted, nil
}

// ReservationStates returns the state of each of ids that is a reservation
// of the sale; the others are absent from the map.
func (s *Store) ReservationStates(ctx context.Context, saleID string, ids []string) (map[string]flashsale.ReservationState, error) {
	states := make(map[string]flashsale.ReservationState, len(ids))
	if len(ids) == 0 {
		return states, nil
	}
	err := s.d.Reads().ReservationStates(ctx, saleID, ids, func(row Row) error {
		var id, state string
		if err := row.Scan(&id, &state); err != nil {
			return err
		}
		states[id] = flashsale.ReservationState(state)
		return nil
	})
	if err != nil {
		return nil, s.fail(err, "reservation states")
	}
	return states, nil
}

// Attempts returns every reservation of the sale but the voided, with the
// order each became, oldest first.
func (s *Store) Attempts(ctx context.Context, saleID string) ([]flashsale.Attempt, error) {
	var out []flashsale.Attempt
	if err := s.d.Reads().Attempts(ctx, saleID, collect(&out, s.scanAttempt)); err != nil {
		return nil, s.fail(err, "attempts of %s", saleID)
	}
	return out, nil
}
