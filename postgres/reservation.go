package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
)

// reservationColumns is a reservation as scanReservation reads it: r is the
// reservations row, s its sale and o its order (LEFT JOINed; see
// reservationJoins).
const reservationColumns = `r.reservation_id, r.sale_id, s.sku, r.user_id,
	r.quantity, r.state, r.payment_fingerprint, r.idempotency_key,
	r.request_hash, r.epoch, r.created_at, r.expires_at, r.restocked_at,
	r.confirmed_at, r.version, o.order_id`

// reservationJoins completes FROM reservations r (or a CTE named r) for
// reservationColumns.
const reservationJoins = `
	JOIN sale_events s ON s.sale_id = r.sale_id
	LEFT JOIN orders o ON o.reservation_id = r.reservation_id`

func scanReservation(row pgx.Row) (*flashsale.Reservation, error) {
	var (
		r                         flashsale.Reservation
		state                     string
		instr, key, hash, orderID *string
		created, expires          time.Time
		restocked, confirmed      *time.Time
	)
	err := row.Scan(&r.ID, &r.SaleID, &r.SKU, &r.UserID,
		&r.Quantity, &state, &instr, &key,
		&hash, &r.Epoch, &created, &expires, &restocked,
		&confirmed, &r.Version, &orderID)
	if err != nil {
		return nil, err
	}
	r.State = flashsale.ReservationState(state)
	r.PaymentFingerprint, r.IdempotencyKey, r.RequestHash = textOf(instr), textOf(key), textOf(hash)
	r.OrderID = textOf(orderID)
	r.CreatedAt, r.ExpiresAt = created.UTC(), expires.UTC()
	r.RestockedAt, r.ConfirmedAt = timeOf(restocked), timeOf(confirmed)
	return &r, nil
}

func collectReservations(rows pgx.Rows) ([]*flashsale.Reservation, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*flashsale.Reservation, error) { return scanReservation(row) })
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

// CreateReservation inserts r as pending, in one statement, if the sale is
// still at r.Epoch, and with it, in the same statement, its
// reservation.created event and the events in also (those whose id the
// outbox has are skipped). The purchase path stays one round trip: the
// outbox rows are a data-modifying CTE that inserts one row per event for
// each reservation row inserted, so they exist exactly when the reservation
// does. The statement holds the sale row FOR SHARE until it commits, which
// is what BeginRebuild waits for. On success r.State is pending and
// r.Version 1.
//
// Errors: ErrStaleEpoch (the sale's epoch moved on), ErrNotFound (no such
// sale), ErrDuplicate (the id, the shopper's idempotency key, the shopper's
// live hold, the instrument's live hold or a hold on the same admission
// exists).
func (s *Store) CreateReservation(ctx context.Context, r *flashsale.Reservation, also ...flashsale.Event) (err error) {
	defer func() { err = unavailable(err) }()
	created := *r
	created.State, created.Version = flashsale.ReservationPending, 1
	events := append([]flashsale.Event{flashsale.ReservationEvent(flashsale.EventReservationCreated, &created, "", r.CreatedAt)}, also...)
	ids, topics, sales, payloads, ats := eventArrays(events)
	var inserted int
	err = s.pool.QueryRow(ctx, `
		WITH r AS (
			INSERT INTO reservations (
				reservation_id, sale_id, user_id, quantity, state,
				payment_fingerprint, idempotency_key, request_hash, epoch,
				created_at, expires_at, account_created, admission_id)
			SELECT $1, sale_id, $2, $3, 'pending', $4, $5, $6, epoch, $7, $8, $16, $17
			FROM sale_events
			WHERE sale_id = $9 AND epoch = $10
			FOR SHARE
			RETURNING reservation_id
		), events AS (
			INSERT INTO outbox (event_id, topic, sale_id, payload, created_at, next_attempt_at)
			SELECT e.id, e.topic, e.sale_id, e.payload, e.at, e.at
			FROM r, unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::timestamptz[])
			     AS e (id, topic, sale_id, payload, at)
			ON CONFLICT (event_id) DO NOTHING
		)
		SELECT count(*) FROM r`,
		r.ID, r.UserID, r.Quantity, nullText(r.PaymentFingerprint), nullText(r.IdempotencyKey), nullText(r.RequestHash),
		r.CreatedAt, r.ExpiresAt, r.SaleID, r.Epoch,
		ids, topics, sales, payloads, ats, nullTime(r.AccountCreated), nullText(r.AdmissionID)).Scan(&inserted)
	if pgErr, ok := uniqueViolation(err); ok {
		return fmt.Errorf("postgres: create reservation %s: %w (%s)", r.ID, flashsale.ErrDuplicate, pgErr.ConstraintName)
	}
	if err != nil {
		return fmt.Errorf("postgres: create reservation %s: %w", r.ID, err)
	}
	if inserted == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sale_events WHERE sale_id = $1)`, r.SaleID).Scan(&exists); err != nil {
			return fmt.Errorf("postgres: create reservation %s: %w", r.ID, err)
		}
		if !exists {
			return fmt.Errorf("postgres: create reservation %s: sale %s: %w", r.ID, r.SaleID, flashsale.ErrNotFound)
		}
		return fmt.Errorf("postgres: create reservation %s at epoch %d: %w", r.ID, r.Epoch, flashsale.ErrStaleEpoch)
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
func (s *Store) Reservation(ctx context.Context, id string) (_ *flashsale.Reservation, err error) {
	defer func() { err = unavailable(err) }()
	return reservationByID(ctx, s.pool, id)
}

// querier is what both the pool and a transaction can do.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func reservationByID(ctx context.Context, q querier, id string) (*flashsale.Reservation, error) {
	r, err := scanReservation(q.QueryRow(ctx, `
		SELECT `+reservationColumns+`
		FROM reservations r`+reservationJoins+`
		WHERE r.reservation_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: reservation %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: reservation %s: %w", id, err)
	}
	return r, nil
}

// ReservationByKey returns the shopper's reservation of the sale made under
// the idempotency key, or ErrNotFound. Voided tombstones keep no key and are
// never found here.
func (s *Store) ReservationByKey(ctx context.Context, saleID, userID, key string) (_ *flashsale.Reservation, err error) {
	defer func() { err = unavailable(err) }()
	r, err := scanReservation(s.pool.QueryRow(ctx, `
		SELECT `+reservationColumns+`
		FROM reservations r`+reservationJoins+`
		WHERE r.sale_id = $1 AND r.user_id = $2 AND r.idempotency_key = $3`, saleID, userID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: reservation of %s under key %q: %w", userID, key, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: reservation of %s under key %q: %w", userID, key, err)
	}
	return r, nil
}

// ConfirmReservation turns the shopper's pending reservation into an order
// if its hold has not ended at now: one conditional UPDATE, and the order's
// INSERT, its audit row (from nothing to confirmed, by "shopper:<userID>")
// and its order.confirmed event in the same transaction when it moved a
// row. A reservation that is
// already confirmed returns the order it became (the first paymentRef
// stays).
//
// Errors: ErrNotFound (no such reservation, another shopper's, or voided),
// CodeReservationExpired (expired, or pending with ExpiresAt at or before
// now), CodeReservationCancelled.
func (s *Store) ConfirmReservation(ctx context.Context, id, userID, paymentRef string, now time.Time) (_ *flashsale.Reservation, _ *flashsale.Order, err error) {
	defer func() { err = unavailable(err) }()
	var (
		res     *flashsale.Reservation
		ord     *flashsale.Order
		created bool
	)
	err = s.tx(ctx, func(tx pgx.Tx) error {
		created = false
		var err error
		res, err = scanReservation(tx.QueryRow(ctx, `
			WITH r AS (
				UPDATE reservations
				SET state = 'confirmed', confirmed_at = $3, version = version + 1
				WHERE reservation_id = $1 AND user_id = $2
				  AND state = 'pending' AND expires_at > $3
				RETURNING *)
			SELECT `+reservationColumns+` FROM r`+reservationJoins,
			id, userID, now))
		if errors.Is(err, pgx.ErrNoRows) {
			res, ord, err = confirmRefused(ctx, tx, id, userID, now)
			return err
		}
		if err != nil {
			return err
		}
		ord, err = scanOrder(tx.QueryRow(ctx, `
			WITH o AS (
				INSERT INTO orders (
					order_id, reservation_id, sale_id, user_id, quantity,
					state, payment_ref, version, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, 'confirmed', $6, 1, $7, $7)
				RETURNING *)
			SELECT `+orderColumns+` FROM o`+orderJoins,
			flashsale.NewID("ord_"), res.ID, res.SaleID, res.UserID, res.Quantity, paymentRef, now))
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
		created = true
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: confirm reservation %s: %w", id, err)
	}
	if created {
		s.eventsWritten()
	}
	return res, ord, nil
}

// confirmRefused says why the confirming UPDATE moved no row, from the row
// as it is now.
func confirmRefused(ctx context.Context, tx pgx.Tx, id, userID string, now time.Time) (*flashsale.Reservation, *flashsale.Order, error) {
	cur, err := reservationByID(ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	if cur.UserID != userID || cur.State == flashsale.ReservationVoided {
		return nil, nil, fmt.Errorf("reservation %s of %s: %w", id, userID, flashsale.ErrNotFound)
	}
	switch cur.State {
	case flashsale.ReservationConfirmed:
		ord, err := scanOrder(tx.QueryRow(ctx, `
			SELECT `+orderColumns+` FROM orders o`+orderJoins+`
			WHERE o.reservation_id = $1`, id))
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
	// Pending and unexpired, yet the UPDATE did not see it: the row was
	// written after the UPDATE's snapshot. Reading again will settle it.
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
func (s *Store) CancelReservation(ctx context.Context, id, userID string, now time.Time) (_ *flashsale.Reservation, _ bool, err error) {
	defer func() { err = unavailable(err) }()
	var (
		res       *flashsale.Reservation
		restocked bool
	)
	err = s.tx(ctx, func(tx pgx.Tx) error {
		restocked = false
		r, err := scanReservation(tx.QueryRow(ctx, `
			WITH r AS (
				UPDATE reservations
				SET state = 'cancelled', restocked_at = $3, version = version + 1
				WHERE reservation_id = $1 AND user_id = $2
				  AND state = 'pending' AND restocked_at IS NULL
				RETURNING *)
			SELECT `+reservationColumns+` FROM r`+reservationJoins,
			id, userID, now))
		if err == nil {
			res, restocked = r, true
			_, err = insertEvents(ctx, tx, flashsale.ReservationEvent(flashsale.EventReservationCancelled, r, "shopper", now))
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
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
		return nil, false, fmt.Errorf("postgres: cancel reservation %s: %w", id, err)
	}
	if restocked {
		s.eventsWritten()
	}
	return res, restocked, nil
}

// ExpireDue claims up to limit pending reservations whose hold ended at or
// before now (those that ended first), marks them expired and restocked at now
// in the same statement, writes their reservation.expired events in the same
// transaction, and returns them (with SKU). Concurrent callers
// skip each other's claimed rows (SKIP LOCKED), and a row is locked only if
// it is still pending in its latest version, so each reservation is
// returned to exactly one caller, once. A limit below 1 claims nothing.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) (_ []*flashsale.Reservation, err error) {
	defer func() { err = unavailable(err) }()
	if limit < 1 {
		return nil, nil
	}
	var expired []*flashsale.Reservation
	err = s.tx(ctx, func(tx pgx.Tx) error {
		// MATERIALIZED: the claim is evaluated once, so it can never yield
		// more than LIMIT rows to the UPDATE. The UPDATE joins on the
		// primary key alone: the subquery locked the rows after re-checking
		// "pending" on their latest version, so nothing can have ended
		// them since; and repeating the predicate there lets the planner,
		// without statistics on a young table, drive the join from the
		// partial index (a nested loop over every pending hold for each
		// claimed one: 2.5 s per claim of 500 at 20,000 due, by EXPLAIN
		// ANALYZE).
		rows, err := tx.Query(ctx, `
			WITH due AS MATERIALIZED (
				SELECT reservation_id FROM reservations
				WHERE state = 'pending' AND expires_at <= $1
				ORDER BY expires_at
				LIMIT $2
				FOR UPDATE SKIP LOCKED
			), r AS (
				UPDATE reservations x
				SET state = 'expired', restocked_at = $1, version = x.version + 1
				FROM due
				WHERE x.reservation_id = due.reservation_id
				RETURNING x.*)
			SELECT `+reservationColumns+` FROM r`+reservationJoins,
			now, limit)
		if err != nil {
			return err
		}
		if expired, err = collectReservations(rows); err != nil {
			return err
		}
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
		return nil, fmt.Errorf("postgres: expire due holds: %w", err)
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
func (s *Store) VoidReservation(ctx context.Context, r *flashsale.Reservation) (_ bool, err error) {
	defer func() { err = unavailable(err) }()
	if r.RestockedAt.IsZero() {
		return false, fmt.Errorf("postgres: void reservation %s: RestockedAt is required", r.ID)
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO reservations (
			reservation_id, sale_id, user_id, quantity, state,
			payment_fingerprint, idempotency_key, request_hash, epoch,
			created_at, expires_at, restocked_at)
		VALUES ($1, $2, $3, $4, 'voided', $5, NULL, NULL, $6, $7, $8, $9)
		ON CONFLICT (reservation_id) DO NOTHING`,
		r.ID, r.SaleID, r.UserID, r.Quantity, nullText(r.PaymentFingerprint), r.Epoch,
		r.CreatedAt, r.ExpiresAt, r.RestockedAt)
	if err != nil {
		return false, fmt.Errorf("postgres: void reservation %s: %w", r.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReservationStates returns the state of each of ids that is a reservation
// of the sale; the others are absent from the map.
func (s *Store) ReservationStates(ctx context.Context, saleID string, ids []string) (_ map[string]flashsale.ReservationState, err error) {
	defer func() { err = unavailable(err) }()
	states := make(map[string]flashsale.ReservationState, len(ids))
	if len(ids) == 0 {
		return states, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT reservation_id, state FROM reservations
		WHERE sale_id = $1 AND reservation_id = ANY($2)`, growingTable, saleID, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: reservation states: %w", err)
	}
	var id, state string
	if _, err := pgx.ForEachRow(rows, []any{&id, &state}, func() error {
		states[id] = flashsale.ReservationState(state)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: reservation states: %w", err)
	}
	return states, nil
}
