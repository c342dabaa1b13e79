package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// orderColumns is an order as scanOrder reads it: o is the orders row and s
// its sale (see orderJoins).
const orderColumns = `o.order_id, o.reservation_id, o.sale_id, s.sku, o.user_id,
	o.quantity, o.state, o.payment_ref, o.version, o.created_at, o.updated_at`

// orderJoins completes FROM orders o for orderColumns.
const orderJoins = `
	JOIN sale_events s ON s.sale_id = o.sale_id`

// returningOrder is orderColumns for the RETURNING clause of a statement on
// orders, which cannot join.
const returningOrder = `order_id, reservation_id, sale_id,
	(SELECT s.sku FROM sale_events s WHERE s.sale_id = orders.sale_id),
	user_id, quantity, state, payment_ref, version, created_at, updated_at`

// scanOrder reads orderColumns, then into extra any columns that follow
// them.
func scanOrder(row scanner, extra ...any) (*flashsale.Order, error) {
	var (
		o                flashsale.Order
		state            string
		created, updated int64
	)
	err := row.Scan(append([]any{&o.ID, &o.ReservationID, &o.SaleID, &o.SKU, &o.UserID,
		&o.Quantity, &state, &o.PaymentRef, &o.Version, &created, &updated}, extra...)...)
	if err != nil {
		return nil, err
	}
	o.State = flashsale.OrderState(state)
	o.CreatedAt, o.UpdatedAt = timeOf(created), timeOf(updated)
	return &o, nil
}

// Order returns the order with the id, with its SKU, or ErrNotFound.
func (s *Store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	o, err := orderByID(ctx, s.read, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return o, nil
}

func orderByID(ctx context.Context, q querier, id string) (*flashsale.Order, error) {
	o, err := scanOrder(q.QueryRowContext(ctx, `
		SELECT `+orderColumns+` FROM orders o`+orderJoins+`
		WHERE o.order_id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("order %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("order %s: %w", id, err)
	}
	return o, nil
}

// Orders returns the sale's orders, oldest first; none (and no error) for
// a sale without orders or no such sale.
func (s *Store) Orders(ctx context.Context, saleID string) ([]*flashsale.Order, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT `+orderColumns+` FROM orders o`+orderJoins+`
		WHERE o.sale_id = ?1
		ORDER BY o.created_at, o.order_id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: orders of sale %s: %w", saleID, err)
	}
	defer rows.Close()
	var orders []*flashsale.Order
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: orders of sale %s: %w", saleID, err)
		}
		orders = append(orders, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: orders of sale %s: %w", saleID, err)
	}
	return orders, nil
}

// orderEventType is the event that reports an order moving to a state.
var orderEventType = map[flashsale.OrderState]flashsale.EventType{
	flashsale.OrderShipped:   flashsale.EventOrderShipped,
	flashsale.OrderCancelled: flashsale.EventOrderCancelled,
	flashsale.OrderRefunded:  flashsale.EventOrderRefunded,
}

// ChangeOrder moves the order to c.To if it is still at c.Version and in a
// state it may leave for c.To (flashsale.OrderFrom), in one write
// transaction:
//
//  1. one conditional UPDATE on id and version; zero rows is the answer
//     (a version conflict, a refused move, or no such order, told apart
//     by reading the row afterwards, never by an error string);
//  2. for cancelled and refunded, the order's reservation moves from
//     confirmed to cancelled with restocked_at set, by a conditional UPDATE
//     whose changed-rows count says whether the caller restocks the gate;
//  3. the audit row (order_events);
//  4. the outbox rows: the order event and, when the reservation moved,
//     its reservation.cancelled.
//
// If any statement fails, none of them lands. The state the order left is
// read from the row the UPDATE returns: an order with shipped_at set was
// shipped, since only shipping sets it and refunded is final.
func (s *Store) ChangeOrder(ctx context.Context, c flashsale.OrderChange) (*flashsale.Order, bool, error) {
	from := flashsale.OrderFrom(c.To)
	typ, ok := orderEventType[c.To]
	if len(from) == 0 || !ok {
		return nil, false, flashsale.Errorf(flashsale.CodeBadRequest, "An order cannot be moved to %q.", c.To)
	}
	var (
		ord       *flashsale.Order
		restocked bool
	)
	// The states it may leave, as ?5 and ?6 (refunded has two).
	from1, from2 := string(from[0]), string(from[len(from)-1])
	err := s.tx(ctx, func(tx *wtx) error {
		var shippedAt sql.NullInt64
		o, err := scanOrder(tx.QueryRowContext(ctx, `
			UPDATE orders
			SET state = ?3, updated_at = ?4, version = version + 1,
			    shipped_at = CASE WHEN ?3 = 'shipped' THEN ?4 ELSE shipped_at END
			WHERE order_id = ?1 AND version = ?2 AND state IN (?5, ?6)
			RETURNING `+returningOrder+`, shipped_at`,
			c.OrderID, c.Version, string(c.To), micros(c.At), from1, from2), &shippedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return orderRefused(ctx, tx, c)
		}
		if err != nil {
			return err
		}
		left := flashsale.OrderConfirmed
		if c.To == flashsale.OrderRefunded && shippedAt.Valid {
			left = flashsale.OrderShipped
		}
		var events []flashsale.Event
		if c.To.Restocks() {
			r, err := scanReservation(tx.QueryRowContext(ctx, `
				UPDATE reservations
				SET state = 'cancelled', restocked_at = ?2, version = version + 1
				WHERE reservation_id = ?1 AND state = 'confirmed' AND restocked_at IS NULL
				RETURNING `+returningReservation,
				o.ReservationID, micros(c.At)))
			switch {
			case err == nil:
				restocked = true
				events = append(events, flashsale.ReservationEvent(flashsale.EventReservationCancelled, r, string(typ), c.At))
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		ev := flashsale.OrderEvent(typ, o, left, c.Actor, c.Reason, restocked, c.At)
		if err := insertTransition(ctx, tx, o, left, c.Actor, c.Reason, ev.ID, c.At); err != nil {
			return err
		}
		if _, err := insertEvents(ctx, tx, append([]flashsale.Event{ev}, events...)...); err != nil {
			return err
		}
		ord = o
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: move order %s to %s: %w", c.OrderID, c.To, err)
	}
	s.eventsWritten()
	return ord, restocked, nil
}

// orderRefused says why the conditional UPDATE of ChangeOrder changed no
// row, from the row as it is in the same transaction.
func orderRefused(ctx context.Context, tx *wtx, c flashsale.OrderChange) error {
	cur, err := orderByID(ctx, tx, c.OrderID)
	if err != nil {
		return err
	}
	if cur.Version != c.Version {
		return fmt.Errorf("at version %d (it is at %d): %w", c.Version, cur.Version, flashsale.ErrVersionConflict)
	}
	return flashsale.Errorf(flashsale.CodeInvalidState, "The order is %s; it cannot become %s.", cur.State, c.To)
}

// insertTransition writes the audit row of o's move from from (""
// for its creation) to its state, made by actor.
func insertTransition(ctx context.Context, tx *wtx, o *flashsale.Order, from flashsale.OrderState, actor, reason, eventID string, at time.Time) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO order_events (order_id, from_state, to_state, actor, reason, version, at, event_id)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`,
		o.ID, nullText(string(from)), string(o.State), actor, reason, o.Version, micros(at), eventID)
	if err != nil {
		return fmt.Errorf("write the audit row: %w", err)
	}
	return nil
}

// OrderHistory returns the order's audit rows, oldest first.
func (s *Store) OrderHistory(ctx context.Context, orderID string) ([]flashsale.OrderTransition, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT order_id, from_state, to_state, actor, reason, version, at, event_id
		FROM order_events
		WHERE order_id = ?1
		ORDER BY id`, orderID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: history of order %s: %w", orderID, err)
	}
	defer rows.Close()
	var history []flashsale.OrderTransition
	for rows.Next() {
		var (
			t    flashsale.OrderTransition
			from sql.NullString
			to   string
			at   int64
		)
		if err := rows.Scan(&t.OrderID, &from, &to, &t.Actor, &t.Reason, &t.Version, &at, &t.EventID); err != nil {
			return nil, fmt.Errorf("sqlite: history of order %s: %w", orderID, err)
		}
		t.From, t.To, t.At = flashsale.OrderState(from.String), flashsale.OrderState(to), timeOf(at)
		history = append(history, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: history of order %s: %w", orderID, err)
	}
	return history, nil
}
