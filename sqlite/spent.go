package sqlite

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale"
)

// SpentAdmissions returns the admissions the sale's reservations spent,
// voided ones aside, for a gate rebuilt from the record; see
// flashsale.SaleStore. Reservations made before the record kept admissions
// have none to give.
func (s *Store) SpentAdmissions(ctx context.Context, saleID string) ([]flashsale.SpentAdmission, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT user_id, admission_id
		FROM reservations
		WHERE sale_id = ?1 AND admission_id IS NOT NULL AND state <> 'voided'`, saleID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: spent admissions of sale %s: %w", saleID, err)
	}
	defer rows.Close()
	var out []flashsale.SpentAdmission
	for rows.Next() {
		var sp flashsale.SpentAdmission
		if err := rows.Scan(&sp.UserID, &sp.AdmissionID); err != nil {
			return nil, fmt.Errorf("sqlite: spent admissions of sale %s: %w", saleID, err)
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: spent admissions of sale %s: %w", saleID, err)
	}
	return out, nil
}
