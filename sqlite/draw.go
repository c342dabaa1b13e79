package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// Draw returns the sale's draw, or ErrNotFound for a sale without one.
func (s *Store) Draw(ctx context.Context, saleID string) (*flashsale.Draw, error) {
	var (
		d                        flashsale.Draw
		drawn, entrants, winners sql.NullInt64
	)
	err := s.read.QueryRowContext(ctx, `
		SELECT sale_id, seed, drawn_at, entrants, winners, document
		FROM sale_draws WHERE sale_id = ?1`, saleID).
		Scan(&d.SaleID, &d.Seed, &drawn, &entrants, &winners, &d.Document)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: draw of %s: %w", saleID, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: draw of %s: %w", saleID, err)
	}
	d.DrawnAt = nullTimeOf(drawn)
	d.Entrants, d.Winners = int(entrants.Int64), int(winners.Int64)
	return &d, nil
}

// SaveDraw records the draw's outcome with one conditional UPDATE: only the
// first call for a sale changes a row.
func (s *Store) SaveDraw(ctx context.Context, d *flashsale.Draw) (bool, error) {
	var n int64
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE sale_draws SET drawn_at = ?2, entrants = ?3, winners = ?4, document = ?5
			WHERE sale_id = ?1 AND drawn_at IS NULL`,
			d.SaleID, micros(d.DrawnAt), d.Entrants, d.Winners, d.Document)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: save draw of %s: %w", d.SaleID, err)
	}
	return n == 1, nil
}
