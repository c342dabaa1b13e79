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

func scanOrder(row scanner) (*flashsale.Order, error) {
	var (
		o                flashsale.Order
		state            string
		created, updated int64
	)
	err := row.Scan(&o.ID, &o.ReservationID, &o.SaleID, &o.SKU, &o.UserID,
		&o.Quantity, &state, &o.PaymentRef, &o.Version, &created, &updated)
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

// ShipOrder moves the order from confirmed to shipped at now if it is still
// at version, with one conditional UPDATE, and returns it as written.
//
// Errors: ErrNotFound, ErrVersionConflict (the order moved since version),
// CodeInvalidState (it is at version but not confirmed).
func (s *Store) ShipOrder(ctx context.Context, id string, version int64, now time.Time) (*flashsale.Order, error) {
	var o *flashsale.Order
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		o, err = scanOrder(tx.QueryRowContext(ctx, `
			UPDATE orders
			SET state = 'shipped', shipped_at = ?3, updated_at = ?3, version = version + 1
			WHERE order_id = ?1 AND version = ?2 AND state = 'confirmed'
			RETURNING `+returningOrder,
			id, version, micros(now)))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := orderByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if cur.Version != version {
			return fmt.Errorf("at version %d (it is at %d): %w", version, cur.Version, flashsale.ErrVersionConflict)
		}
		return flashsale.Errorf(flashsale.CodeInvalidState, "The order is %s; only a confirmed order can ship.", cur.State)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: ship order %s: %w", id, err)
	}
	return o, nil
}
