package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
)

// orderColumns is an order as scanOrder reads it: o is the orders row (or a
// CTE named o) and s its sale (see orderJoins).
const orderColumns = `o.order_id, o.reservation_id, o.sale_id, s.sku, o.user_id,
	o.quantity, o.state, o.payment_ref, o.version, o.created_at, o.updated_at`

// orderJoins completes FROM orders o for orderColumns.
const orderJoins = `
	JOIN sale_events s ON s.sale_id = o.sale_id`

func scanOrder(row pgx.Row) (*flashsale.Order, error) {
	var (
		o       flashsale.Order
		state   string
		created time.Time
		updated time.Time
	)
	err := row.Scan(&o.ID, &o.ReservationID, &o.SaleID, &o.SKU, &o.UserID,
		&o.Quantity, &state, &o.PaymentRef, &o.Version, &created, &updated)
	if err != nil {
		return nil, err
	}
	o.State = flashsale.OrderState(state)
	o.CreatedAt, o.UpdatedAt = created.UTC(), updated.UTC()
	return &o, nil
}

// Order returns the order with the id, with its SKU, or ErrNotFound.
func (s *Store) Order(ctx context.Context, id string) (_ *flashsale.Order, err error) {
	defer func() { err = unavailable(err) }()
	o, err := scanOrder(s.pool.QueryRow(ctx, `
		SELECT `+orderColumns+` FROM orders o`+orderJoins+`
		WHERE o.order_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: order %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: order %s: %w", id, err)
	}
	return o, nil
}

// Orders returns the sale's orders, oldest first; none (and no error) for
// a sale without orders or no such sale.
func (s *Store) Orders(ctx context.Context, saleID string) (_ []*flashsale.Order, err error) {
	defer func() { err = unavailable(err) }()
	rows, err := s.pool.Query(ctx, `
		SELECT `+orderColumns+` FROM orders o`+orderJoins+`
		WHERE o.sale_id = $1
		ORDER BY o.created_at, o.order_id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("postgres: orders of sale %s: %w", saleID, err)
	}
	orders, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*flashsale.Order, error) { return scanOrder(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: orders of sale %s: %w", saleID, err)
	}
	return orders, nil
}

// ShipOrder moves the order from confirmed to shipped at now if it is still
// at version, with one conditional UPDATE, and returns it as written.
//
// Errors: ErrNotFound, ErrVersionConflict (the order moved since version),
// CodeInvalidState (it is at version but not confirmed).
func (s *Store) ShipOrder(ctx context.Context, id string, version int64, now time.Time) (_ *flashsale.Order, err error) {
	defer func() { err = unavailable(err) }()
	o, err := scanOrder(s.pool.QueryRow(ctx, `
		WITH o AS (
			UPDATE orders
			SET state = 'shipped', shipped_at = $3, updated_at = $3, version = version + 1
			WHERE order_id = $1 AND version = $2 AND state = 'confirmed'
			RETURNING *)
		SELECT `+orderColumns+` FROM o`+orderJoins,
		id, version, now))
	if err == nil {
		return o, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: ship order %s: %w", id, err)
	}
	cur, err := s.Order(ctx, id)
	if err != nil {
		return nil, err
	}
	if cur.Version != version {
		return nil, fmt.Errorf("postgres: ship order %s at version %d (it is at %d): %w", id, version, cur.Version, flashsale.ErrVersionConflict)
	}
	return nil, flashsale.Errorf(flashsale.CodeInvalidState, "The order is %s; only a confirmed order can ship.", cur.State)
}
