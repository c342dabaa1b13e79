package flashsale

import (
	"context"
	"time"
)

// SaleStore keeps sales in the record.
type SaleStore interface {
	// CreateSale inserts s (its ID, Version and times set by the caller),
	// and, in the same transaction, its secret DrawSeed when it has one.
	// It returns ErrSaleExists while another sale of the SKU is neither
	// closed nor past its ClosesAt at s.CreatedAt.
	CreateSale(ctx context.Context, s *Sale) error

	// Sale returns the sale with the id, or ErrNotFound.
	Sale(ctx context.Context, id string) (*Sale, error)

	// SaleBySKU returns the SKU's active sale, or its newest one if none is
	// active, or ErrNotFound.
	SaleBySKU(ctx context.Context, sku string) (*Sale, error)

	// Sales returns every sale, newest first.
	Sales(ctx context.Context) ([]*Sale, error)

	// UpdateSale writes s's editable fields (Name, InitialStock, ClosesAt,
	// HoldSeconds, PerUserLimit, AdmissionPerSecond, MinAccountAgeSeconds,
	// ChallengeBits, SeedCommitment) with one conditional UPDATE on id and
	// version. On success s.Version is version+1 and s.UpdatedAt is set;
	// zero rows is ErrVersionConflict (or ErrNotFound if the sale is gone).
	UpdateSale(ctx context.Context, s *Sale, version int64) error

	// SetSaleState moves the sale to state (with a reason when paused)
	// whatever its version, and bumps the version. It returns the sale as
	// written.
	SetSaleState(ctx context.Context, id string, state SaleState, reason string, at time.Time) (*Sale, error)

	// BeginRebuild bumps the sale's epoch and returns the new epoch with the
	// live holds (pending and confirmed reservations), in one transaction
	// that waits for every reservation write in flight under the old
	// epoch: after it returns, CreateReservation under the old epoch fails
	// with ErrStaleEpoch, so the holds returned are complete.
	BeginRebuild(ctx context.Context, saleID string, at time.Time) (epoch int64, holds []Hold, err error)

	// SaleTotals returns the units of the sale's reservations by state.
	SaleTotals(ctx context.Context, saleID string) (SaleTotals, error)
}

// ReservationStore keeps holds in the record. Every state change is one
// conditional UPDATE whose rows-affected count is the answer.
type ReservationStore interface {
	// CreateReservation inserts r as pending if the sale's epoch is still
	// r.Epoch. It returns ErrStaleEpoch if the gate was rebuilt meanwhile,
	// and ErrDuplicate if the id, the shopper's idempotency key, the
	// shopper's live hold or the instrument's live hold already exists.
	CreateReservation(ctx context.Context, r *Reservation) error

	// Reservation returns the reservation with the id (with its OrderID
	// when confirmed), or ErrNotFound.
	Reservation(ctx context.Context, id string) (*Reservation, error)

	// ReservationByKey returns the shopper's reservation made under an
	// idempotency key, or ErrNotFound.
	ReservationByKey(ctx context.Context, saleID, userID, key string) (*Reservation, error)

	// ConfirmReservation turns the shopper's pending, unexpired reservation
	// into an order, or returns the order it already became. Errors:
	// ErrNotFound (no such reservation of this shopper), CodeReservationExpired,
	// CodeReservationCancelled.
	ConfirmReservation(ctx context.Context, id, userID, paymentRef string, now time.Time) (*Reservation, *Order, error)

	// CancelReservation cancels the shopper's pending reservation and marks
	// it restocked in the same conditional UPDATE. restocked reports
	// whether this call did so, in which case the caller returns the units
	// to the gate. Cancelling a cancelled reservation is not an error.
	// Errors: ErrNotFound, CodeReservationExpired, CodeReservationConfirmed.
	CancelReservation(ctx context.Context, id, userID string, now time.Time) (r *Reservation, restocked bool, err error)

	// ExpireDue claims up to limit pending reservations whose hold ended at
	// or before now, marks them expired and restocked, and returns them.
	// However many callers run at once, each reservation is returned to
	// exactly one of them, once.
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]*Reservation, error)

	// VoidReservation records r as voided (restocked at r.RestockedAt) if no
	// reservation with its id exists, and reports whether it did. A voided
	// reservation is the tombstone of a hold whose record write failed: the
	// caller may return its units to the gate only if this reports true.
	VoidReservation(ctx context.Context, r *Reservation) (bool, error)

	// ReservationStates returns the state of each reservation id of the sale
	// that the record has; ids it lacks are absent from the map.
	ReservationStates(ctx context.Context, saleID string, ids []string) (map[string]ReservationState, error)
}

// OrderStore keeps orders in the record.
type OrderStore interface {
	// Order returns the order with the id, or ErrNotFound.
	Order(ctx context.Context, id string) (*Order, error)

	// Orders returns the sale's orders, oldest first.
	Orders(ctx context.Context, saleID string) ([]*Order, error)

	// ShipOrder moves a confirmed order to shipped with one conditional
	// UPDATE on id and version. Errors: ErrNotFound, ErrVersionConflict,
	// CodeInvalidState if the order is not confirmed.
	ShipOrder(ctx context.Context, id string, version int64, now time.Time) (*Order, error)
}

// Store is the record: where sales, reservations and orders are durable.
// Implementations (package sqlite, package postgres) are safe for concurrent
// use and pass the conformance suite in package storetest.
type Store interface {
	SaleStore
	ReservationStore
	OrderStore
	DrawStore
	// Ping reports whether the record answers.
	Ping(ctx context.Context) error
	Close() error
}
