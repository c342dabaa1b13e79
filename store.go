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
	// whatever its version, and bumps the version, unless the sale is
	// already in that state (then it is returned as it is). A move is
	// written with its event (SaleStateEvent) in the same transaction. It
	// returns the sale as written.
	SetSaleState(ctx context.Context, id string, state SaleState, reason string, at time.Time) (*Sale, error)

	// BeginRebuild bumps the sale's epoch and returns the new epoch with the
	// live holds (pending and confirmed reservations), in one transaction
	// that waits for every reservation write in flight under the old
	// epoch: after it returns, CreateReservation under the old epoch fails
	// with ErrStaleEpoch, so the holds returned are complete.
	BeginRebuild(ctx context.Context, saleID string, at time.Time) (epoch int64, holds []Hold, err error)

	// SpentAdmissions returns the admissions the sale's reservations spent
	// (every reservation that has one, whatever its state, voided ones
	// aside: a voided hold gave its admission back), for a gate rebuilt
	// from the record (GateAdmin.Rebuild). Read after BeginRebuild, it is
	// complete: a reservation written later carries the new epoch, which
	// only the rebuilt gate hands out.
	SpentAdmissions(ctx context.Context, saleID string) ([]SpentAdmission, error)

	// SaleTotals returns the units of the sale's reservations by state.
	SaleTotals(ctx context.Context, saleID string) (SaleTotals, error)

	// PendingUnits returns SaleTotals' Pending alone, read from the
	// pending reservations without visiting the others: the waiting room
	// asks it every second of a sold-out sale, when the confirmed far
	// outnumber the pending.
	PendingUnits(ctx context.Context, saleID string) (int64, error)
}

// ReservationStore keeps holds in the record. Every state change is one
// conditional UPDATE whose rows-affected count is the answer.
type ReservationStore interface {
	// CreateReservation inserts r as pending if the sale's epoch is still
	// r.Epoch, and in the same statement its reservation.created event and
	// the events in also (those whose id the outbox already has are
	// skipped). It returns ErrStaleEpoch if the gate was rebuilt meanwhile,
	// and ErrDuplicate if the id, the shopper's idempotency key, the
	// shopper's live hold or the instrument's live hold already exists;
	// then no event is written.
	CreateReservation(ctx context.Context, r *Reservation, also ...Event) error

	// Reservation returns the reservation with the id (with its OrderID
	// when confirmed), or ErrNotFound.
	Reservation(ctx context.Context, id string) (*Reservation, error)

	// ReservationByKey returns the shopper's reservation made under an
	// idempotency key, or ErrNotFound.
	ReservationByKey(ctx context.Context, saleID, userID, key string) (*Reservation, error)

	// ConfirmReservation turns the shopper's pending, unexpired reservation
	// into an order, or returns the order it already became. A new order
	// is written with its audit row (from nothing to confirmed, by the
	// shopper) and its order.confirmed event, in one transaction. Errors:
	// ErrNotFound (no such reservation of this shopper), CodeReservationExpired,
	// CodeReservationCancelled.
	ConfirmReservation(ctx context.Context, id, userID, paymentRef string, now time.Time) (*Reservation, *Order, error)

	// CancelReservation cancels the shopper's pending reservation and marks
	// it restocked in the same conditional UPDATE, with its
	// reservation.cancelled event in the same transaction. restocked reports
	// whether this call did so, in which case the caller returns the units
	// to the gate. Cancelling a cancelled reservation is not an error.
	// Errors: ErrNotFound, CodeReservationExpired, CodeReservationConfirmed.
	CancelReservation(ctx context.Context, id, userID string, now time.Time) (r *Reservation, restocked bool, err error)

	// ExpireDue claims up to limit pending reservations whose hold ended at
	// or before now, marks them expired and restocked, writes one
	// reservation.expired event for each in the same transaction, and
	// returns them.
	// However many callers run at once, each reservation is returned to
	// exactly one of them, once.
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]*Reservation, error)

	// VoidReservation records r as voided (restocked at r.RestockedAt) if no
	// reservation with its id exists, and reports whether it did. A voided
	// reservation is the tombstone of a hold whose record write failed: the
	// caller may return its units to the gate only if this reports true.
	VoidReservation(ctx context.Context, r *Reservation) (bool, error)

	// Attempts returns every reservation of the sale (voided ones aside)
	// with the order each became, oldest first.
	Attempts(ctx context.Context, saleID string) ([]Attempt, error)

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

	// ChangeOrder moves an order to c.To with one conditional UPDATE on id
	// and version, and writes in the same transaction its audit row and its
	// order event. Cancelling and refunding also end the order's
	// reservation (confirmed to cancelled, restocked_at set) with a
	// conditional UPDATE and its reservation.cancelled event; restocked
	// reports whether that UPDATE took the row, and only then does the
	// caller return the units to the gate. Errors: ErrNotFound,
	// ErrVersionConflict (zero rows at that version), CodeInvalidState
	// (the order is at that version but its state does not allow the
	// move), CodeBadRequest (c.To is not shipped, cancelled or refunded).
	ChangeOrder(ctx context.Context, c OrderChange) (o *Order, restocked bool, err error)

	// OrderHistory returns the order's audit rows, oldest first; none for
	// an order that does not exist.
	OrderHistory(ctx context.Context, orderID string) ([]OrderTransition, error)
}

// OutboxStore is the record's transactional outbox: the events written with
// the changes they report, and the work queue a relay drains. Every method
// that moves an event is one conditional statement; those that finish a
// claim are fenced by its token, so a relay whose claim lapsed (a zombie)
// changes nothing.
type OutboxStore interface {
	// AppendEvents writes the events whose ids the outbox does not have
	// yet, and reports how many it wrote: several servers may report the
	// same occurrence under one id, and one row results.
	AppendEvents(ctx context.Context, events ...Event) (int, error)

	// ClaimEvents claims up to c.Limit events due at c.Now (pending, and
	// not held by a live claim), oldest due first: it writes c.Token to
	// them, counts an attempt, and holds them until c.Now+c.Lease.
	// Concurrent claims never take the same event.
	ClaimEvents(ctx context.Context, c EventClaim) ([]*OutboxEvent, error)

	// CompleteEvents marks the events of ids that the claim token still
	// holds as published at at, and reports how many it marked.
	CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error)

	// RetryEvent releases an event the claim token still holds after a
	// failed delivery, to be tried again at retryAt, keeping cause as its
	// last error. It reports whether the token still held the event.
	RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error)

	// BuryEvent dead-letters an event the claim token still holds, at at,
	// with cause. It reports whether the token still held the event.
	BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error)

	// BuryAbandoned dead-letters pending events that are due at now and
	// already used maxAttempts claims (their last claimer died or gave up
	// without an answer), and reports how many.
	BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error)

	// ReplayEvent gives a dead-lettered event a new life: pending, due at
	// at, no attempts. Errors: ErrNotFound, CodeInvalidState (it is not
	// dead).
	ReplayEvent(ctx context.Context, id string, at time.Time) (*OutboxEvent, error)

	// OutboxEvent returns the event with the id, or ErrNotFound.
	OutboxEvent(ctx context.Context, id string) (*OutboxEvent, error)

	// SaleEvents returns up to limit of the sale's events, oldest first.
	SaleEvents(ctx context.Context, saleID string, limit int) ([]*OutboxEvent, error)

	// DeadEvents returns up to limit dead-lettered events, newest first.
	DeadEvents(ctx context.Context, limit int) ([]*OutboxEvent, error)

	// OutboxStats returns the figures of the sale's events, or of all
	// events for saleID "".
	OutboxStats(ctx context.Context, saleID string) (OutboxStats, error)

	// PurgePublished deletes up to limit events published before before,
	// and reports how many.
	PurgePublished(ctx context.Context, before time.Time, limit int) (int, error)
}

// Store is the record: where sales, reservations and orders are durable.
// Its rules are written once, in package record, over an engine (package
// sqlite, package postgres); both are safe for concurrent use and pass the
// conformance suite in package storetest.
type Store interface {
	SaleStore
	ReservationStore
	OrderStore
	DrawStore
	OutboxStore
	InviteStore
	// Ping reports whether the record answers.
	Ping(ctx context.Context) error
	Close() error
}
