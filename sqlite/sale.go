package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flashsale/flashsale"
)

// saleColumns is a sale_events row in the order scanSale reads it.
const saleColumns = `sale_id, sku, name, initial_stock, opens_at, closes_at,
	hold_seconds, per_user_limit, fairness, registration_closes_at,
	admission_per_second, min_account_age_seconds, challenge_bits, shards,
	state, pause_reason, paused_at, epoch, seed_commitment, version,
	created_at, updated_at, display`

func scanSale(row scanner) (*flashsale.Sale, error) {
	var (
		s                         flashsale.Sale
		opens, created, updated   int64
		closes, regCloses, paused sql.NullInt64
		fairness, state           string
	)
	err := row.Scan(&s.ID, &s.SKU, &s.Name, &s.InitialStock, &opens, &closes,
		&s.HoldSeconds, &s.PerUserLimit, &fairness, &regCloses,
		&s.AdmissionPerSecond, &s.MinAccountAgeSeconds, &s.ChallengeBits, &s.Shards,
		&state, &s.PauseReason, &paused, &s.Epoch, &s.SeedCommitment, &s.Version,
		&created, &updated, &s.Display)
	if err != nil {
		return nil, err
	}
	s.Fairness = flashsale.Fairness(fairness)
	s.State = flashsale.SaleState(state)
	s.OpensAt = timeOf(opens)
	s.ClosesAt = nullTimeOf(closes)
	s.RegistrationClosesAt = nullTimeOf(regCloses)
	s.PausedAt = nullTimeOf(paused)
	s.CreatedAt = timeOf(created)
	s.UpdatedAt = timeOf(updated)
	return &s, nil
}

// CreateSale inserts s as the SKU's active sale. Zero Version and Epoch are
// written as 1, an empty State as scheduled and a zero UpdatedAt as
// CreatedAt, and s is updated to match. In the same transaction, a sale of
// the SKU that is closed or whose ClosesAt is at or before s.CreatedAt gives
// up the SKU; if another sale still holds it, CreateSale returns
// ErrSaleExists. A sale with s.ID already recorded is ErrDuplicate.
func (s *Store) CreateSale(ctx context.Context, sale *flashsale.Sale) error {
	if sale.Version == 0 {
		sale.Version = 1
	}
	if sale.Epoch == 0 {
		sale.Epoch = 1
	}
	if sale.State == "" {
		sale.State = flashsale.SaleScheduled
	}
	if sale.UpdatedAt.IsZero() {
		sale.UpdatedAt = sale.CreatedAt
	}
	var activeSKU any = sale.SKU
	if sale.State == flashsale.SaleClosed {
		activeSKU = nil
	}
	err := s.tx(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `
			UPDATE sale_events SET active_sku = NULL
			WHERE active_sku = ?1
			  AND (state = 'closed' OR (closes_at IS NOT NULL AND closes_at <= ?2))`,
			sale.SKU, micros(sale.CreatedAt))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO sale_events (
				sale_id, sku, active_sku, name, initial_stock, opens_at, closes_at,
				hold_seconds, per_user_limit, fairness, registration_closes_at,
				admission_per_second, min_account_age_seconds, challenge_bits, shards,
				state, pause_reason, paused_at, epoch, seed_commitment, version,
				created_at, updated_at, display)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
				?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)`,
			sale.ID, sale.SKU, activeSKU, sale.Name, sale.InitialStock, micros(sale.OpensAt), nullMicros(sale.ClosesAt),
			sale.HoldSeconds, sale.PerUserLimit, string(sale.Fairness), nullMicros(sale.RegistrationClosesAt),
			sale.AdmissionPerSecond, sale.MinAccountAgeSeconds, sale.ChallengeBits, sale.Shards,
			string(sale.State), sale.PauseReason, nullMicros(sale.PausedAt), sale.Epoch, sale.SeedCommitment, sale.Version,
			micros(sale.CreatedAt), micros(sale.UpdatedAt), sale.Display)
		if err != nil || len(sale.DrawSeed) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sale_draws (sale_id, seed) VALUES (?1, ?2)`, sale.ID, sale.DrawSeed)
		return err
	})
	switch resultCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE: // active_sku is the table's one UNIQUE besides its key
		return fmt.Errorf("sqlite: create sale %s of %s: %w", sale.ID, sale.SKU, flashsale.ErrSaleExists)
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("sqlite: create sale %s: %w", sale.ID, flashsale.ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("sqlite: create sale %s: %w", sale.ID, err)
	}
	return nil
}

// Sale returns the sale with the id, or ErrNotFound.
func (s *Store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	sale, err := scanSale(s.read.QueryRowContext(ctx, `SELECT `+saleColumns+` FROM sale_events WHERE sale_id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: sale %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: sale %s: %w", id, err)
	}
	return sale, nil
}

// SaleBySKU returns the sale that holds the SKU (active_sku), or else the
// SKU's newest sale, or ErrNotFound.
func (s *Store) SaleBySKU(ctx context.Context, sku string) (*flashsale.Sale, error) {
	// 0 sorts before 1: the active sale first, then the newest.
	sale, err := scanSale(s.read.QueryRowContext(ctx, `
		SELECT `+saleColumns+` FROM sale_events
		WHERE sku = ?1
		ORDER BY active_sku IS NULL, created_at DESC, sale_id DESC
		LIMIT 1`, sku))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: sale of %s: %w", sku, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: sale of %s: %w", sku, err)
	}
	return sale, nil
}

// Sales returns every sale, newest first.
func (s *Store) Sales(ctx context.Context) ([]*flashsale.Sale, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+saleColumns+` FROM sale_events ORDER BY created_at DESC, sale_id DESC`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sales: %w", err)
	}
	defer rows.Close()
	var sales []*flashsale.Sale
	for rows.Next() {
		sale, err := scanSale(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: sales: %w", err)
		}
		sales = append(sales, sale)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: sales: %w", err)
	}
	return sales, nil
}

// UpdateSale writes sale's editable fields if the sale is still at version,
// with one conditional UPDATE, and on success overwrites *sale with the row
// as written (Version is version+1, UpdatedAt the store's clock). Zero rows
// is ErrVersionConflict, or ErrNotFound if there is no such sale; then sale
// is left as it was.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, version int64) error {
	var updated *flashsale.Sale
	err := s.tx(ctx, func(tx *wtx) error {
		var err error
		updated, err = scanSale(tx.QueryRowContext(ctx, `
			UPDATE sale_events SET
				name = ?3, initial_stock = ?4, closes_at = ?5, hold_seconds = ?6,
				per_user_limit = ?7, admission_per_second = ?8,
				min_account_age_seconds = ?9, challenge_bits = ?10,
				seed_commitment = ?11, display = ?13,
				version = version + 1, updated_at = ?12
			WHERE sale_id = ?1 AND version = ?2
			RETURNING `+saleColumns,
			sale.ID, version,
			sale.Name, sale.InitialStock, nullMicros(sale.ClosesAt), sale.HoldSeconds,
			sale.PerUserLimit, sale.AdmissionPerSecond,
			sale.MinAccountAgeSeconds, sale.ChallengeBits,
			sale.SeedCommitment, micros(s.now()), sale.Display))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sale_events WHERE sale_id = ?1)`, sale.ID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return flashsale.ErrNotFound
		}
		return fmt.Errorf("at version %d: %w", version, flashsale.ErrVersionConflict)
	})
	if err != nil {
		return fmt.Errorf("sqlite: update sale %s: %w", sale.ID, err)
	}
	*sale = *updated
	return nil
}

// SetSaleState moves the sale to state whatever its version, bumps the
// version and returns the row as written, with the move's event
// (flashsale.SaleStateEvent) written in the same transaction. A sale
// already in state is returned as it is: pausing a paused sale keeps its
// first reason and publishes nothing. Paused records reason and at; any
// other state clears them. Closed also gives up the SKU, so that a new
// sale of it may be created; a closed sale does not take the SKU back if it
// is reopened. ErrNotFound if there is no such sale.
func (s *Store) SetSaleState(ctx context.Context, id string, state flashsale.SaleState, reason string, at time.Time) (*flashsale.Sale, error) {
	var pausedAt any
	if state == flashsale.SalePaused {
		pausedAt = micros(at)
	} else {
		reason = ""
	}
	var (
		sale  *flashsale.Sale
		moved bool
	)
	err := s.tx(ctx, func(tx *wtx) error {
		// One writer at a time: the state read here is the state the
		// UPDATE moves from.
		var from string
		if err := tx.QueryRowContext(ctx, `SELECT state FROM sale_events WHERE sale_id = ?1`, id).Scan(&from); err != nil {
			return err
		}
		var err error
		if flashsale.SaleState(from) == state {
			sale, err = scanSale(tx.QueryRowContext(ctx, `SELECT `+saleColumns+` FROM sale_events WHERE sale_id = ?1`, id))
			return err
		}
		sale, err = scanSale(tx.QueryRowContext(ctx, `
			UPDATE sale_events SET
				state = ?2, pause_reason = ?3, paused_at = ?4,
				active_sku = CASE WHEN ?5 THEN NULL ELSE active_sku END,
				version = version + 1, updated_at = ?6
			WHERE sale_id = ?1
			RETURNING `+saleColumns,
			id, string(state), reason, pausedAt, state == flashsale.SaleClosed, micros(at)))
		if err != nil {
			return err
		}
		if typ, ok := flashsale.SaleStateEvent(flashsale.SaleState(from), state); ok {
			moved = true
			_, err = insertEvents(ctx, tx, flashsale.SaleEvent(typ, sale, at))
		}
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: set state of sale %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: set state of sale %s to %s: %w", id, state, err)
	}
	if moved {
		s.eventsWritten()
	}
	return sale, nil
}

// BeginRebuild bumps the sale's epoch and returns the new epoch and the live
// holds, oldest first, in one transaction. Every CreateReservation is a
// write transaction too, and SQLite runs one at a time: those before this
// one are in the holds, those after it find the epoch changed
// (ErrStaleEpoch). ErrNotFound if there is no such sale.
func (s *Store) BeginRebuild(ctx context.Context, saleID string, at time.Time) (int64, []flashsale.Hold, error) {
	var (
		epoch int64
		holds []flashsale.Hold
	)
	err := s.tx(ctx, func(tx *wtx) error {
		if err := tx.QueryRowContext(ctx, `
			UPDATE sale_events SET epoch = epoch + 1, version = version + 1, updated_at = ?2
			WHERE sale_id = ?1
			RETURNING epoch`, saleID, micros(at)).Scan(&epoch); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `
			SELECT reservation_id, user_id, quantity, payment_fingerprint,
			       idempotency_key, request_hash, created_at
			FROM reservations
			WHERE sale_id = ?1 AND state IN ('pending', 'confirmed')
			ORDER BY created_at, reservation_id`, saleID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				h                flashsale.Hold
				instr, key, hash sql.NullString
				created          int64
			)
			if err := rows.Scan(&h.ReservationID, &h.UserID, &h.Quantity, &instr, &key, &hash, &created); err != nil {
				return err
			}
			h.Instrument, h.IdempotencyKey, h.RequestHash = instr.String, key.String, hash.String
			h.CreatedAt = timeOf(created)
			holds = append(holds, h)
		}
		return rows.Err()
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("sqlite: rebuild sale %s: %w", saleID, flashsale.ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("sqlite: rebuild sale %s: %w", saleID, err)
	}
	return epoch, holds, nil
}

// SaleTotals sums the units of the sale's reservations by state. It counts
// rows rather than keeping counters on the sale, which every hold would
// otherwise have to update. A sale without reservations, or no sale at all,
// has zero totals.
// PendingUnits sums the units of the sale's pending reservations, from
// the covering index's pending range alone.
func (s *Store) PendingUnits(ctx context.Context, saleID string) (int64, error) {
	var units int64
	err := s.read.QueryRowContext(ctx, `
		SELECT COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = ?1 AND state = 'pending'`, saleID).Scan(&units)
	if err != nil {
		return 0, fmt.Errorf("sqlite: pending units of sale %s: %w", saleID, err)
	}
	return units, nil
}

func (s *Store) SaleTotals(ctx context.Context, saleID string) (flashsale.SaleTotals, error) {
	var t flashsale.SaleTotals
	rows, err := s.read.QueryContext(ctx, `
		SELECT state, COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = ?1
		GROUP BY state`, saleID)
	if err != nil {
		return t, fmt.Errorf("sqlite: totals of sale %s: %w", saleID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			state string
			units int64
		)
		if err := rows.Scan(&state, &units); err != nil {
			return t, fmt.Errorf("sqlite: totals of sale %s: %w", saleID, err)
		}
		switch flashsale.ReservationState(state) {
		case flashsale.ReservationPending:
			t.Pending = units
		case flashsale.ReservationConfirmed:
			t.Confirmed = units
		case flashsale.ReservationExpired:
			t.Expired = units
		case flashsale.ReservationCancelled:
			t.Cancelled = units
		case flashsale.ReservationVoided:
			t.Voided = units
		}
	}
	if err := rows.Err(); err != nil {
		return t, fmt.Errorf("sqlite: totals of sale %s: %w", saleID, err)
	}
	return t, nil
}
