package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// reservationColumns is a reservation as scanReservation reads it: r is the
// reservations row, s its sale and o its order (see reservationJoins).
const reservationColumns = `r.reservation_id, r.sale_id, s.sku, r.user_id,
	r.quantity, r.state, r.payment_fingerprint, r.idempotency_key,
	r.request_hash, r.epoch, r.created_at, r.expires_at, r.restocked_at,
	r.confirmed_at, r.version, o.order_id`

// reservationJoins completes FROM reservations r for reservationColumns.
const reservationJoins = `
	JOIN sale_events s ON s.sale_id = r.sale_id
	LEFT JOIN orders o ON o.reservation_id = r.reservation_id`

// returningReservation is reservationColumns for the RETURNING clause of a
// statement on reservations, which cannot join.
const returningReservation = `reservation_id, sale_id,
	(SELECT s.sku FROM sale_events s WHERE s.sale_id = reservations.sale_id),
	user_id, quantity, state, payment_fingerprint, idempotency_key,
	request_hash, epoch, created_at, expires_at, restocked_at,
	confirmed_at, version,
	(SELECT o.order_id FROM orders o WHERE o.reservation_id = reservations.reservation_id)`

func scanReservation(row scanner) (*flashsale.Reservation, error) {
	var (
		r                         flashsale.Reservation
		state                     string
		instr, key, hash, orderID sql.NullString
		created, expires          int64
		restocked, confirmed      sql.NullInt64
	)
	err := row.Scan(&r.ID, &r.SaleID, &r.SKU, &r.UserID,
		&r.Quantity, &state, &instr, &key,
		&hash, &r.Epoch, &created, &expires, &restocked,
		&confirmed, &r.Version, &orderID)
	if err != nil {
		return nil, err
	}
	r.State = flashsale.ReservationState(state)
	r.PaymentFingerprint, r.IdempotencyKey, r.RequestHash = instr.String, key.String, hash.String
	r.OrderID = orderID.String
	r.CreatedAt, r.ExpiresAt = timeOf(created), timeOf(expires)
	r.RestockedAt, r.ConfirmedAt = nullTimeOf(restocked), nullTimeOf(confirmed)
	return &r, nil
}

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
// the outbox has are skipped), in one write transaction, which
// BeginRebuild's cannot interleave with. On success r.State is pending and
// r.Version 1.
//
// Errors: ErrStaleEpoch (the sale's epoch moved on), ErrNotFound (no such
// sale), ErrDuplicate (the id, the shopper's idempotency key, the shopper's
// live hold, the instrument's live hold or a hold on the same admission
// exists).
func (s *Store) CreateReservation(ctx context.Context, r *flashsale.Reservation, also ...flashsale.Event) error {
	created := *r
	created.State, created.Version = flashsale.ReservationPending, 1
	events := append([]flashsale.Event{flashsale.ReservationEvent(flashsale.EventReservationCreated, &created, "", r.CreatedAt)}, also...)
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO reservations (
				reservation_id, sale_id, user_id, quantity, state,
				payment_fingerprint, idempotency_key, request_hash, epoch,
				created_at, expires_at, account_created, admission_id)
			SELECT ?1, sale_id, ?2, ?3, 'pending', ?4, ?5, ?6, epoch, ?7, ?8, ?11, ?12
			FROM sale_events
			WHERE sale_id = ?9 AND epoch = ?10`,
			r.ID, r.UserID, r.Quantity, nullText(r.PaymentFingerprint), nullText(r.IdempotencyKey), nullText(r.RequestHash),
			micros(r.CreatedAt), micros(r.ExpiresAt), r.SaleID, r.Epoch, nullMicros(r.AccountCreated), nullText(r.AdmissionID))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			_, err = insertEvents(ctx, tx, events...)
			return err
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sale_events WHERE sale_id = ?1)`, r.SaleID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("sale %s: %w", r.SaleID, flashsale.ErrNotFound)
		}
		return fmt.Errorf("at epoch %d: %w", r.Epoch, flashsale.ErrStaleEpoch)
	})
	if isUniqueViolation(err) {
		return fmt.Errorf("sqlite: create reservation %s: %w", r.ID, flashsale.ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("sqlite: create reservation %s: %w", r.ID, err)
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
	r, err := reservationByID(ctx, s.read, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return r, nil
}

func reservationByID(ctx context.Context, q querier, id string) (*flashsale.Reservation, error) {
	r, err := scanReservation(q.QueryRowContext(ctx, `
		SELECT `+reservationColumns+`
		FROM reservations r`+reservationJoins+`
		WHERE r.reservation_id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("reservation %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reservation %s: %w", id, err)
	}
	return r, nil
}

// ReservationByKey returns the shopper's reservation of the sale made under
// the idempotency key, or ErrNotFound. Voided tombstones keep no key and are
// never found here.
func (s *Store) ReservationByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Reservation, error) {
	r, err := scanReservation(s.read.QueryRowContext(ctx, `
		SELECT `+reservationColumns+`
		FROM reservations r`+reservationJoins+`
		WHERE r.sale_id = ?1 AND r.user_id = ?2 AND r.idempotency_key = ?3`, saleID, userID, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: reservation of %s under key %q: %w", userID, key, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: reservation of %s under key %q: %w", userID, key, err)
	}
	return r, nil
}

// ConfirmReservation turns the shopper's pending reservation into an order
// if its hold has not ended at now: one conditional UPDATE, and the order's
// INSERT, its audit row (from nothing to confirmed, by "shopper:<userID>")
// and its order.confirmed event in the same transaction when it changed a
// row. A reservation that
// is already confirmed returns the order it became (the first paymentRef
// stays).
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
	err := s.tx(ctx, func(tx *wtx) error {
		var err error
		res, err = scanReservation(tx.QueryRowContext(ctx, `
			UPDATE reservations
			SET state = 'confirmed', confirmed_at = ?3, version = version + 1
			WHERE reservation_id = ?1 AND user_id = ?2
			  AND state = 'pending' AND expires_at > ?3
			RETURNING `+returningReservation,
			id, userID, micros(now)))
		if errors.Is(err, sql.ErrNoRows) {
			res, ord, err = confirmRefused(ctx, tx, id, userID, now)
			return err
		}
		if err != nil {
			return err
		}
		ord, err = scanOrder(tx.QueryRowContext(ctx, `
			INSERT INTO orders (
				order_id, reservation_id, sale_id, user_id, quantity,
				state, payment_ref, version, created_at, updated_at)
			VALUES (?1, ?2, ?3, ?4, ?5, 'confirmed', ?6, 1, ?7, ?7)
			RETURNING `+returningOrder,
			flashsale.NewID("ord_"), res.ID, res.SaleID, res.UserID, res.Quantity, paymentRef, micros(now)))
		if err != nil {
			return err
		}
		res.OrderID = ord.ID
		actor := "shopper:" + userID
		ev := flashsale.OrderEvent(flashsale.EventOrderConfirmed, ord, "", actor, "", false, now)
		if err := insertTransition(ctx, tx, ord, "", actor, "", ev.ID, now); err != nil {
			return err
		}
		_, err = insertEvents(ctx, tx, ev)
		created = err == nil
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: confirm reservation %s: %w", id, err)
	}
	if created {
		s.eventsWritten()
	}
	return res, ord, nil
}

// confirmRefused says why the confirming UPDATE changed no row, from the
// row as it is in the same transaction.
func confirmRefused(ctx context.Context, tx *wtx, id, userID string, now time.Time) (*flashsale.Reservation, *flashsale.Order, error) {
	cur, err := reservationByID(ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	if cur.UserID != userID || cur.State == flashsale.ReservationVoided {
		return nil, nil, fmt.Errorf("reservation %s of %s: %w", id, userID, flashsale.ErrNotFound)
	}
	switch cur.State {
	case flashsale.ReservationConfirmed:
		ord, err := scanOrder(tx.QueryRowContext(ctx, `
			SELECT `+orderColumns+` FROM orders o`+orderJoins+`
			WHERE o.reservation_id = ?1`, id))
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
	// Unreachable while writes are serialised: the UPDATE saw this row.
	return nil, nil, fmt.Errorf("reservation %s is %s: %w", id, cur.State, flashsale.ErrVersionConflict)
}

// CancelReservation cancels the shopper's pending reservation and marks it
// restocked, in one conditional UPDATE, and writes its
// reservation.cancelled event in the same transaction; restocked reports whether this call
// did so, in which case (and only then) the caller returns the units to the
// gate. Cancelling a cancelled reservation returns it with restocked false.
//
// Errors: ErrNotFound (no such reservation, another shopper's, or voided),
// CodeReservationExpired, CodeReservationConfirmed.
func (s *Store) CancelReservation(ctx context.Context, id, userID string, now time.Time) (*flashsale.Reservation, bool, error) {
	var (
		res       *flashsale.Reservation
		restocked bool
	)
	err := s.tx(ctx, func(tx *wtx) error {
		var err error
		res, err = scanReservation(tx.QueryRowContext(ctx, `
			UPDATE reservations
			SET state = 'cancelled', restocked_at = ?3, version = version + 1
			WHERE reservation_id = ?1 AND user_id = ?2
			  AND state = 'pending' AND restocked_at IS NULL
			RETURNING `+returningReservation,
			id, userID, micros(now)))
		if err == nil {
			restocked = true
			_, err = insertEvents(ctx, tx, flashsale.ReservationEvent(flashsale.EventReservationCancelled, res, "shopper", now))
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := reservationByID(ctx, tx, id)
		if err != nil {
			return err
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
		return nil, false, fmt.Errorf("sqlite: cancel reservation %s: %w", id, err)
	}
	if restocked {
		s.eventsWritten()
	}
	return res, restocked, nil
}

// ExpireDue claims up to limit pending reservations whose hold ended at or
// before now (those that ended first), marks them expired and restocked at now
// in the same statement, writes their reservation.expired events in the same
// transaction, and returns them (with SKU). Claims are write
// transactions, which SQLite runs one at a time, and the UPDATE re-checks
// pending and restocked_at IS NULL, so each reservation is returned to
// exactly one caller, once. A limit below 1 claims nothing.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) ([]*flashsale.Reservation, error) {
	if limit < 1 {
		return nil, nil
	}
	var expired []*flashsale.Reservation
	err := s.tx(ctx, func(tx *wtx) error {
		rows, err := tx.QueryContext(ctx, `
			UPDATE reservations
			SET state = 'expired', restocked_at = ?1, version = version + 1
			WHERE reservation_id IN (
				SELECT reservation_id FROM reservations
				WHERE state = 'pending' AND expires_at <= ?1
				ORDER BY expires_at
				LIMIT ?2)
			  AND state = 'pending' AND restocked_at IS NULL
			RETURNING `+returningReservation,
			micros(now), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanReservation(rows)
			if err != nil {
				return err
			}
			expired = append(expired, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		// One reservation.expired event per hold, in the same
		// transaction as the claim that ended it.
		events := make([]flashsale.Event, len(expired))
		for i, r := range expired {
			events[i] = flashsale.ReservationEvent(flashsale.EventReservationExpired, r, "expiry", now)
		}
		_, err = insertEvents(ctx, tx, events...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: expire due holds: %w", err)
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
		return false, fmt.Errorf("sqlite: void reservation %s: RestockedAt is required", r.ID)
	}
	var inserted bool
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO reservations (
				reservation_id, sale_id, user_id, quantity, state,
				payment_fingerprint, idempotency_key, request_hash, epoch,
				created_at, expires_at, restocked_at)
			VALUES (?1, ?2, ?3, ?4, 'voided', ?5, NULL, NULL, ?6, ?7, ?8, ?9)
			ON CONFLICT (reservation_id) DO NOTHING`,
			r.ID, r.SaleID, r.UserID, r.Quantity, nullText(r.PaymentFingerprint), r.Epoch,
			micros(r.CreatedAt), micros(r.ExpiresAt), micros(r.RestockedAt))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		inserted = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: void reservation %s: %w", r.ID, err)
	}
	return inserted, nil
}

// statesChunk bounds the ids bound to one query, far below SQLite's limit
// on host parameters.
const statesChunk = 500

// ReservationStates returns the state of each of ids that is a reservation
// of the sale; the others are absent from the map.
func (s *Store) ReservationStates(ctx context.Context, saleID string, ids []string) (map[string]flashsale.ReservationState, error) {
	states := make(map[string]flashsale.ReservationState, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), statesChunk)]
		ids = ids[len(chunk):]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, saleID)
		for _, id := range chunk {
			args = append(args, id)
		}
		rows, err := s.read.QueryContext(ctx, `
			SELECT reservation_id, state FROM reservations
			WHERE sale_id = ? AND reservation_id IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: reservation states: %w", err)
		}
		for rows.Next() {
			var id, state string
			if err := rows.Scan(&id, &state); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: reservation states: %w", err)
			}
			states[id] = flashsale.ReservationState(state)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlite: reservation states: %w", err)
		}
	}
	return states, nil
}
