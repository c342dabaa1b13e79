package record

import (
	"context"
	"database/sql"
	"errors"

	"github.com/flashsale/flashsale"
)

// Draw returns the sale's draw, or ErrNotFound for a sale without one.
func (s *Store) Draw(ctx context.Context, saleID string) (*flashsale.Draw, error) {
	var (
		d                 flashsale.Draw
		entrants, winners sql.NullInt64
	)
	err := s.d.Reads().Draw(ctx, saleID).Scan(&d.SaleID, &d.Seed, s.d.Time(&d.DrawnAt), &entrants, &winners, &d.Document)
	if errors.Is(err, sql.ErrNoRows) {
		err = flashsale.ErrNotFound
	}
	if err != nil {
		return nil, s.fail(err, "draw of %s", saleID)
	}
	d.Entrants, d.Winners = int(entrants.Int64), int(winners.Int64)
	return &d, nil
}

// SaveDraw records the draw's outcome with one conditional UPDATE: only the
// first call for a sale changes a row.
func (s *Store) SaveDraw(ctx context.Context, d *flashsale.Draw) (bool, error) {
	saved, err := write(ctx, s, func(x Statements) (bool, error) { return x.SaveDraw(ctx, d) })
	if err != nil {
		return false, s.fail(err, "save draw of %s", d.SaleID)
	}
	return saved, nil
}
