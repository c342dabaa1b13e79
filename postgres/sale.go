package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
)

// saleColumns is a sale_events row in the order scanSale reads it.
const saleColumns = `sale_id, sku, name, initial_stock, opens_at, closes_at,
	hold_seconds, per_user_limit, fairness, registration_closes_at,
	admission_per_second, min_account_age_seconds, challenge_bits, shards,
	state, pause_reason, paused_at, epoch, seed_commitment, version,
	created_at, updated_at, display`

func scanSale(row pgx.Row) (*flashsale.Sale, error) {
	var (
		s                         flashsale.Sale
		closes, regCloses, paused *time.Time
		fairness, state           string
		opens, created, updated   time.Time
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
	s.OpensAt = opens.UTC()
	s.ClosesAt = timeOf(closes)
	s.RegistrationClosesAt = timeOf(regCloses)
	s.PausedAt = timeOf(paused)
	s.CreatedAt = created.UTC()
	s.UpdatedAt = updated.UTC()
	return &s, nil
}

// CreateSale inserts s as the SKU's active sale. Zero Version and Epoch are
// written as 1, an empty State as scheduled and a zero UpdatedAt as
// CreatedAt, and s is updated to match. In the same transaction, a sale of
// the SKU that is closed or whose ClosesAt is at or before s.CreatedAt gives
// up the SKU; if another sale still holds it, CreateSale returns
// ErrSaleExists. A sale with s.ID already recorded is ErrDuplicate.
func (s *Store) CreateSale(ctx context.Context, sale *flashsale.Sale) (err error) {
	defer func() { err = unavailable(err) }()
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
	err = s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			UPDATE sale_events SET active_sku = NULL
			WHERE active_sku = $1
			  AND (state = 'closed' OR (closes_at IS NOT NULL AND closes_at <= $2))`,
			sale.SKU, sale.CreatedAt)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO sale_events (
				sale_id, sku, active_sku, name, initial_stock, opens_at, closes_at,
				hold_seconds, per_user_limit, fairness, registration_closes_at,
				admission_per_second, min_account_age_seconds, challenge_bits, shards,
				state, pause_reason, paused_at, epoch, seed_commitment, version,
				created_at, updated_at, display)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
				$16, $17, $18, $19, $20, $21, $22, $23, $24)`,
			sale.ID, sale.SKU, activeSKU, sale.Name, sale.InitialStock, sale.OpensAt, nullTime(sale.ClosesAt),
			sale.HoldSeconds, sale.PerUserLimit, string(sale.Fairness), nullTime(sale.RegistrationClosesAt),
			sale.AdmissionPerSecond, sale.MinAccountAgeSeconds, sale.ChallengeBits, sale.Shards,
			string(sale.State), sale.PauseReason, nullTime(sale.PausedAt), sale.Epoch, sale.SeedCommitment, sale.Version,
			sale.CreatedAt, sale.UpdatedAt, sale.Display)
		if err != nil || len(sale.DrawSeed) == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO sale_draws (sale_id, seed) VALUES ($1, $2)`, sale.ID, sale.DrawSeed)
		return err
	})
	if pgErr, ok := uniqueViolation(err); ok {
		if pgErr.ConstraintName == "sale_events_active_sku_key" {
			return fmt.Errorf("postgres: create sale %s of %s: %w", sale.ID, sale.SKU, flashsale.ErrSaleExists)
		}
		return fmt.Errorf("postgres: create sale %s: %w (%s)", sale.ID, flashsale.ErrDuplicate, pgErr.ConstraintName)
	}
	if err != nil {
		return fmt.Errorf("postgres: create sale %s: %w", sale.ID, err)
	}
	return nil
}

// Sale returns the sale with the id, or ErrNotFound.
func (s *Store) Sale(ctx context.Context, id string) (_ *flashsale.Sale, err error) {
	defer func() { err = unavailable(err) }()
	sale, err := scanSale(s.pool.QueryRow(ctx, `SELECT `+saleColumns+` FROM sale_events WHERE sale_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: sale %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: sale %s: %w", id, err)
	}
	return sale, nil
}

// SaleBySKU returns the sale that holds the SKU (active_sku), or else the
// SKU's newest sale, or ErrNotFound.
func (s *Store) SaleBySKU(ctx context.Context, sku string) (_ *flashsale.Sale, err error) {
	defer func() { err = unavailable(err) }()
	// false sorts before true: the active sale first, then the newest.
	sale, err := scanSale(s.pool.QueryRow(ctx, `
		SELECT `+saleColumns+` FROM sale_events
		WHERE sku = $1
		ORDER BY active_sku IS NULL, created_at DESC, sale_id DESC
		LIMIT 1`, sku))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: sale of %s: %w", sku, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: sale of %s: %w", sku, err)
	}
	return sale, nil
}

// Sales returns every sale, newest first.
func (s *Store) Sales(ctx context.Context) (_ []*flashsale.Sale, err error) {
	defer func() { err = unavailable(err) }()
	rows, err := s.pool.Query(ctx, `SELECT `+saleColumns+` FROM sale_events ORDER BY created_at DESC, sale_id DESC`)
	if err != nil {
		return nil, fmt.Errorf("postgres: sales: %w", err)
	}
	sales, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*flashsale.Sale, error) { return scanSale(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: sales: %w", err)
	}
	return sales, nil
}

// UpdateSale writes sale's editable fields if the sale is still at version,
// with one conditional UPDATE, and on success overwrites *sale with the row
// as written (Version is version+1, UpdatedAt the store's clock). Zero rows
// is ErrVersionConflict, or ErrNotFound if there is no such sale; then sale
// is left as it was.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, version int64) (err error) {
	defer func() { err = unavailable(err) }()
	updated, err := scanSale(s.pool.QueryRow(ctx, `
		UPDATE sale_events SET
			name = $3, initial_stock = $4, closes_at = $5, hold_seconds = $6,
			per_user_limit = $7, admission_per_second = $8,
			min_account_age_seconds = $9, challenge_bits = $10,
			seed_commitment = $11, display = $13,
			version = version + 1, updated_at = $12
		WHERE sale_id = $1 AND version = $2
		RETURNING `+saleColumns,
		sale.ID, version,
		sale.Name, sale.InitialStock, nullTime(sale.ClosesAt), sale.HoldSeconds,
		sale.PerUserLimit, sale.AdmissionPerSecond,
		sale.MinAccountAgeSeconds, sale.ChallengeBits,
		sale.SeedCommitment, s.now(), sale.Display))
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sale_events WHERE sale_id = $1)`, sale.ID).Scan(&exists); err != nil {
			return fmt.Errorf("postgres: update sale %s: %w", sale.ID, err)
		}
		if !exists {
			return fmt.Errorf("postgres: update sale %s: %w", sale.ID, flashsale.ErrNotFound)
		}
		return fmt.Errorf("postgres: update sale %s at version %d: %w", sale.ID, version, flashsale.ErrVersionConflict)
	}
	if err != nil {
		return fmt.Errorf("postgres: update sale %s: %w", sale.ID, err)
	}
	*sale = *updated
	return nil
}

// SetSaleState moves the sale to state whatever its version, bumps the
// version and returns the row as written, with the move's event
// (flashsale.SaleStateEvent) written in the same transaction. A sale
// already in state is returned as it is: pausing a paused sale keeps its
// first reason and publishes nothing. Paused records reason and at; any
// other state clears them. Closed also gives up the SKU, so that a new sale
// of it may be created; a closed sale does not take the SKU back if it is
// reopened. ErrNotFound if there is no such sale.
func (s *Store) SetSaleState(ctx context.Context, id string, state flashsale.SaleState, reason string, at time.Time) (_ *flashsale.Sale, err error) {
	defer func() { err = unavailable(err) }()
	var pausedAt any
	if state == flashsale.SalePaused {
		pausedAt = at
	} else {
		reason = ""
	}
	var (
		sale  *flashsale.Sale
		moved bool
	)
	err = s.tx(ctx, func(tx pgx.Tx) error {
		moved = false
		// The row lock orders concurrent moves, so that each sees the
		// state the previous one left and publishes only a real move.
		var from string
		if err := tx.QueryRow(ctx, `SELECT state FROM sale_events WHERE sale_id = $1 FOR UPDATE`, id).Scan(&from); err != nil {
			return err
		}
		if flashsale.SaleState(from) == state {
			var err error
			sale, err = scanSale(tx.QueryRow(ctx, `SELECT `+saleColumns+` FROM sale_events WHERE sale_id = $1`, id))
			return err
		}
		var err error
		sale, err = scanSale(tx.QueryRow(ctx, `
			UPDATE sale_events SET
				state = $2, pause_reason = $3, paused_at = $4,
				active_sku = CASE WHEN $5 THEN NULL ELSE active_sku END,
				version = version + 1, updated_at = $6
			WHERE sale_id = $1
			RETURNING `+saleColumns,
			id, string(state), reason, pausedAt, state == flashsale.SaleClosed, at))
		if err != nil {
			return err
		}
		if typ, ok := flashsale.SaleStateEvent(flashsale.SaleState(from), state); ok {
			moved = true
			_, err = insertEvents(ctx, tx, flashsale.SaleEvent(typ, sale, at))
		}
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: set state of sale %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: set state of sale %s to %s: %w", id, state, err)
	}
	if moved {
		s.eventsWritten()
	}
	return sale, nil
}

// BeginRebuild bumps the sale's epoch and returns the new epoch and the live
// holds, oldest first, in one transaction.
//
// Every CreateReservation holds the sale row FOR SHARE until it commits, so
// the FOR UPDATE here waits for the inserts in flight, and the inserts that
// come after it wait for this transaction and then find the epoch changed
// (ErrStaleEpoch). The holds read after the bump are therefore complete.
// ErrNotFound if there is no such sale.
func (s *Store) BeginRebuild(ctx context.Context, saleID string, at time.Time) (_ int64, _ []flashsale.Hold, err error) {
	defer func() { err = unavailable(err) }()
	var (
		epoch int64
		holds []flashsale.Hold
	)
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT epoch FROM sale_events WHERE sale_id = $1 FOR UPDATE`, saleID).Scan(&epoch); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `
			UPDATE sale_events SET epoch = epoch + 1, version = version + 1, updated_at = $2
			WHERE sale_id = $1
			RETURNING epoch`, saleID, at).Scan(&epoch); err != nil {
			return err
		}
		// A new statement, so under READ COMMITTED a new snapshot: it sees
		// every insert that committed before the lock above was granted.
		rows, err := tx.Query(ctx, `
			SELECT reservation_id, user_id, quantity, payment_fingerprint,
			       idempotency_key, request_hash, created_at
			FROM reservations
			WHERE sale_id = $1 AND state IN ('pending', 'confirmed')
			ORDER BY created_at, reservation_id`, saleID)
		if err != nil {
			return err
		}
		holds, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (flashsale.Hold, error) {
			var (
				h                flashsale.Hold
				instr, key, hash *string
			)
			err := row.Scan(&h.ReservationID, &h.UserID, &h.Quantity, &instr, &key, &hash, &h.CreatedAt)
			h.Instrument, h.IdempotencyKey, h.RequestHash = textOf(instr), textOf(key), textOf(hash)
			h.CreatedAt = h.CreatedAt.UTC()
			return h, err
		})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, fmt.Errorf("postgres: rebuild sale %s: %w", saleID, flashsale.ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("postgres: rebuild sale %s: %w", saleID, err)
	}
	return epoch, holds, nil
}

// PendingUnits sums the units of the sale's pending reservations.
func (s *Store) PendingUnits(ctx context.Context, saleID string) (_ int64, err error) {
	defer func() { err = unavailable(err) }()
	var units int64
	err = s.pool.QueryRow(ctx, `
		SELECT COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = $1 AND state = 'pending'`, saleID).Scan(&units)
	if err != nil {
		return 0, fmt.Errorf("postgres: pending units of sale %s: %w", saleID, err)
	}
	return units, nil
}

// SaleTotals sums the units of the sale's reservations by state. It counts
// rows rather than keeping counters on the sale, which every hold would
// otherwise have to update. A sale without reservations, or no sale at all,
// has zero totals.
func (s *Store) SaleTotals(ctx context.Context, saleID string) (_ flashsale.SaleTotals, err error) {
	defer func() { err = unavailable(err) }()
	var t flashsale.SaleTotals
	rows, err := s.pool.Query(ctx, `
		SELECT state, COALESCE(SUM(quantity), 0)
		FROM reservations
		WHERE sale_id = $1
		GROUP BY state`, saleID)
	if err != nil {
		return t, fmt.Errorf("postgres: totals of sale %s: %w", saleID, err)
	}
	var (
		state string
		units int64
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &units}, func() error {
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
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("postgres: totals of sale %s: %w", saleID, err)
	}
	return t, nil
}
