// Package storetest is the conformance suite of the record
// (flashsale.Store): one set of tests that every implementation (package
// sqlite, package postgres) runs, so that the engines cannot drift apart.
//
// The suite asserts behaviour through the flashsale.Store interface only:
// the documented results and errors of every method, and the properties the
// funnel relies on under real concurrency (one live hold per shopper, each
// restock exactly once, a rebuild that misses no hold). Engine-specific
// checks (constraints refusing raw SQL, migrations) live beside each engine.
//
// Overselling: this suite checks the record's half, that every engine
// decides once which hold is over; the gate (packages memory and redis) is
// where stock is counted.
package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// t0 is the suite's "now". Every time the suite writes is whole
// microseconds, which both engines store exactly.
var t0 = time.Date(2030, 3, 1, 10, 0, 0, 0, time.UTC)

// Faults are the ways an engine's test can make the record fail from
// inside a transaction, so that the suite can show that nothing of the
// transaction lands. A nil field skips the tests that need it.
type Faults struct {
	// BreakOutbox makes every later insert into s's outbox of an event of
	// type typ fail inside its transaction (a trigger, say), so that the
	// change writing it must roll back.
	BreakOutbox func(t *testing.T, s flashsale.Store, typ flashsale.EventType)
}

// Exercise runs the conformance suite. newStore returns a new, empty,
// migrated store for one test (it is called once per subtest, possibly from
// parallel subtests); Exercise closes the store when that test ends, and
// newStore may register its own cleanup (dropping a schema, say) with
// t.Cleanup, which runs after the close. faults, at most one, are the
// engine's ways to fail inside a transaction.
func Exercise(t *testing.T, newStore func(t *testing.T) flashsale.Store, faults ...Faults) {
	var f Faults
	if len(faults) > 0 {
		f = faults[0]
	}
	tests := []struct {
		name string
		fn   func(*env)
	}{
		{"Ping", testPing},

		{"Sale/CreateAndRead", testSaleCreateAndRead},
		{"Sale/CreateDefaults", testSaleCreateDefaults},
		{"Sale/DuplicateID", testSaleDuplicateID},
		{"Sale/ExistsWhileActive", testSaleExistsWhileActive},
		{"Sale/ExistsUntilClosesAt", testSaleExistsUntilClosesAt},
		{"Sale/BySKU", testSaleBySKU},
		{"Sale/NewestFirst", testSalesNewestFirst},
		{"Sale/Update", testUpdateSale},
		{"Sale/UpdateVersionConflict", testUpdateSaleVersionConflict},
		{"Sale/SetState", testSetSaleState},
		{"Sale/BeginRebuild", testBeginRebuild},
		{"Sale/SpentAdmissions", testSpentAdmissions},
		{"Sale/Totals", testSaleTotals},
		{"Sale/Draw", testDraw},

		{"Reservation/CreateAndRead", testReservationCreateAndRead},
		{"Reservation/DuplicateLiveHold", testReservationDuplicateLiveHold},
		{"Reservation/DuplicateInstrument", testReservationDuplicateInstrument},
		{"Reservation/IdempotencyKey", testReservationIdempotencyKey},
		{"Reservation/StaleEpoch", testReservationStaleEpoch},
		{"Reservation/Confirm", testConfirm},
		{"Reservation/ConfirmExpired", testConfirmExpired},
		{"Reservation/ConfirmRefused", testConfirmRefused},
		{"Reservation/Cancel", testCancel},
		{"Reservation/CancelRefused", testCancelRefused},
		{"Reservation/ExpireDue", testExpireDue},
		{"Reservation/ExpireDueLimit", testExpireDueLimit},
		{"Reservation/Void", testVoid},
		{"Reservation/VoidThenRetryUnderKey", testVoidThenRetryUnderKey},
		{"Reservation/States", testReservationStates},
		{"Reservation/Attempts", testAttempts},

		{"Order/OldestFirst", testOrdersOldestFirst},
		{"Order/Ship", testShipOrder},
		{"Order/Cancel", testCancelOrder},
		{"Order/Refund", testRefundOrder},
		{"Order/History", testOrderHistory},
		{"Order/ConflictChangesNothing", testOrderConflictChangesNothing},
		{"Order/ChangeIsAtomic", testOrderChangeAtomic},

		{"Events/OfHolds", testEventsOfHolds},
		{"Events/OfOrders", testEventsOfOrders},
		{"Events/WithAHold", testEventsWithAHold},
		{"Events/OfSales", testEventsOfSales},
		{"Events/Append", testAppendEvents},
		{"Events/RollBackWithTheChange", testEventsRollBackWithTheChange},

		{"Invite/IssueAndRedeem", testInviteIssueAndRedeem},
		{"Invite/OnePerAccount", testInviteOnePerAccount},
		{"Invite/Counts", testInviteCounts},
		{"Concurrent/RedeemOnce", testConcurrentRedeem},

		{"Outbox/ClaimOrderAndLimit", testClaimOrderAndLimit},
		{"Outbox/LeaseAndFencing", testClaimLeaseAndFencing},
		{"Outbox/RetryBuryReplay", testRetryBuryReplay},
		{"Outbox/BuryAbandoned", testBuryAbandoned},
		{"Outbox/StatsAndPurge", testOutboxStatsAndPurge},
		{"Outbox/ConcurrentClaims", testConcurrentClaims},

		{"Concurrent/SameUserHolds", testConcurrentSameUser},
		{"Concurrent/ExpireDue", testConcurrentExpireDue},
		{"Concurrent/ConfirmOrCancel", testConcurrentConfirmCancel},
		{"Concurrent/RestockOnce", testConcurrentRestockOnce},
		{"Concurrent/RebuildDuringReserves", testConcurrentRebuild},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			t.Cleanup(func() {
				if err := store.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(&env{t: t, ctx: t.Context(), store: store, faults: f})
		})
	}
}

// env is one test's store and the helpers that build its fixtures.
type env struct {
	t      *testing.T
	ctx    context.Context
	store  flashsale.Store
	faults Faults
}

// newSale returns an open FIFO sale of a SKU of its own, not yet created.
func newSale() *flashsale.Sale {
	return &flashsale.Sale{
		ID:           flashsale.NewID("sale_"),
		SKU:          "sku-" + flashsale.NewID(""),
		Name:         "Conformance sale",
		InitialStock: 1000,
		OpensAt:      t0,
		HoldSeconds:  600,
		PerUserLimit: 1,
		Fairness:     flashsale.FairnessFIFO,
		Shards:       1,
		State:        flashsale.SaleOpen,
		Epoch:        1,
		Version:      1,
		CreatedAt:    t0.Add(-time.Hour),
		UpdatedAt:    t0.Add(-time.Hour),
	}
}

// sale creates newSale as changed by mods, failing the test if it cannot.
func (e *env) sale(mods ...func(*flashsale.Sale)) *flashsale.Sale {
	e.t.Helper()
	s := newSale()
	for _, m := range mods {
		m(s)
	}
	if err := e.store.CreateSale(e.ctx, s); err != nil {
		e.t.Fatalf("CreateSale: %v", err)
	}
	return s
}

// newHold returns a one-unit hold of user on s, taken at t0 and ending ten
// minutes later, not yet created.
func newHold(s *flashsale.Sale, user string) *flashsale.Reservation {
	return &flashsale.Reservation{
		ID:        flashsale.NewID("res_"),
		SaleID:    s.ID,
		UserID:    user,
		Quantity:  1,
		Epoch:     s.Epoch,
		CreatedAt: t0,
		ExpiresAt: t0.Add(10 * time.Minute),
	}
}

// hold creates newHold as changed by mods, failing the test if it cannot.
func (e *env) hold(s *flashsale.Sale, user string, mods ...func(*flashsale.Reservation)) *flashsale.Reservation {
	e.t.Helper()
	r := newHold(s, user)
	for _, m := range mods {
		m(r)
	}
	if err := e.store.CreateReservation(e.ctx, r); err != nil {
		e.t.Fatalf("CreateReservation(%s of %s): %v", r.ID, user, err)
	}
	return r
}

// reservation reads the reservation, failing the test if it cannot.
func (e *env) reservation(id string) *flashsale.Reservation {
	e.t.Helper()
	r, err := e.store.Reservation(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Reservation(%s): %v", id, err)
	}
	return r
}

// confirm confirms the hold at now, failing the test if it cannot.
func (e *env) confirm(r *flashsale.Reservation, now time.Time) (*flashsale.Reservation, *flashsale.Order) {
	e.t.Helper()
	res, ord, err := e.store.ConfirmReservation(e.ctx, r.ID, r.UserID, "pay-"+r.ID, now)
	if err != nil {
		e.t.Fatalf("ConfirmReservation(%s): %v", r.ID, err)
	}
	return res, ord
}

// cancel cancels the hold at now, failing the test unless it restocked.
func (e *env) cancel(r *flashsale.Reservation, now time.Time) *flashsale.Reservation {
	e.t.Helper()
	res, restocked, err := e.store.CancelReservation(e.ctx, r.ID, r.UserID, now)
	if err != nil || !restocked {
		e.t.Fatalf("CancelReservation(%s) = restocked %v, %v; want true, nil", r.ID, restocked, err)
	}
	return res
}

// norm returns v with its time.Time fields in UTC, so that reflect.DeepEqual
// compares instants.
func norm[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if tm, ok := rv.Field(i).Interface().(time.Time); ok {
			rv.Field(i).Set(reflect.ValueOf(tm.UTC()))
		}
	}
	return v
}

// same reports a difference between got and want.
func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

// wantIs fails unless errors.Is(err, target).
func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want %v", what, err, target)
	}
}

// wantCode fails unless err carries the contract code.
func wantCode(t *testing.T, what string, err error, code flashsale.Code) {
	t.Helper()
	if err == nil || flashsale.ErrorCode(err) != code {
		t.Errorf("%s: error %v (code %q), want code %q", what, err, flashsale.ErrorCode(err), code)
	}
}

// ok fails the test now if err is not nil.
func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testPing(e *env) {
	ok(e.t, "Ping", e.store.Ping(e.ctx))
}

// totalsOf reads the sale's totals, and checks that PendingUnits agrees
// with their Pending.
func totalsOf(e *env, saleID string) (flashsale.SaleTotals, error) {
	e.t.Helper()
	totals, err := e.store.SaleTotals(e.ctx, saleID)
	if err != nil {
		return totals, err
	}
	pending, err := e.store.PendingUnits(e.ctx, saleID)
	if err != nil {
		return totals, err
	}
	if pending != totals.Pending {
		e.t.Errorf("PendingUnits = %d, but SaleTotals' Pending is %d", pending, totals.Pending)
	}
	return totals, nil
}
