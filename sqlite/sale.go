package sqlite

import (
	"context"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

func (x statements) ReleaseSKU(ctx context.Context, sku string, at time.Time) error {
	_, err := x.q.ExecContext(ctx, `
		UPDATE sale_events SET active_sku = NULL
		WHERE active_sku = ?1
		  AND (state = 'closed' OR (closes_at IS NOT NULL AND closes_at <= ?2))`,
		sku, micros(at))
	return err
}

func (x statements) InsertSale(ctx context.Context, sale *flashsale.Sale, active bool) error {
	var activeSKU any
	if active {
		activeSKU = sale.SKU
	}
	_, err := x.q.ExecContext(ctx, `
		INSERT INTO sale_events (
			sale_id, sku, active_sku, name, initial_stock, opens_at, closes_at,
			hold_seconds, per_user_limit, fairness, registration_closes_at,
			admission_per_second, min_account_age_seconds, challenge_bits, shards,
			state, pause_reason, paused_at, epoch, seed_commitment, version,
			created_at, updated_at, require_instrument, display,
			notified_admission_seconds)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
			?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)`,
		sale.ID, sale.SKU, activeSKU, sale.Name, sale.InitialStock, micros(sale.OpensAt), nullMicros(sale.ClosesAt),
		sale.HoldSeconds, sale.PerUserLimit, string(sale.Fairness), nullMicros(sale.RegistrationClosesAt),
		sale.AdmissionPerSecond, sale.MinAccountAgeSeconds, sale.ChallengeBits, sale.Shards,
		string(sale.State), sale.PauseReason, nullMicros(sale.PausedAt), sale.Epoch, sale.SeedCommitment, sale.Version,
		micros(sale.CreatedAt), micros(sale.UpdatedAt), sale.RequireInstrument, sale.Display,
		sale.NotifiedAdmissionSeconds)
	switch resultCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE: // active_sku is the table's one UNIQUE besides its key
		return flashsale.ErrSaleExists
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return flashsale.ErrDuplicate
	}
	return err
}

func (x statements) InsertDrawSeed(ctx context.Context, saleID string, seed []byte) error {
	_, err := x.q.ExecContext(ctx, `INSERT INTO sale_draws (sale_id, seed) VALUES (?1, ?2)`, saleID, seed)
	return err
}

func (x statements) SaleByID(ctx context.Context, id string) record.Row {
	return x.q.QueryRowContext(ctx, `SELECT `+record.SaleColumns+` FROM sale_events WHERE sale_id = ?1`, id)
}

func (x statements) SaleBySKU(ctx context.Context, sku string) record.Row {
	// 0 sorts before 1: the active sale first, then the newest.
	return x.q.QueryRowContext(ctx, `
		SELECT `+record.SaleColumns+` FROM sale_events
		WHERE sku = ?1
		ORDER BY active_sku IS NULL, created_at DESC, sale_id DESC
		LIMIT 1`, sku)
}

func (x statements) Sales(ctx context.Context, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `SELECT `+record.SaleColumns+` FROM sale_events ORDER BY created_at DESC, sale_id DESC`))(fn)
}

func (x statements) UpdateSale(ctx context.Context, sale *flashsale.Sale, version int64, at time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE sale_events SET
			name = ?3, initial_stock = ?4, closes_at = ?5, hold_seconds = ?6,
			per_user_limit = ?7, admission_per_second = ?8,
			min_account_age_seconds = ?9, challenge_bits = ?10,
			seed_commitment = ?11,
			version = version + 1, updated_at = ?12,
			require_instrument = ?13, display = ?14,
			notified_admission_seconds = ?15
		WHERE sale_id = ?1 AND version = ?2
		RETURNING `+record.SaleColumns,
		sale.ID, version,
		sale.Name, sale.InitialStock, nullMicros(sale.ClosesAt), sale.HoldSeconds,
		sale.PerUserLimit, sale.AdmissionPerSecond,
		sale.MinAccountAgeSeconds, sale.ChallengeBits,
		sale.SeedCommitment, micros(at), sale.RequireInstrument, sale.Display,
		sale.NotifiedAdmissionSeconds)
}

func (x statements) SaleExists(ctx context.Context, id string) (bool, error) {
	var exists bool
	err := x.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sale_events WHERE sale_id = ?1)`, id).Scan(&exists)
	return exists, err
}

// LockSaleState needs no lock: in a write transaction, one writer at a
// time, the state read is the state the next statement moves from.
func (x statements) LockSaleState(ctx context.Context, id string) record.Row {
	return x.q.QueryRowContext(ctx, `SELECT state FROM sale_events WHERE sale_id = ?1`, id)
}

func (x statements) MoveSale(ctx context.Context, id string, state flashsale.SaleState, reason string, pausedAt time.Time, release bool, at time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE sale_events SET
			state = ?2, pause_reason = ?3, paused_at = ?4,
			active_sku = CASE WHEN ?5 THEN NULL ELSE active_sku END,
			version = version + 1, updated_at = ?6
		WHERE sale_id = ?1
		RETURNING `+record.SaleColumns,
		id, string(state), reason, nullMicros(pausedAt), release, micros(at))
}

// BumpEpoch is a write transaction, and CreateReservation's insert is one
// too: SQLite runs one at a time, so the inserts before it are done and
// those after it read the new epoch.
func (x statements) BumpEpoch(ctx context.Context, id string, at time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE sale_events SET epoch = epoch + 1, version = version + 1, updated_at = ?2
		WHERE sale_id = ?1
		RETURNING epoch`, id, micros(at))
}

func (x statements) LiveHolds(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT reservation_id, user_id, quantity, payment_fingerprint,
		       idempotency_key, request_hash, created_at
		FROM reservations
		WHERE sale_id = ?1 AND state IN ('pending', 'confirmed')
		ORDER BY created_at, reservation_id`, saleID))(fn)
}

func (x statements) SpentAdmissions(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT user_id, admission_id
		FROM reservations
		WHERE sale_id = ?1 AND admission_id IS NOT NULL AND state <> 'voided'`, saleID))(fn)
}

// SaleTotals and PendingUnits read the covering index on (sale_id, state,
// quantity) alone.
func (x statements) SaleTotals(ctx context.Context, saleID string, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT state, COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = ?1
		GROUP BY state`, saleID))(fn)
}

func (x statements) PendingUnits(ctx context.Context, saleID string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = ?1 AND state = 'pending'`, saleID)
}
