package postgres

import (
	"context"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

func (x statements) ReleaseSKU(ctx context.Context, sku string, at time.Time) error {
	_, err := x.q.Exec(ctx, `
		UPDATE sale_events SET active_sku = NULL
		WHERE active_sku = $1
		  AND (state = 'closed' OR (closes_at IS NOT NULL AND closes_at <= $2))`,
		sku, at)
	return err
}

func (x statements) InsertSale(ctx context.Context, sale *flashsale.Sale, active bool) error {
	var activeSKU any
	if active {
		activeSKU = sale.SKU
	}
	_, err := x.q.Exec(ctx, `
		INSERT INTO sale_events (
			sale_id, sku, active_sku, name, initial_stock, opens_at, closes_at,
			hold_seconds, per_user_limit, fairness, registration_closes_at,
			admission_per_second, min_account_age_seconds, challenge_bits, shards,
			state, pause_reason, paused_at, epoch, seed_commitment, version,
			created_at, updated_at, require_instrument, display,
			notified_admission_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
			$16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)`,
		sale.ID, sale.SKU, activeSKU, sale.Name, sale.InitialStock, sale.OpensAt, nullTime(sale.ClosesAt),
		sale.HoldSeconds, sale.PerUserLimit, string(sale.Fairness), nullTime(sale.RegistrationClosesAt),
		sale.AdmissionPerSecond, sale.MinAccountAgeSeconds, sale.ChallengeBits, sale.Shards,
		string(sale.State), sale.PauseReason, nullTime(sale.PausedAt), sale.Epoch, sale.SeedCommitment, sale.Version,
		sale.CreatedAt, sale.UpdatedAt, sale.RequireInstrument, sale.Display,
		sale.NotifiedAdmissionSeconds)
	if pgErr, ok := uniqueViolation(err); ok {
		if pgErr.ConstraintName == "sale_events_active_sku_key" {
			return flashsale.ErrSaleExists
		}
		return duplicate(pgErr)
	}
	return err
}

func (x statements) InsertDrawSeed(ctx context.Context, saleID string, seed []byte) error {
	_, err := x.q.Exec(ctx, `INSERT INTO sale_draws (sale_id, seed) VALUES ($1, $2)`, saleID, seed)
	return err
}

func (x statements) SaleByID(ctx context.Context, id string) record.Row {
	return x.q.QueryRow(ctx, `SELECT `+record.SaleColumns+` FROM sale_events WHERE sale_id = $1`, id)
}

func (x statements) SaleBySKU(ctx context.Context, sku string) record.Row {
	// false sorts before true: the active sale first, then the newest.
	return x.q.QueryRow(ctx, `
		SELECT `+record.SaleColumns+` FROM sale_events
		WHERE sku = $1
		ORDER BY active_sku IS NULL, created_at DESC, sale_id DESC
		LIMIT 1`, sku)
}

func (x statements) Sales(ctx context.Context, fn record.Each) error {
	return each(x.q.Query(ctx, `SELECT `+record.SaleColumns+` FROM sale_events ORDER BY created_at DESC, sale_id DESC`))(fn)
}

func (x statements) UpdateSale(ctx context.Context, sale *flashsale.Sale, version int64, at time.Time) record.Row {
	return x.q.QueryRow(ctx, `
		UPDATE sale_events SET
			name = $3, initial_stock = $4, closes_at = $5, hold_seconds = $6,
			per_user_limit = $7, admission_per_second = $8,
			min_account_age_seconds = $9, challenge_bits = $10,
			seed_commitment = $11,
			version = version + 1, updated_at = $12,
			require_instrument = $13, display = $14,
			notified_admission_seconds = $15
		WHERE sale_id = $1 AND version = $2
		RETURNING `+record.SaleColumns,
		sale.ID, version,
		sale.Name, sale.InitialStock, nullTime(sale.ClosesAt), sale.HoldSeconds,
		sale.PerUserLimit, sale.AdmissionPerSecond,
		sale.MinAccountAgeSeconds, sale.ChallengeBits,
		sale.SeedCommitment, at, sale.RequireInstrument, sale.Display,
		sale.NotifiedAdmissionSeconds)
}

func (x statements) SaleExists(ctx context.Context, id string) (bool, error) {
	var exists bool
	err := x.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sale_events WHERE sale_id = $1)`, id).Scan(&exists)
	return exists, err
}

// LockSaleState takes the sale row FOR UPDATE: concurrent moves queue on
// it, and each reads the state the previous one left.
func (x statements) LockSaleState(ctx context.Context, id string) record.Row {
	return x.q.QueryRow(ctx, `SELECT state FROM sale_events WHERE sale_id = $1 FOR UPDATE`, id)
}

func (x statements) MoveSale(ctx context.Context, id string, state flashsale.SaleState, reason string, pausedAt time.Time, release bool, at time.Time) record.Row {
	return x.q.QueryRow(ctx, `
		UPDATE sale_events SET
			state = $2, pause_reason = $3, paused_at = $4,
			active_sku = CASE WHEN $5 THEN NULL ELSE active_sku END,
			version = version + 1, updated_at = $6
		WHERE sale_id = $1
		RETURNING `+record.SaleColumns,
		id, string(state), reason, nullTime(pausedAt), release, at)
}

// BumpEpoch takes the sale row FOR UPDATE first. Every reservation insert
// holds it FOR SHARE until it commits, so the lock waits for the inserts
// in flight, and the inserts after it wait for this transaction and then
// find the epoch changed. The holds read by the transaction's next
// statement (a new snapshot, under READ COMMITTED) are therefore complete.
func (x statements) BumpEpoch(ctx context.Context, id string, at time.Time) record.Row {
	var epoch int64
	if err := x.q.QueryRow(ctx, `SELECT epoch FROM sale_events WHERE sale_id = $1 FOR UPDATE`, id).Scan(&epoch); err != nil {
		return errRow{err}
	}
	return x.q.QueryRow(ctx, `
		UPDATE sale_events SET epoch = epoch + 1, version = version + 1, updated_at = $2
		WHERE sale_id = $1
		RETURNING epoch`, id, at)
}

func (x statements) LiveHolds(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.Query(ctx, `
		SELECT reservation_id, user_id, quantity, payment_fingerprint,
		       idempotency_key, request_hash, created_at
		FROM reservations
		WHERE sale_id = $1 AND state IN ('pending', 'confirmed')
		ORDER BY created_at, reservation_id`, saleID))(fn)
}

func (x statements) SpentAdmissions(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.Query(ctx, `
		SELECT user_id, admission_id
		FROM reservations
		WHERE sale_id = $1 AND admission_id IS NOT NULL AND state <> 'voided'`, saleID))(fn)
}

func (x statements) SaleTotals(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.Query(ctx, `
		SELECT state, COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = $1
		GROUP BY state`, saleID))(fn)
}

func (x statements) PendingUnits(ctx context.Context, saleID string) record.Row {
	return x.q.QueryRow(ctx, `
		SELECT COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = $1 AND state = 'pending'`, saleID)
}
