package sqlite

import (
	"context"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

// returningOrder is record.OrderColumns for the RETURNING clause of a
// statement on orders, which cannot join.
const returningOrder = `order_id, reservation_id, sale_id,
	(SELECT s.sku FROM sale_events s WHERE s.sale_id = orders.sale_id),
	user_id, quantity, state, payment_ref, version, created_at, updated_at`

func (x statements) InsertOrder(ctx context.Context, id string, r *flashsale.Reservation, paymentRef string, at time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		INSERT INTO orders (
			order_id, reservation_id, sale_id, user_id, quantity,
			state, payment_ref, version, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, 'confirmed', ?6, 1, ?7, ?7)
		RETURNING `+returningOrder,
		id, r.ID, r.SaleID, r.UserID, r.Quantity, paymentRef, micros(at))
}

func (x statements) OrderByID(ctx context.Context, id string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT `+record.OrderColumns+` FROM orders o`+record.OrderJoins+`
		WHERE o.order_id = ?1`, id)
}

func (x statements) OrderOfReservation(ctx context.Context, reservationID string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT `+record.OrderColumns+` FROM orders o`+record.OrderJoins+`
		WHERE o.reservation_id = ?1`, reservationID)
}

func (x statements) Orders(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT `+record.OrderColumns+` FROM orders o`+record.OrderJoins+`
		WHERE o.sale_id = ?1
		ORDER BY o.created_at, o.order_id`, saleID))(fn)
}

// MoveOrder binds the states the order may leave as ?5 and ?6 (refunded
// has two; the others repeat their one).
func (x statements) MoveOrder(ctx context.Context, c flashsale.OrderChange, from []flashsale.OrderState) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE orders
		SET state = ?3, updated_at = ?4, version = version + 1,
		    shipped_at = CASE WHEN ?3 = 'shipped' THEN ?4 ELSE shipped_at END
		WHERE order_id = ?1 AND version = ?2 AND state IN (?5, ?6)
		RETURNING `+returningOrder+`, shipped_at`,
		c.OrderID, c.Version, string(c.To), micros(c.At), string(from[0]), string(from[len(from)-1]))
}

func (x statements) EndOrderReservation(ctx context.Context, reservationID string, at time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE reservations
		SET state = 'cancelled', restocked_at = ?2, version = version + 1
		WHERE reservation_id = ?1 AND state = 'confirmed' AND restocked_at IS NULL
		RETURNING `+returningReservation,
		reservationID, micros(at))
}

func (x statements) InsertTransition(ctx context.Context, t flashsale.OrderTransition) error {
	_, err := x.q.ExecContext(ctx, `
		INSERT INTO order_events (order_id, from_state, to_state, actor, reason, version, at, event_id)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`,
		t.OrderID, record.NullText(string(t.From)), string(t.To), t.Actor, t.Reason, t.Version, micros(t.At), t.EventID)
	return err
}

func (x statements) OrderHistory(ctx context.Context, orderID string, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT order_id, from_state, to_state, actor, reason, version, at, event_id
		FROM order_events
		WHERE order_id = ?1
		ORDER BY id`, orderID))(fn)
}
