package postgres

import (
	"context"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

func (x statements) Draw(ctx context.Context, saleID string) record.Row {
	return x.q.QueryRow(ctx, `
		SELECT sale_id, seed, drawn_at, entrants, winners, document
		FROM sale_draws WHERE sale_id = $1`, saleID)
}

func (x statements) SaveDraw(ctx context.Context, d *flashsale.Draw) (bool, error) {
	n, err := affected(x.q.Exec(ctx, `
		UPDATE sale_draws SET drawn_at = $2, entrants = $3, winners = $4, document = $5
		WHERE sale_id = $1 AND drawn_at IS NULL`,
		d.SaleID, d.DrawnAt, d.Entrants, d.Winners, d.Document))
	return n == 1, err
}
