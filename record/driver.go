package record

import (
	"context"
	"time"

	"github.com/flashsale/flashsale"
)

// Row is one row of a statement's result, as the engine's client returns
// it (*sql.Row and *sql.Rows, pgx.Row and pgx.Rows all are one). A
// statement that found or changed no row reports sql.ErrNoRows from Scan
// (pgx's ErrNoRows wraps it): for a conditional UPDATE, that is the answer
// "refused", which the Store then explains.
//
// The columns of a Row are in the order of the scan that reads it (see
// each statement's documentation). Text columns that may be NULL scan into
// sql.NullString and integers that may be NULL into sql.NullInt64; times
// scan into the engine's own destination (Driver.Time).
type Row interface {
	Scan(dest ...any) error
}

// Each is called once for each row of a statement that returns several,
// in the statement's order; the row is valid only during the call. An
// error it returns stops the rows and is the statement's error.
type Each func(Row) error

// Driver is one engine of the record: how to reach it, its statements and
// its errors. The Store above it decides what a statement's answer means;
// a driver decides nothing, it only runs its SQL and translates its
// engine's errors (a constraint named in the statement's documentation
// becomes the domain error named there).
//
// Implementations (package sqlite, package postgres) are safe for
// concurrent use.
type Driver interface {
	// Name prefixes the Store's errors ("sqlite", "postgres").
	Name() string

	// Reads returns the statements for reads outside any transaction.
	// Writing through them is an error.
	Reads() Statements

	// Write runs fn with statements that may write, each committed as it
	// runs: fn is for work that needs no transaction around it (one
	// statement, or a write followed by a read that only explains its
	// answer). An engine with one writer may run fn in one transaction.
	Write(ctx context.Context, fn func(Statements) error) error

	// Tx runs fn's statements in one transaction, committed if fn returns
	// nil and rolled back otherwise. The transaction is READ COMMITTED or
	// stricter: a statement that waits on a row lock re-checks its WHERE
	// against the row as committed.
	Tx(ctx context.Context, fn func(Statements) error) error

	// Time returns the scan destination that reads a time column into t,
	// in UTC; NULL reads as the zero time.
	Time(t *time.Time) any

	// Classify returns err marked with flashsale.CodeUnavailable when it
	// means the engine did not answer at all (a connection refused, cut
	// or timed out, a server shutting down), and err as it is otherwise.
	// The cause stays in the chain.
	Classify(err error) error

	// Ping reports whether the engine answers.
	Ping(ctx context.Context) error

	// Close closes the engine's connections; writes in progress finish
	// first.
	Close() error
}

// Statements are an engine's statements, one method each, with their SQL
// in the engine's package. Every write is one conditional statement whose
// rows-affected count (or returned row) is the answer; the Store decides
// what the answer means. Methods that take an Each call it for every row
// and return after the last.
type Statements interface {
	SaleStatements
	ReservationStatements
	OrderStatements
	OutboxStatements
	DrawStatements
	InviteStatements
}

// InviteStatements are the statements on invite codes.
type InviteStatements interface {
	// InsertInvites inserts the hashes as the sale's unredeemed codes,
	// issued by by at at. Errors: flashsale.ErrDuplicate (a hash exists).
	InsertInvites(ctx context.Context, saleID string, hashes []string, by string, at time.Time) error

	// BindInvite binds the sale's code with the hash to userID at at (an
	// earlier redeemed_at kept) if it is unbound or already bound to
	// userID; it returns (redeemed_at). Errors: flashsale.ErrDuplicate
	// (the account holds another code of the sale:
	// invites_one_per_account).
	BindInvite(ctx context.Context, saleID, hash, userID string, at time.Time) Row

	// Invite returns the code with the hash: (sale_id, redeemed_by).
	Invite(ctx context.Context, hash string) Row

	// InviteOf returns the sale's code bound to userID: (code_hash,
	// redeemed_at).
	InviteOf(ctx context.Context, saleID, userID string) Row

	// InviteCounts returns (issued, redeemed, won) of the sale's codes,
	// won counting those redeemed by an account with a pending or
	// confirmed reservation of the sale.
	InviteCounts(ctx context.Context, saleID string) Row
}

// SaleStatements are the statements on sale_events (and the sale's draw
// seed).
type SaleStatements interface {
	// ReleaseSKU clears active_sku of the SKU's sales that are closed or
	// whose closes_at is at or before at.
	ReleaseSKU(ctx context.Context, sku string, at time.Time) error

	// InsertSale inserts sale as it is, with active_sku its SKU if active,
	// NULL otherwise. Errors: flashsale.ErrSaleExists (another sale holds
	// the SKU), flashsale.ErrDuplicate (the sale id exists).
	InsertSale(ctx context.Context, sale *flashsale.Sale, active bool) error

	// InsertDrawSeed inserts the sale's secret draw seed.
	InsertDrawSeed(ctx context.Context, saleID string, seed []byte) error

	// SaleByID returns the sale (SaleColumns).
	SaleByID(ctx context.Context, id string) Row

	// SaleBySKU returns the sale holding the SKU, or else its newest
	// (SaleColumns).
	SaleBySKU(ctx context.Context, sku string) Row

	// Sales returns every sale, newest first (SaleColumns).
	Sales(ctx context.Context, each Each) error

	// UpdateSale writes the sale's editable fields (Name, InitialStock,
	// ClosesAt, HoldSeconds, PerUserLimit, AdmissionPerSecond,
	// MinAccountAgeSeconds, ChallengeBits, SeedCommitment,
	// RequireInstrument, Display, NotifiedAdmissionSeconds), version+1 and updated_at at, if the sale
	// is at version; it returns the row as written (SaleColumns).
	UpdateSale(ctx context.Context, sale *flashsale.Sale, version int64, at time.Time) Row

	// SaleExists reports whether the sale exists.
	SaleExists(ctx context.Context, id string) (bool, error)

	// LockSaleState returns the sale's state (one text column), locking
	// the row against other moves until the transaction ends, so that
	// the state read is the state the next statement moves from.
	LockSaleState(ctx context.Context, id string) Row

	// MoveSale sets the sale's state, pause_reason and paused_at (NULL for
	// the zero time), clears active_sku if release, bumps the version and
	// sets updated_at at; it returns the row as written (SaleColumns).
	MoveSale(ctx context.Context, id string, state flashsale.SaleState, reason string, pausedAt time.Time, release bool, at time.Time) Row

	// BumpEpoch adds one to the sale's epoch and version, sets updated_at
	// at, and returns the new epoch (one integer column). It waits for
	// every reservation insert in flight under the old epoch
	// (InsertReservation), and makes those that come after it find the
	// new one.
	BumpEpoch(ctx context.Context, id string, at time.Time) Row

	// LiveHolds returns the sale's pending and confirmed reservations,
	// oldest first, by
	// created_at then id: rows of (reservation_id, user_id, quantity,
	// payment_fingerprint, idempotency_key, request_hash, created_at).
	LiveHolds(ctx context.Context, saleID string, each Each) error

	// SpentAdmissions returns the admissions the sale's reservations
	// spent, voided ones aside: rows of (user_id, admission_id).
	SpentAdmissions(ctx context.Context, saleID string, each Each) error

	// SaleTotals returns the units of the sale's reservations by state:
	// rows of (state text, units integer).
	SaleTotals(ctx context.Context, saleID string, each Each) error

	// PendingUnits returns the units of the sale's pending reservations
	// (one integer column).
	PendingUnits(ctx context.Context, saleID string) Row
}

// ReservationStatements are the statements on reservations.
type ReservationStatements interface {
	// InsertReservation inserts r as pending at version 1 if its sale's
	// epoch is r.Epoch, and events with it (skipping ids the outbox has),
	// in one statement or in the transaction it runs in; it reports
	// whether it inserted (false: no sale at that epoch, and no event
	// written). Errors: flashsale.ErrDuplicate (the id, the shopper's
	// idempotency key, the shopper's live hold, the instrument's live
	// hold or a hold on the same admission exists).
	InsertReservation(ctx context.Context, r *flashsale.Reservation, events []flashsale.Event) (bool, error)

	// ReservationByID returns the reservation (ReservationColumns).
	ReservationByID(ctx context.Context, id string) Row

	// ReservationByKey returns the shopper's reservation of the sale under
	// the idempotency key (ReservationColumns).
	ReservationByKey(ctx context.Context, saleID, userID, key string) Row

	// ConfirmPending moves the shopper's reservation to confirmed at now
	// if it is pending and expires after now; it returns the row as
	// written (ReservationColumns).
	ConfirmPending(ctx context.Context, id, userID string, now time.Time) Row

	// CancelPending moves the shopper's reservation to cancelled,
	// restocked at now, if it is pending and not restocked; it returns the
	// row as written (ReservationColumns).
	CancelPending(ctx context.Context, id, userID string, now time.Time) Row

	// ExpireDue moves up to limit pending reservations whose expiry is at
	// or before now, the earliest first, to expired, restocked at now, and
	// returns them (ReservationColumns). Concurrent callers never
	// take the same reservation.
	ExpireDue(ctx context.Context, now time.Time, limit int, each Each) error

	// InsertVoided inserts r as voided, restocked at r.RestockedAt,
	// without idempotency key or request hash, unless its id exists; it
	// reports whether it inserted.
	InsertVoided(ctx context.Context, r *flashsale.Reservation) (bool, error)

	// ReservationStates returns (id text, state text) for each of ids that
	// is a reservation of the sale.
	ReservationStates(ctx context.Context, saleID string, ids []string, each Each) error

	// Attempts returns the sale's reservations but the voided, oldest
	// first (by created_at, then id), with their orders: rows of
	// (reservation_id, user_id, payment_fingerprint, quantity, state,
	// created_at, account_created, order_id, order state, order version).
	Attempts(ctx context.Context, saleID string, each Each) error
}

// OrderStatements are the statements on orders and their audit rows.
type OrderStatements interface {
	// InsertOrder inserts order id for the confirmed reservation r, as
	// confirmed at version 1, created and updated at at; it returns the
	// row as written (OrderColumns).
	InsertOrder(ctx context.Context, id string, r *flashsale.Reservation, paymentRef string, at time.Time) Row

	// OrderByID returns the order (OrderColumns).
	OrderByID(ctx context.Context, id string) Row

	// OrderOfReservation returns the order the reservation became
	// (OrderColumns).
	OrderOfReservation(ctx context.Context, reservationID string) Row

	// Orders returns the sale's orders, oldest first (OrderColumns).
	Orders(ctx context.Context, saleID string, each Each) error

	// MoveOrder moves the order to c.To at c.At, version+1, setting
	// shipped_at when c.To is shipped, if it is at c.Version and in one of
	// the states from; it returns the row as written (OrderColumns,
	// then shipped_at).
	MoveOrder(ctx context.Context, c flashsale.OrderChange, from []flashsale.OrderState) Row

	// EndOrderReservation moves the reservation of an order from confirmed
	// to cancelled, restocked at at, if it is confirmed and not restocked;
	// it returns the row as written (ReservationColumns).
	EndOrderReservation(ctx context.Context, reservationID string, at time.Time) Row

	// InsertTransition writes an order's audit row (From "" is NULL).
	InsertTransition(ctx context.Context, t flashsale.OrderTransition) error

	// OrderHistory returns the order's audit rows, oldest first
	// rows of (order_id, from_state, to_state, actor, reason,
	// version, at, event_id).
	OrderHistory(ctx context.Context, orderID string, each Each) error
}

// OutboxStatements are the statements on the transactional outbox.
type OutboxStatements interface {
	// InsertEvents inserts the events whose ids the outbox lacks, due at
	// their time, and reports how many.
	InsertEvents(ctx context.Context, events []flashsale.Event) (int, error)

	// ClaimEvents claims up to c.Limit pending events due at c.Now with
	// fewer than maxAttempts attempts, the earliest due first: it writes
	// c.Token, c.Relay and claimed_at c.Now, counts an attempt and makes
	// them due at c.Now+c.Lease. Concurrent claims never take the same
	// event. It returns the events claimed, in no order (EventColumns).
	ClaimEvents(ctx context.Context, c flashsale.EventClaim, maxAttempts int, each Each) error

	// CompleteEvents marks published at at the events of ids that token
	// holds, releasing them, and reports how many.
	CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error)

	// RetryEvent releases the event token holds, due at retryAt, with
	// cause as its last error; it reports whether token held it.
	RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error)

	// BuryEvent dead-letters the event token holds at at with cause; it
	// reports whether token held it.
	BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error)

	// BuryAbandoned dead-letters the pending events due at now with at
	// least maxAttempts attempts, and reports how many.
	BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error)

	// ReplayEvent makes the dead-lettered event pending, due at at, with
	// no attempts; it returns the row as written (EventColumns).
	ReplayEvent(ctx context.Context, id string, at time.Time) Row

	// OutboxEvent returns the event (EventColumns).
	OutboxEvent(ctx context.Context, id string) Row

	// SaleEvents returns up to limit of the sale's events, oldest first
	// (EventColumns).
	SaleEvents(ctx context.Context, saleID string, limit int, each Each) error

	// DeadEvents returns up to limit dead-lettered events, newest first
	// (EventColumns).
	DeadEvents(ctx context.Context, limit int, each Each) error

	// OutboxStats returns (pending count, oldest pending created_at or
	// NULL, dead count) of the sale's events, or of all for saleID "".
	OutboxStats(ctx context.Context, saleID string) Row

	// PurgePublished deletes up to limit events published before before,
	// the earliest first, and reports how many.
	PurgePublished(ctx context.Context, before time.Time, limit int) (int, error)
}

// DrawStatements are the statements on a sale's draw.
type DrawStatements interface {
	// Draw returns the sale's draw: (sale_id, seed, drawn_at, entrants,
	// winners, document).
	Draw(ctx context.Context, saleID string) Row

	// SaveDraw records the draw's outcome if none is recorded, and
	// reports whether it did.
	SaveDraw(ctx context.Context, d *flashsale.Draw) (bool, error)
}

// Rows are a query's rows as the engine's client returns them (*sql.Rows,
// pgx.Rows).
type Rows interface {
	Row
	Next() bool
	Err() error
}

// ForEach calls fn for each of rows, in order, and returns the first error
// of fn or of the rows. The caller closes rows.
func ForEach(rows Rows, fn Each) error {
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// NullText is what a driver binds for a text column that may be NULL: NULL
// for "", so that the schema's partial unique indexes (one live hold per
// instrument, one reservation per idempotency key) ignore it.
func NullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
