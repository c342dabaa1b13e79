package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
)

// Draw returns the sale's draw, or ErrNotFound for a sale without one.
func (s *Store) Draw(ctx context.Context, saleID string) (_ *flashsale.Draw, err error) {
	defer func() { err = unavailable(err) }()
	var (
		d                 flashsale.Draw
		drawn             *time.Time
		entrants, winners *int
	)
	err = s.pool.QueryRow(ctx, `
		SELECT sale_id, seed, drawn_at, entrants, winners, document
		FROM sale_draws WHERE sale_id = $1`, saleID).
		Scan(&d.SaleID, &d.Seed, &drawn, &entrants, &winners, &d.Document)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: draw of %s: %w", saleID, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: draw of %s: %w", saleID, err)
	}
	d.DrawnAt = timeOf(drawn)
	if entrants != nil {
		d.Entrants = *entrants
	}
	if winners != nil {
		d.Winners = *winners
	}
	return &d, nil
}

// SaveDraw records the draw's outcome with one conditional UPDATE: only the
// first call for a sale changes a row.
func (s *Store) SaveDraw(ctx context.Context, d *flashsale.Draw) (_ bool, err error) {
	defer func() { err = unavailable(err) }()
	tag, err := s.pool.Exec(ctx, `
		UPDATE sale_draws SET drawn_at = $2, entrants = $3, winners = $4, document = $5
		WHERE sale_id = $1 AND drawn_at IS NULL`,
		d.SaleID, d.DrawnAt, d.Entrants, d.Winners, d.Document)
	if err != nil {
		return false, fmt.Errorf("postgres: save draw of %s: %w", d.SaleID, err)
	}
	return tag.RowsAffected() == 1, nil
}
