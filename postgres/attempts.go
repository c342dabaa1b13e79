package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
)

// Attempts returns every reservation of the sale but the voided, with the
// order each became, oldest first.
func (s *Store) Attempts(ctx context.Context, saleID string) (_ []flashsale.Attempt, err error) {
	defer func() { err = unavailable(err) }()
	rows, err := s.pool.Query(ctx, `
		SELECT r.reservation_id, r.user_id, r.payment_fingerprint, r.quantity, r.state, r.created_at,
		       r.account_created, o.order_id, o.state, o.version
		FROM reservations r LEFT JOIN orders o ON o.reservation_id = r.reservation_id
		WHERE r.sale_id = $1 AND r.state <> 'voided'
		ORDER BY r.created_at, r.reservation_id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("postgres: attempts of %s: %w", saleID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (flashsale.Attempt, error) {
		var (
			a                      flashsale.Attempt
			instr, orderID, ostate *string
			state                  string
			created                time.Time
			acct                   *time.Time
			version                *int64
		)
		if err := row.Scan(&a.ReservationID, &a.UserID, &instr, &a.Quantity, &state, &created, &acct,
			&orderID, &ostate, &version); err != nil {
			return a, err
		}
		a.Instrument, a.State, a.CreatedAt, a.AccountCreated = textOf(instr), flashsale.ReservationState(state), created.UTC(), timeOf(acct)
		a.OrderID = textOf(orderID)
		a.OrderState = flashsale.OrderState(textOf(ostate))
		if version != nil {
			a.OrderVersion = *version
		}
		return a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: attempts of %s: %w", saleID, err)
	}
	return out, nil
}
