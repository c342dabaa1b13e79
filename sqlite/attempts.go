package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/flashsale/flashsale"
)

// Attempts returns every reservation of the sale but the voided, with the
// order each became, oldest first.
func (s *Store) Attempts(ctx context.Context, saleID string) ([]flashsale.Attempt, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT r.reservation_id, r.user_id, r.payment_fingerprint, r.quantity, r.state, r.created_at,
		       r.account_created, o.order_id, o.state, o.version
		FROM reservations r LEFT JOIN orders o ON o.reservation_id = r.reservation_id
		WHERE r.sale_id = ?1 AND r.state <> 'voided'
		ORDER BY r.created_at, r.reservation_id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: attempts of %s: %w", saleID, err)
	}
	defer rows.Close()
	var out []flashsale.Attempt
	for rows.Next() {
		var (
			a                      flashsale.Attempt
			instr, orderID, ostate sql.NullString
			state                  string
			created                int64
			acct, version          sql.NullInt64
		)
		if err := rows.Scan(&a.ReservationID, &a.UserID, &instr, &a.Quantity, &state, &created, &acct,
			&orderID, &ostate, &version); err != nil {
			return nil, fmt.Errorf("sqlite: attempts of %s: %w", saleID, err)
		}
		a.Instrument, a.State, a.CreatedAt, a.AccountCreated = instr.String, flashsale.ReservationState(state), timeOf(created), nullTimeOf(acct)
		a.OrderID, a.OrderState, a.OrderVersion = orderID.String, flashsale.OrderState(ostate.String), version.Int64
		out = append(out, a)
	}
	return out, rows.Err()
}
