package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

// returningReservation is record.ReservationColumns for the RETURNING
// clause of a statement on reservations, which cannot join.
const returningReservation = `reservation_id, sale_id,
	(SELECT s.sku FROM sale_events s WHERE s.sale_id = reservations.sale_id),
	user_id, quantity, state, payment_fingerprint, idempotency_key,
	request_hash, epoch, created_at, expires_at, restocked_at,
	confirmed_at, version,
	(SELECT o.order_id FROM orders o WHERE o.reservation_id = reservations.reservation_id)`

// InsertReservation inserts the hold, then its events, in the write
// transaction it runs in: BeginRebuild's bump cannot come between.
func (x statements) InsertReservation(ctx context.Context, r *flashsale.Reservation, events []flashsale.Event) (bool, error) {
	n, err := affected(x.q.ExecContext(ctx, `
		INSERT INTO reservations (
			reservation_id, sale_id, user_id, quantity, state,
			payment_fingerprint, idempotency_key, request_hash, epoch,
			created_at, expires_at, account_created, admission_id)
		SELECT ?1, sale_id, ?2, ?3, 'pending', ?4, ?5, ?6, epoch, ?7, ?8, ?11, ?12
		FROM sale_events
		WHERE sale_id = ?9 AND epoch = ?10`,
		r.ID, r.UserID, r.Quantity, record.NullText(r.PaymentFingerprint), record.NullText(r.IdempotencyKey), record.NullText(r.RequestHash),
		micros(r.CreatedAt), micros(r.ExpiresAt), r.SaleID, r.Epoch, nullMicros(r.AccountCreated), record.NullText(r.AdmissionID)))
	if isUniqueViolation(err) {
		return false, flashsale.ErrDuplicate
	}
	if err != nil || n == 0 {
		return false, err
	}
	_, err = x.InsertEvents(ctx, events)
	return err == nil, err
}

func (x statements) ReservationByID(ctx context.Context, id string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT `+record.ReservationColumns+`
		FROM reservations r`+record.ReservationJoins+`
		WHERE r.reservation_id = ?1`, id)
}

func (x statements) ReservationByKey(ctx context.Context, saleID, userID, key string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT `+record.ReservationColumns+`
		FROM reservations r`+record.ReservationJoins+`
		WHERE r.sale_id = ?1 AND r.user_id = ?2 AND r.idempotency_key = ?3`, saleID, userID, key)
}

func (x statements) ConfirmPending(ctx context.Context, id, userID string, now time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE reservations
		SET state = 'confirmed', confirmed_at = ?3, version = version + 1
		WHERE reservation_id = ?1 AND user_id = ?2
		  AND state = 'pending' AND expires_at > ?3
		RETURNING `+returningReservation,
		id, userID, micros(now))
}

func (x statements) CancelPending(ctx context.Context, id, userID string, now time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE reservations
		SET state = 'cancelled', restocked_at = ?3, version = version + 1
		WHERE reservation_id = ?1 AND user_id = ?2
		  AND state = 'pending' AND restocked_at IS NULL
		RETURNING `+returningReservation,
		id, userID, micros(now))
}

// ExpireDue is one UPDATE in a write transaction, which SQLite runs one at
// a time, and it re-checks pending and restocked_at IS NULL: no two
// callers take the same hold.
func (x statements) ExpireDue(ctx context.Context, now time.Time, limit int, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		UPDATE reservations
		SET state = 'expired', restocked_at = ?1, version = version + 1
		WHERE reservation_id IN (
			SELECT reservation_id FROM reservations
			WHERE state = 'pending' AND expires_at <= ?1
			ORDER BY expires_at
			LIMIT ?2)
		  AND state = 'pending' AND restocked_at IS NULL
		RETURNING `+returningReservation,
		micros(now), limit))(fn)
}

func (x statements) InsertVoided(ctx context.Context, r *flashsale.Reservation) (bool, error) {
	n, err := affected(x.q.ExecContext(ctx, `
		INSERT INTO reservations (
			reservation_id, sale_id, user_id, quantity, state,
			payment_fingerprint, idempotency_key, request_hash, epoch,
			created_at, expires_at, restocked_at)
		VALUES (?1, ?2, ?3, ?4, 'voided', ?5, NULL, NULL, ?6, ?7, ?8, ?9)
		ON CONFLICT (reservation_id) DO NOTHING`,
		r.ID, r.SaleID, r.UserID, r.Quantity, record.NullText(r.PaymentFingerprint), r.Epoch,
		micros(r.CreatedAt), micros(r.ExpiresAt), micros(r.RestockedAt)))
	return n == 1, err
}

// idsChunk bounds the ids bound to one statement, far below SQLite's limit
// on host parameters.
const idsChunk = 500

// inList returns the first chunk of ids as bind arguments after first, and
// the SQL list of their placeholders, "(?, ?, …)"; and the ids left.
func inList(ids []string, first ...any) (args []any, list string, rest []string) {
	chunk := ids[:min(len(ids), idsChunk)]
	args = first
	for _, id := range chunk {
		args = append(args, id)
	}
	return args, "(?" + strings.Repeat(", ?", len(chunk)-1) + ")", ids[len(chunk):]
}

func (x statements) ReservationStates(ctx context.Context, saleID string, ids []string, fn record.Each) error {
	for len(ids) > 0 {
		var (
			args []any
			list string
		)
		args, list, ids = inList(ids, saleID)
		err := each(x.q.QueryContext(ctx, `
			SELECT reservation_id, state FROM reservations
			WHERE sale_id = ? AND reservation_id IN `+list, args...))(fn)
		if err != nil {
			return err
		}
	}
	return nil
}

func (x statements) Attempts(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT r.reservation_id, r.user_id, r.payment_fingerprint, r.quantity, r.state, r.created_at,
		       r.account_created, o.order_id, o.state, o.version
		FROM reservations r LEFT JOIN orders o ON o.reservation_id = r.reservation_id
		WHERE r.sale_id = ?1 AND r.state <> 'voided'
		ORDER BY r.created_at, r.reservation_id`, saleID))(fn)
}
