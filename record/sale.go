package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// CreateSale inserts sale as the SKU's active sale. Zero Version and Epoch
// are written as 1, an empty State as scheduled and a zero UpdatedAt as
// CreatedAt, and sale is updated to match. In the same transaction, a sale
// of the SKU that is closed or whose ClosesAt is at or before
// sale.CreatedAt gives up the SKU; if another sale still holds it,
// CreateSale returns ErrSaleExists. A sale with sale.ID already recorded is
// ErrDuplicate. A DrawSeed is written with the sale.
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
	err := s.d.Tx(ctx, func(x Statements) error {
		if err := x.ReleaseSKU(ctx, sale.SKU, sale.CreatedAt); err != nil {
			return err
		}
		// A closed sale never holds its SKU.
		if err := x.InsertSale(ctx, sale, sale.State != flashsale.SaleClosed); err != nil || len(sale.DrawSeed) == 0 {
			return err
		}
		return x.InsertDrawSeed(ctx, sale.ID, sale.DrawSeed)
	})
	if errors.Is(err, flashsale.ErrSaleExists) {
		return s.fail(err, "create sale %s of %s", sale.ID, sale.SKU)
	}
	if err != nil {
		return s.fail(err, "create sale %s", sale.ID)
	}
	return nil
}

// Sale returns the sale with the id, or ErrNotFound.
func (s *Store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	sale, err := one(s.d.Reads().SaleByID(ctx, id), s.scanSale)
	if err != nil {
		return nil, s.fail(err, "sale %s", id)
	}
	return sale, nil
}

// SaleBySKU returns the sale that holds the SKU, or else the SKU's newest
// sale, or ErrNotFound.
func (s *Store) SaleBySKU(ctx context.Context, sku string) (*flashsale.Sale, error) {
	sale, err := one(s.d.Reads().SaleBySKU(ctx, sku), s.scanSale)
	if err != nil {
		return nil, s.fail(err, "sale of %s", sku)
	}
	return sale, nil
}

// Sales returns every sale, newest first.
func (s *Store) Sales(ctx context.Context) ([]*flashsale.Sale, error) {
	var sales []*flashsale.Sale
	if err := s.d.Reads().Sales(ctx, collect(&sales, s.scanSale)); err != nil {
		return nil, s.fail(err, "sales")
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
	err := s.d.Write(ctx, func(x Statements) error {
		var err error
		updated, err = s.scanSale(x.UpdateSale(ctx, sale, version, s.now()))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Sales are never deleted: a sale that exists and refused the
		// UPDATE is at another version.
		exists, err := x.SaleExists(ctx, sale.ID)
		switch {
		case err != nil:
			return err
		case !exists:
			return flashsale.ErrNotFound
		}
		return fmt.Errorf("at version %d: %w", version, flashsale.ErrVersionConflict)
	})
	if err != nil {
		return s.fail(err, "update sale %s", sale.ID)
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
	var pausedAt time.Time
	if state == flashsale.SalePaused {
		pausedAt = at
	} else {
		reason = ""
	}
	var (
		sale  *flashsale.Sale
		moved bool
	)
	err := s.d.Tx(ctx, func(x Statements) error {
		moved = false
		// The lock orders concurrent moves, so that each sees the state
		// the previous one left and publishes only a real move.
		var from string
		if err := x.LockSaleState(ctx, id).Scan(&from); err != nil {
			return err
		}
		var err error
		if flashsale.SaleState(from) == state {
			sale, err = s.scanSale(x.SaleByID(ctx, id))
			return err
		}
		sale, err = s.scanSale(x.MoveSale(ctx, id, state, reason, pausedAt, state == flashsale.SaleClosed, at))
		if err != nil {
			return err
		}
		if typ, ok := flashsale.SaleStateEvent(flashsale.SaleState(from), state); ok {
			moved = true
			_, err = x.InsertEvents(ctx, []flashsale.Event{flashsale.SaleEvent(typ, sale, at)})
		}
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, s.fail(flashsale.ErrNotFound, "set state of sale %s", id)
	}
	if err != nil {
		return nil, s.fail(err, "set state of sale %s to %s", id, state)
	}
	if moved {
		s.eventsWritten()
	}
	return sale, nil
}

// BeginRebuild bumps the sale's epoch and returns the new epoch and the live
// holds, oldest first, in one transaction. The bump waits for the
// reservation inserts in flight under the old epoch, and the inserts that
// come after it find the epoch changed (ErrStaleEpoch), so the holds read
// after it are complete. ErrNotFound if there is no such sale.
func (s *Store) BeginRebuild(ctx context.Context, saleID string, at time.Time) (int64, []flashsale.Hold, error) {
	var (
		epoch int64
		holds []flashsale.Hold
	)
	err := s.d.Tx(ctx, func(x Statements) error {
		holds = nil
		if err := x.BumpEpoch(ctx, saleID, at).Scan(&epoch); err != nil {
			return err
		}
		return x.LiveHolds(ctx, saleID, collect(&holds, s.scanHold))
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, s.fail(flashsale.ErrNotFound, "rebuild sale %s", saleID)
	}
	if err != nil {
		return 0, nil, s.fail(err, "rebuild sale %s", saleID)
	}
	return epoch, holds, nil
}

// SpentAdmissions returns the admissions the sale's reservations spent,
// voided ones aside, for a gate rebuilt from the record (see
// flashsale.SaleStore). Reservations made before the record kept
// admissions have none to give.
func (s *Store) SpentAdmissions(ctx context.Context, saleID string) ([]flashsale.SpentAdmission, error) {
	var out []flashsale.SpentAdmission
	err := s.d.Reads().SpentAdmissions(ctx, saleID, collect(&out, func(r Row) (flashsale.SpentAdmission, error) {
		var sp flashsale.SpentAdmission
		err := r.Scan(&sp.UserID, &sp.AdmissionID)
		return sp, err
	}))
	if err != nil {
		return nil, s.fail(err, "spent admissions of sale %s", saleID)
	}
	return out, nil
}

// PendingUnits sums the units of the sale's pending reservations, without
// visiting the others.
func (s *Store) PendingUnits(ctx context.Context, saleID string) (int64, error) {
	var units int64
	if err := s.d.Reads().PendingUnits(ctx, saleID).Scan(&units); err != nil {
		return 0, s.fail(err, "pending units of sale %s", saleID)
	}
	return units, nil
}

// SaleTotals sums the units of the sale's reservations by state. It counts
// rows rather than keeping counters on the sale, which every hold would
// otherwise have to update. A sale without reservations, or no sale at all,
// has zero totals.
func (s *Store) SaleTotals(ctx context.Context, saleID string) (flashsale.SaleTotals, error) {
	var t flashsale.SaleTotals
	err := s.d.Reads().SaleTotals(ctx, saleID, func(row Row) error {
		var (
			state string
			units int64
		)
		if err := row.Scan(&state, &units); err != nil {
			return err
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
		return nil
	})
	if err != nil {
		return flashsale.SaleTotals{}, s.fail(err, "totals of sale %s", saleID)
	}
	return t, nil
}
