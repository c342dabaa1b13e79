package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
)

// SpentAdmissions returns the admissions the sale's reservations spent,
// voided ones aside, for a gate rebuilt from the record; see
// flashsale.SaleStore. Reservations made before the record kept admissions
// have none to give.
func (s *Store) SpentAdmissions(ctx context.Context, saleID string) (_ []flashsale.SpentAdmission, err error) {
	defer func() { err = unavailable(err) }()
	rows, err := s.pool.Query(ctx, `
		SELECT user_id, admission_id
		FROM reservations
		WHERE sale_id = $1 AND admission_id IS NOT NULL AND state <> 'voided'`, saleID)
	if err != nil {
		return nil, fmt.Errorf("postgres: spent admissions of sale %s: %w", saleID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (flashsale.SpentAdmission, error) {
		var sp flashsale.SpentAdmission
		err := row.Scan(&sp.UserID, &sp.AdmissionID)
		return sp, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: spent admissions of sale %s: %w", saleID, err)
	}
	return out, nil
}
