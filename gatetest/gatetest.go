// Package gatetest is the conformance suite of the stock gate: one set of
// tests that every flashsale.GateAdmin implementation runs (package memory,
// package redis), so that the backends cannot drift apart. It is the
// executable form of the contract written on flashsale.Gate,
// flashsale.GateAdmin and restock.Gate, check order and all.
//
// An implementation's tests call Exercise with a Harness:
//
//	func TestGate(t *testing.T) {
//		gatetest.Exercise(t, gatetest.Harness{New: ..., Tamper: ...})
//	}
//
// Overselling is prevented in the gates this suite runs on (packages memory
// and redis): it checks that they do, under concurrent reserves, and that a
// restock or void gives back once.
package gatetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/restock"
)

// Harness is how the suite makes and tampers with gates of one
// implementation.
type Harness struct {
	// New returns a fresh gate whose clock is now: the suite's Clock, which
	// dates the audit entries of everything but reserves (a reserve is
	// dated by its request's Now, which the suite also takes from the
	// Clock). Gates it returns must not share sales with one another (each
	// subtest also uses sale ids of its own). The gate must also give
	// units back (restock.Gate), which the suite exercises. Required.
	New func(t *testing.T, now func() time.Time) flashsale.GateAdmin
	// Tamper adds delta to the sale's counter behind the gate's back, the
	// way a second writer would (a raw INCRBY, a stray adjustment), so the
	// suite can see the bookkeeping notice. Required.
	Tamper func(t *testing.T, g flashsale.GateAdmin, saleID string, delta int64)
}

// Clock is a settable clock for the gate's audit log and the requests'
// Now. Its times are whole milliseconds, the resolution every gate keeps.
// Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.UnixMilli(1_900_000_000_000).UTC()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward, rounded to the millisecond.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d).Round(time.Millisecond)
}

// Exercise runs the whole suite against the gates h makes. Subtests run in
// parallel, each with a gate and a sale of its own.
func Exercise(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Tamper == nil {
		t.Fatal("gatetest: Harness.New and Harness.Tamper are required")
	}
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *fixture)
	}{
		{"NotLoaded", testNotLoaded},
		{"Win", testWin},
		{"Quantity", testQuantity},
		{"MalformedRequests", testMalformed},
		{"DuplicateReservationID", testDuplicateReservationID},
		{"Replay", testReplay},
		{"OrderNotLoadedFirst", testOrderNotLoadedFirst},
		{"OrderReplayBeforePause", testOrderReplayBeforePause},
		{"OrderReplayBeforeEpochAndSoldOut", testOrderReplayBeforeEpochAndSoldOut},
		{"OrderPausedBeforeEpoch", testOrderPausedBeforeEpoch},
		{"OrderEpochBeforeAdmission", testOrderEpochBeforeAdmission},
		{"OrderAdmissionBeforeSoldOut", testOrderAdmissionBeforeSoldOut},
		{"OrderSoldOutBeforeLimit", testOrderSoldOutBeforeLimit},
		{"Limits", testLimits},
		{"AdmissionSpendLasts", testAdmissionLasts},
		{"SoldOutWritesNothing", testSoldOutWritesNothing},
		{"LimitWritesNothing", testLimitWritesNothing},
		{"HoldCarriesAdmission", testHoldCarriesAdmission},
		{"Restock", testRestock},
		{"RestockKeepsAdmissionSpent", testRestockKeepsAdmissionSpent},
		{"RestockKeepsNewerHolder", testRestockKeepsNewerHolder},
		{"Void", testVoid},
		{"VoidGivesBackAdmission", testVoidGivesBackAdmission},
		{"VoidAfterRestock", testVoidAfterRestock},
		{"Load", testLoad},
		{"PauseBeforeLoad", testPauseBeforeLoad},
		{"Pause", testPause},
		{"Rebuild", testRebuild},
		{"RebuildKeepsAdmissionIDs", testRebuildKeepsAdmissionIDs},
		{"RebuildHandsOutNoTurn", testRebuildHandsOutNoTurn},
		{"RebuildNotLoaded", testRebuildNotLoaded},
		{"RebuildRefusesBadHolds", testRebuildRefuses},
		{"RebuildLarge", testRebuildLarge},
		{"Tamper", testTamper},
		{"TamperEitherWay", testTamperEitherWay},
		{"OrderFull", testOrderFull},
		{"Audit", testAudit},
		{"Drop", testDrop},
		{"SalesAreSeparate", testSalesSeparate},
		{"Ping", testPing},
		{"ConcurrentCrowd", testConcurrentCrowd},
		{"ConcurrentOneUser", testConcurrentOneUser},
		{"ConcurrentSameRequest", testConcurrentSameRequest},
		{"ConcurrentRestock", testConcurrentRestock},
		{"ConcurrentChurn", testConcurrentChurn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newFixture(t, h))
		})
	}
}

// fixture is one subtest's gate, clock and sale.
type fixture struct {
	t      *testing.T
	h      Harness
	ctx    context.Context
	g      restock.Gate
	clock  *Clock
	sale   string
	serial atomic.Int64
}

func newFixture(t *testing.T, h Harness) *fixture {
	clock := NewClock()
	g, ok := h.New(t, clock.Now).(restock.Gate)
	if !ok {
		t.Fatal("gatetest: the gate does not give units back: it is no restock.Gate")
	}
	return &fixture{t: t, h: h, ctx: t.Context(), g: g, clock: clock, sale: flashsale.NewID("sale_")}
}

const epoch = 1

// load loads the fixture's sale with initial units at epoch 1.
func (f *fixture) load(initial int64) {
	f.t.Helper()
	ok, err := f.g.Load(f.ctx, f.sale, initial, epoch, "test")
	if err != nil || !ok {
		f.t.Fatalf("Load(%d) = %v, %v; want true, nil", initial, ok, err)
	}
}

// req returns a one-unit request from the user with a reservation id, key
// and admission of its own.
func (f *fixture) req(user string) flashsale.GateReserve {
	n := f.serial.Add(1)
	now := f.clock.Now()
	return flashsale.GateReserve{
		SaleID:         f.sale,
		ReservationID:  fmt.Sprintf("res-%d", n),
		UserID:         user,
		Quantity:       1,
		AdmissionID:    fmt.Sprintf("adm-%d", n),
		Epoch:          epoch,
		IdempotencyKey: fmt.Sprintf("key-%d", n),
		RequestHash:    fmt.Sprintf("hash-%d", n),
		Now:            now,
	}
}

// again returns r as the shopper's retry: the same key and request, a new
// reservation id as the server would mint, the clock's time.
func (f *fixture) again(r flashsale.GateReserve) flashsale.GateReserve {
	r.ReservationID = fmt.Sprintf("res-%d", f.serial.Add(1))
	r.Now = f.clock.Now()
	return r
}

func (f *fixture) reserve(r flashsale.GateReserve) flashsale.GateOutcome {
	f.t.Helper()
	out, err := f.g.Reserve(f.ctx, r)
	if err != nil {
		f.t.Fatalf("Reserve(user %s, key %s): %v", r.UserID, r.IdempotencyKey, err)
	}
	return out
}

// expect reserves r and fails unless the verdict is want.
func (f *fixture) expect(r flashsale.GateReserve, want flashsale.Verdict) flashsale.GateOutcome {
	f.t.Helper()
	out := f.reserve(r)
	if out.Verdict != want {
		f.t.Fatalf("Reserve(user %s, key %s) = %v; want %v", r.UserID, r.IdempotencyKey, out.Verdict, want)
	}
	return out
}

// win reserves r and fails unless it won.
func (f *fixture) win(r flashsale.GateReserve) flashsale.Hold {
	f.t.Helper()
	return f.expect(r, flashsale.VerdictWon).Hold
}

func (f *fixture) snapshot() flashsale.GateSnapshot {
	f.t.Helper()
	s, err := f.g.Snapshot(f.ctx, f.sale)
	if err != nil {
		f.t.Fatalf("Snapshot: %v", err)
	}
	return s
}

func (f *fixture) audit() []flashsale.AuditEntry {
	f.t.Helper()
	a, err := f.g.Audit(f.ctx, f.sale, 1_000_000)
	if err != nil {
		f.t.Fatalf("Audit: %v", err)
	}
	return a
}

func (f *fixture) lastAudit() flashsale.AuditEntry {
	f.t.Helper()
	a := f.audit()
	if len(a) == 0 {
		f.t.Fatal("audit log is empty")
	}
	return a[len(a)-1]
}

func (f *fixture) holds() []flashsale.Hold {
	f.t.Helper()
	hs, err := f.g.Holds(f.ctx, f.sale)
	if err != nil {
		f.t.Fatalf("Holds: %v", err)
	}
	slices.SortFunc(hs, func(a, b flashsale.Hold) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	return hs
}

func (f *fixture) restock(resID string) bool {
	f.t.Helper()
	moved, err := f.g.Restock(f.ctx, f.sale, resID, "test-sweeper")
	if err != nil {
		f.t.Fatalf("Restock(%s): %v", resID, err)
	}
	return moved
}

func (f *fixture) void(h flashsale.Hold) bool {
	f.t.Helper()
	moved, err := f.g.Void(f.ctx, f.sale, h, "test-void")
	if err != nil {
		f.t.Fatalf("Void(%s): %v", h.ReservationID, err)
	}
	return moved
}

func (f *fixture) lookup(user, key string) (flashsale.Hold, bool) {
	f.t.Helper()
	h, found, err := f.g.Lookup(f.ctx, f.sale, user, key)
	if err != nil {
		f.t.Fatalf("Lookup(%s, %s): %v", user, key, err)
	}
	return h, found
}

func (f *fixture) setPaused(paused bool) {
	f.t.Helper()
	if err := f.g.SetPaused(f.ctx, f.sale, paused, "test-operator"); err != nil {
		f.t.Fatalf("SetPaused(%v): %v", paused, err)
	}
}

// wantSnapshot fails unless the snapshot's numbers are want's (Loaded is
// implied by want).
func (f *fixture) wantSnapshot(want flashsale.GateSnapshot) {
	f.t.Helper()
	if got := f.snapshot(); got != want {
		f.t.Fatalf("Snapshot =\n\t%+v\nwant\n\t%+v", got, want)
	}
}

// holdOf is the hold a win of r must record.
func holdOf(r flashsale.GateReserve) flashsale.Hold {
	return flashsale.Hold{
		ReservationID:  r.ReservationID,
		UserID:         r.UserID,
		Quantity:       r.Quantity,
		Instrument:     r.Instrument,
		IdempotencyKey: r.IdempotencyKey,
		RequestHash:    r.RequestHash,
		AdmissionID:    r.AdmissionID,
		CreatedAt:      r.Now,
	}
}

// sameHold compares holds field by field; times by instant, since a store
// may hand them back in another location.
func sameHold(a, b flashsale.Hold) bool {
	at, bt := a.CreatedAt, b.CreatedAt
	a.CreatedAt, b.CreatedAt = time.Time{}, time.Time{}
	return a == b && at.Equal(bt)
}

func (f *fixture) wantHold(what string, got, want flashsale.Hold) {
	f.t.Helper()
	if !sameHold(got, want) {
		f.t.Fatalf("%s =\n\t%+v\nwant\n\t%+v", what, got, want)
	}
}

func (f *fixture) wantHolds(want ...flashsale.Hold) {
	f.t.Helper()
	got := f.holds()
	slices.SortFunc(want, func(a, b flashsale.Hold) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	if len(got) != len(want) {
		f.t.Fatalf("Holds = %d holds %+v; want %d %+v", len(got), got, len(want), want)
	}
	for i := range got {
		f.wantHold("Holds()["+fmt.Sprint(i)+"]", got[i], want[i])
	}
}

// wantAudit fails unless e has the op, source, delta, counter and
// reservation id given.
func (f *fixture) wantAudit(e flashsale.AuditEntry, op, source string, delta, counter int64, resID string) {
	f.t.Helper()
	if e.Op != op || e.Source != source || e.Delta != delta || e.Counter != counter || e.ReservationID != resID {
		f.t.Fatalf("audit entry %+v; want op %q source %q delta %d counter %d reservation %q", e, op, source, delta, counter, resID)
	}
	if !e.At.Equal(f.clock.Now()) {
		f.t.Fatalf("audit entry at %v; want the clock's time, %v", e.At, f.clock.Now())
	}
}

func testNotLoaded(t *testing.T, f *fixture) {
	check := func(stage string) {
		t.Helper()
		out := f.expect(f.req("u1"), flashsale.VerdictNotLoaded)
		if out.Remaining != 0 || out.Epoch != 0 {
			t.Fatalf("%s: not-loaded outcome %+v carries numbers", stage, out)
		}
		if _, err := f.g.Restock(f.ctx, f.sale, "res-x", "test"); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Fatalf("%s: Restock = %v; want ErrNotLoaded", stage, err)
		}
		if _, err := f.g.Void(f.ctx, f.sale, flashsale.Hold{ReservationID: "res-x", UserID: "u1", IdempotencyKey: "k"}, "test"); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Fatalf("%s: Void = %v; want ErrNotLoaded", stage, err)
		}
		if _, found := f.lookup("u1", "key-1"); found {
			t.Fatalf("%s: Lookup found a key", stage)
		}
		f.wantSnapshot(flashsale.GateSnapshot{})
	}
	check("never loaded")
	// A pause alone does not load the sale.
	f.setPaused(true)
	check("paused, not loaded")
	if hs := f.holds(); len(hs) != 0 {
		t.Fatalf("Holds = %v; want none", hs)
	}
}

func testWin(t *testing.T, f *fixture) {
	f.load(10)
	f.clock.Advance(time.Second)
	r := f.req("u1")
	r.Instrument = "card-1"
	out := f.expect(r, flashsale.VerdictWon)
	if out.Remaining != 9 || out.Epoch != epoch {
		t.Fatalf("won outcome Remaining %d Epoch %d; want 9, %d", out.Remaining, out.Epoch, epoch)
	}
	f.wantHold("won hold", out.Hold, holdOf(r))
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 10, Counter: 9, Won: 1, AuditedCounter: 9})
	f.wantHolds(holdOf(r))
	got, found := f.lookup(r.UserID, r.IdempotencyKey)
	if !found {
		t.Fatal("Lookup after a win found nothing")
	}
	f.wantHold("Lookup", got, holdOf(r))
	if _, found := f.lookup(r.UserID, "other-key"); found {
		t.Fatal("Lookup found a key never used")
	}
	if _, found := f.lookup("u2", r.IdempotencyKey); found {
		t.Fatal("Lookup found another shopper's key")
	}
	f.wantAudit(f.lastAudit(), "reserve", "reserve", -1, 9, r.ReservationID)
}

func testQuantity(t *testing.T, f *fixture) {
	f.load(5)
	r := f.req("u1")
	r.Quantity = 3
	if out := f.expect(r, flashsale.VerdictWon); out.Remaining != 2 || out.Hold.Quantity != 3 {
		t.Fatalf("won %+v; want 3 units held and 2 left", out)
	}
	big := f.req("u2")
	big.Quantity = 3
	if out := f.expect(big, flashsale.VerdictSoldOut); out.Remaining != 2 {
		t.Fatalf("sold out with %d left; want 2", out.Remaining)
	}
	exact := f.req("u3")
	exact.Quantity = 2
	if out := f.expect(exact, flashsale.VerdictWon); out.Remaining != 0 {
		t.Fatalf("won with %d left; want 0", out.Remaining)
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 5, Counter: 0, Won: 5, AuditedCounter: 0})
	f.wantAudit(f.lastAudit(), "reserve", "reserve", -2, 0, exact.ReservationID)
	if !f.restock(r.ReservationID) {
		t.Fatal("restock of the 3-unit hold moved nothing")
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 5, Counter: 3, Won: 5, Restocked: 3, AuditedCounter: 3})
}

func testMalformed(t *testing.T, f *fixture) {
	f.load(5)
	before, beforeAudit := f.snapshot(), len(f.audit())
	for name, change := range map[string]func(*flashsale.GateReserve){
		"zero quantity":          func(r *flashsale.GateReserve) { r.Quantity = 0 },
		"negative quantity":      func(r *flashsale.GateReserve) { r.Quantity = -1 },
		"no sale":                func(r *flashsale.GateReserve) { r.SaleID = "" },
		"no reservation":         func(r *flashsale.GateReserve) { r.ReservationID = "" },
		"no user":                func(r *flashsale.GateReserve) { r.UserID = "" },
		"no key":                 func(r *flashsale.GateReserve) { r.IdempotencyKey = "" },
		"separator in user":      func(r *flashsale.GateReserve) { r.UserID = "u\x1f1" },
		"separator in key":       func(r *flashsale.GateReserve) { r.IdempotencyKey = "k\x1f" },
		"separator in instr":     func(r *flashsale.GateReserve) { r.Instrument = "\x1fcard" },
		"separator in admission": func(r *flashsale.GateReserve) { r.AdmissionID = "a\x1fb" },
		"separator in res id":    func(r *flashsale.GateReserve) { r.ReservationID = "res\x1f" },
		"separator in hash":      func(r *flashsale.GateReserve) { r.RequestHash = "h\x1fh" },
	} {
		r := f.req("u1")
		change(&r)
		if out, err := f.g.Reserve(f.ctx, r); err == nil {
			t.Errorf("%s: Reserve = %v, nil; want an error", name, out.Verdict)
		}
	}
	if got := f.snapshot(); got != before {
		t.Fatalf("malformed requests changed the gate: %+v, was %+v", got, before)
	}
	if n := len(f.audit()); n != beforeAudit {
		t.Fatalf("malformed requests wrote %d audit entries", n-beforeAudit)
	}
	// The first, valid attempt of u1 still wins: nothing was half-done.
	f.win(f.req("u1"))
}

func testDuplicateReservationID(t *testing.T, f *fixture) {
	f.load(5)
	first := f.req("u1")
	f.win(first)
	dup := f.req("u2")
	dup.ReservationID = first.ReservationID
	if out, err := f.g.Reserve(f.ctx, dup); err == nil {
		t.Fatalf("a second win under reservation id %s = %v, nil; want an error", dup.ReservationID, out.Verdict)
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 5, Counter: 4, Won: 1, AuditedCounter: 4})
	f.wantHolds(holdOf(first))
}

func testReplay(t *testing.T, f *fixture) {
	f.load(5)
	r := f.req("u1")
	won := f.win(r)
	snap, n := f.snapshot(), len(f.audit())

	f.clock.Advance(time.Minute)
	out := f.expect(f.again(r), flashsale.VerdictReplayed)
	f.wantHold("replayed hold", out.Hold, won)
	if out.Remaining != 4 || out.Epoch != epoch {
		t.Fatalf("replay Remaining %d Epoch %d; want 4, %d", out.Remaining, out.Epoch, epoch)
	}
	other := f.again(r)
	other.RequestHash = "another request"
	if out := f.expect(other, flashsale.VerdictKeyReused); out.Remaining != 4 || out.Epoch != epoch {
		t.Fatalf("key reuse Remaining %d Epoch %d; want 4, %d", out.Remaining, out.Epoch, epoch)
	}
	// The same key from another shopper is another key.
	stranger := f.again(r)
	stranger.UserID = "u2"
	stranger.AdmissionID = "adm-stranger"
	f.win(stranger)
	if got := f.snapshot(); got.Counter != snap.Counter-1 || got.Won != snap.Won+1 {
		t.Fatalf("after replays and one more win: %+v; want one more unit won than %+v", got, snap)
	}
	if got := len(f.audit()); got != n+1 {
		t.Fatalf("replays wrote %d audit entries; want only the stranger's win", got-n-1)
	}
}

func testOrderNotLoadedFirst(t *testing.T, f *fixture) {
	f.load(5)
	r := f.req("u1")
	f.win(r)
	if err := f.g.Drop(f.ctx, f.sale); err != nil {
		t.Fatal(err)
	}
	// Not loaded comes before the replay check.
	f.expect(f.again(r), flashsale.VerdictNotLoaded)
}

func testOrderReplayBeforePause(t *testing.T, f *fixture) {
	f.load(5)
	r := f.req("u1")
	won := f.win(r)
	f.setPaused(true)
	out := f.expect(f.again(r), flashsale.VerdictReplayed)
	f.wantHold("replay while paused", out.Hold, won)
	reused := f.again(r)
	reused.RequestHash = "changed"
	f.expect(reused, flashsale.VerdictKeyReused)
	f.expect(f.req("u2"), flashsale.VerdictPaused)
}

func testOrderReplayBeforeEpochAndSoldOut(t *testing.T, f *fixture) {
	f.load(1)
	r := f.req("u1")
	won := f.win(r)
	// The gate is sold out and the retry carries another epoch: the
	// replay still answers first.
	retry := f.again(r)
	retry.Epoch = epoch + 7
	out := f.expect(retry, flashsale.VerdictReplayed)
	f.wantHold("replay at a sold-out gate", out.Hold, won)
	if out.Remaining != 0 {
		t.Fatalf("replay Remaining %d; want 0", out.Remaining)
	}
}

func testOrderPausedBeforeEpoch(t *testing.T, f *fixture) {
	f.load(5)
	f.setPaused(true)
	r := f.req("u1")
	r.Epoch = epoch + 1
	if out := f.expect(r, flashsale.VerdictPaused); out.Remaining != 5 || out.Epoch != epoch {
		t.Fatalf("paused outcome %+v; want 5 left at epoch %d", out, epoch)
	}
	f.setPaused(false)
	if out := f.expect(r, flashsale.VerdictStaleEpoch); out.Remaining != 5 || out.Epoch != epoch {
		t.Fatalf("stale outcome %+v; want 5 left at epoch %d", out, epoch)
	}
}

func testOrderEpochBeforeAdmission(t *testing.T, f *fixture) {
	f.load(5)
	first := f.req("u1")
	f.win(first)
	r := f.req("u2")
	r.AdmissionID = first.AdmissionID
	r.Epoch = epoch + 1
	f.expect(r, flashsale.VerdictStaleEpoch)
	r.Epoch = epoch
	f.expect(r, flashsale.VerdictAdmissionUsed)
}

func testOrderAdmissionBeforeSoldOut(t *testing.T, f *fixture) {
	f.load(1)
	first := f.req("u1")
	f.win(first)
	// A spent admission at a sold-out gate is "admission used", not
	// "sold out": the token, not the stock, is the first thing wrong.
	r := f.req("u2")
	r.AdmissionID = first.AdmissionID
	if out := f.expect(r, flashsale.VerdictAdmissionUsed); out.Remaining != 0 {
		t.Fatalf("admission used Remaining %d; want 0", out.Remaining)
	}
	// The winner's own second attempt with the spent token too, before
	// the per-user limit.
	mine := f.req("u1")
	mine.AdmissionID = first.AdmissionID
	f.expect(mine, flashsale.VerdictAdmissionUsed)
}

func testOrderSoldOutBeforeLimit(t *testing.T, f *fixture) {
	f.load(1)
	f.win(f.req("u1"))
	if out := f.expect(f.req("u1"), flashsale.VerdictSoldOut); out.Remaining != 0 || out.Epoch != epoch {
		t.Fatalf("sold out outcome %+v; want 0 left at epoch %d", out, epoch)
	}
}

func testLimits(t *testing.T, f *fixture) {
	f.load(10)
	a := f.req("u1")
	a.Instrument = "card-1"
	f.win(a)
	if out := f.expect(f.req("u1"), flashsale.VerdictLimitReached); out.Remaining != 9 {
		t.Fatalf("limit outcome Remaining %d; want 9", out.Remaining)
	}
	b := f.req("u2")
	b.Instrument = "card-1"
	f.expect(b, flashsale.VerdictLimitReached)
	// No instrument is not an instrument: shoppers without one do not
	// limit each other.
	f.win(f.req("u3"))
	f.win(f.req("u4"))
	b.Instrument = "card-2"
	f.win(b)
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 10, Counter: 6, Won: 4, AuditedCounter: 6})
}

// testAdmissionLasts: a spend outlives the admission token. The waiting
// room hands an admitted place the same admission id on every poll, an
// expired token's replacement too, so a gate that forgot the spend when
// the token expired would give the place a second turn.
func testAdmissionLasts(t *testing.T, f *fixture) {
	f.load(5)
	first := f.req("u1")
	won := f.win(first)
	r := f.req("u2")
	r.AdmissionID = first.AdmissionID
	for _, d := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour} {
		f.clock.Advance(d)
		f.expect(f.again(r), flashsale.VerdictAdmissionUsed)
	}
	// Nor does its hold's end give the turn back.
	f.restock(won.ReservationID)
	f.clock.Advance(24 * time.Hour)
	f.expect(f.again(r), flashsale.VerdictAdmissionUsed)
}

func testSoldOutWritesNothing(t *testing.T, f *fixture) {
	f.load(1)
	first := f.win(f.req("u1"))
	snap, audit := f.snapshot(), f.audit()
	var rejected []flashsale.GateReserve
	for i := range 100 {
		r := f.req(fmt.Sprintf("loser-%d", i))
		r.AdmissionID = "adm-shared"
		r.Instrument = fmt.Sprintf("card-%d", i)
		if out := f.expect(r, flashsale.VerdictSoldOut); out.Remaining != 0 || out.Epoch != epoch {
			t.Fatalf("sold out outcome %+v", out)
		}
		rejected = append(rejected, r)
	}
	if got := f.snapshot(); got != snap {
		t.Fatalf("sold-out rejections changed the snapshot: %+v, was %+v", got, snap)
	}
	if got := f.audit(); len(got) != len(audit) || got[len(got)-1] != audit[len(audit)-1] {
		t.Fatalf("sold-out rejections wrote to the audit log: %d entries, was %d", len(got), len(audit))
	}
	f.wantHolds(first)
	if _, found := f.lookup(rejected[0].UserID, rejected[0].IdempotencyKey); found {
		t.Fatal("a sold-out rejection recorded its idempotency key")
	}
	// Nothing was spent or remembered: once a unit is back, a loser's
	// retry under the same key, admission and instrument wins.
	if !f.restock(first.ReservationID) {
		t.Fatal("restock moved nothing")
	}
	f.win(f.again(rejected[0]))
}

func testLimitWritesNothing(t *testing.T, f *fixture) {
	f.load(5)
	f.win(f.req("u1"))
	snap, n := f.snapshot(), len(f.audit())
	r := f.req("u1")
	r.AdmissionID = "adm-once"
	f.expect(r, flashsale.VerdictLimitReached)
	if got := f.snapshot(); got != snap {
		t.Fatalf("a limit rejection changed the snapshot: %+v, was %+v", got, snap)
	}
	if got := len(f.audit()); got != n {
		t.Fatalf("a limit rejection wrote %d audit entries", got-n)
	}
	// The admission was not spent, and the key not recorded.
	other := f.req("u2")
	other.AdmissionID = "adm-once"
	f.win(other)
	if _, found := f.lookup(r.UserID, r.IdempotencyKey); found {
		t.Fatal("a limit rejection recorded its idempotency key")
	}
}

func testRestock(t *testing.T, f *fixture) {
	f.load(3)
	r := f.req("u1")
	r.Instrument = "card-1"
	won := f.win(r)
	f.clock.Advance(time.Second)
	if !f.restock(won.ReservationID) {
		t.Fatal("first Restock = false; want true")
	}
	f.wantAudit(f.lastAudit(), "restock", "test-sweeper", 1, 3, won.ReservationID)
	want := flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 3, Counter: 3, Won: 1, Restocked: 1, AuditedCounter: 3}
	f.wantSnapshot(want)
	if f.restock(won.ReservationID) {
		t.Fatal("second Restock = true; want false: units returned twice")
	}
	if f.restock("res-never") {
		t.Fatal("Restock of an unknown hold = true")
	}
	f.wantSnapshot(want)
	f.wantHolds()
	// The key outlives the hold: the shopper's retry replays its first
	// answer rather than taking another unit.
	out := f.expect(f.again(r), flashsale.VerdictReplayed)
	f.wantHold("replay after restock", out.Hold, won)
	if _, found := f.lookup(r.UserID, r.IdempotencyKey); !found {
		t.Fatal("Lookup after restock found nothing; the key must be kept")
	}
	// The shopper and the instrument are free again; the admission is not
	// (see testRestockKeepsAdmissionSpent).
	again := f.req("u1")
	again.Instrument = "card-1"
	f.win(again)
}

// testRestockKeepsAdmissionSpent: a restock (expiry, cancel) gives back
// units, never the admission: the shopper had the hold, so the token was
// used.
func testRestockKeepsAdmissionSpent(t *testing.T, f *fixture) {
	f.load(2)
	r := f.req("u1")
	won := f.win(r)
	if !f.restock(won.ReservationID) {
		t.Fatal("restock moved nothing")
	}
	// The same shopper (free again) with a new key and the same token.
	reuse := f.req("u1")
	reuse.AdmissionID = r.AdmissionID
	f.expect(reuse, flashsale.VerdictAdmissionUsed)
	// Nor does a second restock, or one of a hold never taken, give it
	// back.
	f.restock(won.ReservationID)
	f.restock("res-never")
	f.expect(f.again(reuse), flashsale.VerdictAdmissionUsed)
	f.win(f.req("u1"))
}

func testRestockKeepsNewerHolder(t *testing.T, f *fixture) {
	// A record that lists an older hold of the shopper (and of the card)
	// before a newer one: the newer one becomes the shopper's and the
	// card's hold.
	stale := holdOf(f.req("u1"))
	stale.Instrument = "card-1"
	newer := holdOf(f.req("u1"))
	newer.Instrument = "card-1"
	if err := f.g.Rebuild(f.ctx, f.sale, 5, epoch, []flashsale.Hold{stale, newer}, nil, "test"); err != nil {
		t.Fatal(err)
	}
	f.setPaused(false)
	// Restocking the older hold must not free the shopper or the card.
	if !f.restock(stale.ReservationID) {
		t.Fatal("restock of a rebuilt hold moved nothing")
	}
	f.expect(f.req("u1"), flashsale.VerdictLimitReached)
	r := f.req("u2")
	r.Instrument = "card-1"
	f.expect(r, flashsale.VerdictLimitReached)
	if !f.restock(newer.ReservationID) {
		t.Fatal("restock of the newer hold moved nothing")
	}
	f.win(f.req("u1"))
	f.win(r)
}

func testVoid(t *testing.T, f *fixture) {
	f.load(2)
	r := f.req("u1")
	r.Instrument = "card-1"
	won := f.win(r)
	f.clock.Advance(time.Second)
	if !f.void(won) {
		t.Fatal("Void = false; want true")
	}
	f.wantAudit(f.lastAudit(), "void", "test-void", 1, 2, won.ReservationID)
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 2, Counter: 2, Won: 1, Restocked: 1, AuditedCounter: 2})
	if _, found := f.lookup(r.UserID, r.IdempotencyKey); found {
		t.Fatal("Lookup after Void found the key; Void must forget it")
	}
	if f.void(won) {
		t.Fatal("second Void = true; want false")
	}
	if f.restock(won.ReservationID) {
		t.Fatal("Restock after Void = true; units returned twice")
	}
	// The retry under the voided key is a fresh attempt, not a replay, and
	// Void gave back the admission too: the shopper's retry, same key and
	// same token, wins.
	retry := f.again(r)
	second := f.win(retry)
	if second.ReservationID == won.ReservationID {
		t.Fatal("the retry replayed the voided hold")
	}
	f.wantHold("the retry's hold", second, holdOf(retry))
	// Voiding the old hold again must not forget the key that now names
	// the new one, nor un-spend the admission the new one spent.
	if f.void(won) {
		t.Fatal("Void of the old hold moved units")
	}
	got, found := f.lookup(r.UserID, r.IdempotencyKey)
	if !found || got.ReservationID != second.ReservationID {
		t.Fatalf("Lookup = %+v, %v; want the new hold %s", got, found, second.ReservationID)
	}
	// The admission check comes before the per-user limit, so a token the
	// repeated Void wrongly gave back would read as limit_reached.
	reuse := f.req("u1")
	reuse.AdmissionID = r.AdmissionID
	f.expect(reuse, flashsale.VerdictAdmissionUsed)
}

// testVoidGivesBackAdmission: a hold the record never took must not cost
// the shopper the admission, so after a Void the same token wins again,
// under a new key too.
func testVoidGivesBackAdmission(t *testing.T, f *fixture) {
	f.load(1)
	r := f.req("u1")
	won := f.win(r)
	if won.AdmissionID != r.AdmissionID {
		t.Fatalf("won hold's AdmissionID = %q; want %q", won.AdmissionID, r.AdmissionID)
	}
	// Before the Void the token is spent.
	used := f.req("u2")
	used.AdmissionID = r.AdmissionID
	f.expect(used, flashsale.VerdictAdmissionUsed)
	if !f.void(won) {
		t.Fatal("Void moved nothing")
	}
	fresh := f.req("u1")
	fresh.AdmissionID = r.AdmissionID
	second := f.win(fresh)
	f.wantHold("the new hold", second, holdOf(fresh))
	// The new win spent the token again.
	f.expect(f.again(used), flashsale.VerdictAdmissionUsed)
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 1, Counter: 0, Won: 2, Restocked: 1, AuditedCounter: 0})
	// A hold without an admission voids as before.
	none := f.req("u3")
	none.AdmissionID = ""
	f.restock(second.ReservationID)
	if !f.void(f.win(none)) {
		t.Fatal("Void of a hold without an admission moved nothing")
	}
}

func testVoidAfterRestock(t *testing.T, f *fixture) {
	f.load(2)
	r := f.req("u1")
	won := f.win(r)
	if !f.restock(won.ReservationID) {
		t.Fatal("restock moved nothing")
	}
	n := len(f.audit())
	if f.void(won) {
		t.Fatal("Void of a restocked hold = true")
	}
	if got := len(f.audit()); got != n {
		t.Fatalf("a Void that moved nothing wrote %d audit entries", got-n)
	}
	if _, found := f.lookup(r.UserID, r.IdempotencyKey); found {
		t.Fatal("Void of a restocked hold kept its key")
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 2, Counter: 2, Won: 1, Restocked: 1, AuditedCounter: 2})
	// The restock left the admission spent; the Void gave it back, though
	// it moved no units.
	reuse := f.req("u1")
	reuse.AdmissionID = r.AdmissionID
	f.wantHold("a win with the voided hold's admission", f.win(reuse), holdOf(reuse))
}

func testLoad(t *testing.T, f *fixture) {
	f.clock.Advance(time.Second)
	f.load(7)
	f.wantAudit(f.lastAudit(), "load", "test", 7, 7, "")
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 7, Counter: 7, AuditedCounter: 7})
	r := f.req("u1")
	f.win(r)
	n := len(f.audit())
	ok, err := f.g.Load(f.ctx, f.sale, 100, epoch+1, "test")
	if err != nil || ok {
		t.Fatalf("second Load = %v, %v; want false, nil", ok, err)
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 7, Counter: 6, Won: 1, AuditedCounter: 6})
	if got := len(f.audit()); got != n {
		t.Fatalf("a Load that did nothing wrote %d audit entries", got-n)
	}
	f.expect(f.again(r), flashsale.VerdictReplayed)
}

func testPauseBeforeLoad(t *testing.T, f *fixture) {
	f.setPaused(true)
	f.load(3)
	if s := f.snapshot(); !s.Paused {
		t.Fatalf("Load dropped a pause set before it: %+v", s)
	}
	f.expect(f.req("u1"), flashsale.VerdictPaused)
	f.setPaused(false)
	f.win(f.req("u1"))
}

func testPause(t *testing.T, f *fixture) {
	f.load(3)
	f.win(f.req("u1"))
	f.clock.Advance(time.Second)
	f.setPaused(true)
	f.wantAudit(f.lastAudit(), "pause", "test-operator", 0, 2, "")
	if s := f.snapshot(); !s.Paused || s.Counter != 2 {
		t.Fatalf("after pause: %+v", s)
	}
	if out := f.expect(f.req("u2"), flashsale.VerdictPaused); out.Remaining != 2 || out.Epoch != epoch {
		t.Fatalf("paused outcome %+v", out)
	}
	f.clock.Advance(time.Second)
	f.setPaused(false)
	f.wantAudit(f.lastAudit(), "resume", "test-operator", 0, 2, "")
	f.win(f.req("u2"))
}

func testRebuild(t *testing.T, f *fixture) {
	f.load(10)
	a := f.req("ua")
	f.win(a)
	b := f.req("ub")
	f.win(b)
	f.setPaused(true)

	// The record knows a's hold (with 2 units and an instrument, as it
	// says) and a hold of c the gate lost; b's hold it never saw. It also
	// knows that f spent an admission on a hold that has ended.
	ha := holdOf(a)
	ha.Quantity, ha.Instrument = 2, "card-a"
	hc := holdOf(f.req("uc"))
	ended := flashsale.SpentAdmission{UserID: "uf", AdmissionID: "adm-of-an-ended-hold"}
	f.clock.Advance(time.Second)
	if err := f.g.Rebuild(f.ctx, f.sale, 10, epoch+1, []flashsale.Hold{ha, hc}, []flashsale.SpentAdmission{ended}, "test-operator"); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	f.wantAudit(f.lastAudit(), "rebuild", "test-operator", 7-8, 7, "")
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Paused: true, Epoch: epoch + 1, Initial: 10, Counter: 7, Won: 3, AuditedCounter: 7})
	f.wantHolds(ha, hc)

	// Rebuilt paused; resuming is a deliberate step.
	next := func(user string) flashsale.GateReserve {
		r := f.req(user)
		r.Epoch = epoch + 1
		return r
	}
	f.expect(next("ud"), flashsale.VerdictPaused)
	f.setPaused(false)

	// Old admissions are stale.
	f.expect(f.req("ud"), flashsale.VerdictStaleEpoch)
	// Keys came back with the holds.
	out := f.expect(f.again(a), flashsale.VerdictReplayed)
	f.wantHold("replay of a rebuilt key", out.Hold, ha)
	// So did buyers and instruments.
	f.expect(next("ua"), flashsale.VerdictLimitReached)
	f.expect(next("uc"), flashsale.VerdictLimitReached)
	byCard := next("ud")
	byCard.Instrument = "card-a"
	f.expect(byCard, flashsale.VerdictLimitReached)
	// b is unknown to the record: its key is forgotten and it may buy.
	retryB := f.again(b)
	retryB.Epoch = epoch + 1
	won := f.win(retryB)
	if won.ReservationID != retryB.ReservationID {
		t.Fatalf("b's retry replayed a hold the rebuild dropped: %+v", won)
	}
	// The record's spent admissions are spent: the live holds' and the
	// ended one's. b's, which the record never saw, is not.
	for _, adm := range []string{a.AdmissionID, hc.AdmissionID, ended.AdmissionID} {
		reuse := next("ue")
		reuse.AdmissionID = adm
		f.expect(reuse, flashsale.VerdictAdmissionUsed)
	}
	if won.AdmissionID != b.AdmissionID {
		t.Fatalf("b's retry won with admission %q; want its own, %q", won.AdmissionID, b.AdmissionID)
	}
	// A rebuilt hold restocks like any other.
	if !f.restock(hc.ReservationID) {
		t.Fatal("restock of a rebuilt hold moved nothing")
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch + 1, Initial: 10, Counter: 7, Won: 4, Restocked: 1, AuditedCounter: 7})
}

// testHoldCarriesAdmission: every hold the gate hands out names the
// admission it spent: the one of the request that won, whatever a replay
// carries.
func testHoldCarriesAdmission(t *testing.T, f *fixture) {
	f.load(3)
	r := f.req("u1")
	out := f.expect(r, flashsale.VerdictWon)
	if out.Hold.AdmissionID != r.AdmissionID {
		t.Fatalf("won hold's AdmissionID = %q; want %q", out.Hold.AdmissionID, r.AdmissionID)
	}
	check := func(stage string) {
		t.Helper()
		retry := f.again(r)
		retry.AdmissionID = "adm-of-the-retry"
		if got := f.expect(retry, flashsale.VerdictReplayed).Hold; got.AdmissionID != r.AdmissionID {
			t.Fatalf("%s: replayed hold's AdmissionID = %q; want %q", stage, got.AdmissionID, r.AdmissionID)
		}
		got, found := f.lookup(r.UserID, r.IdempotencyKey)
		if !found || got.AdmissionID != r.AdmissionID {
			t.Fatalf("%s: Lookup = %+v, %v; want AdmissionID %q", stage, got, found, r.AdmissionID)
		}
	}
	check("held")
	hs := f.holds()
	if len(hs) != 1 || hs[0].AdmissionID != r.AdmissionID {
		t.Fatalf("Holds = %+v; want one with AdmissionID %q", hs, r.AdmissionID)
	}
	// A win without an admission keeps none.
	none := f.req("u2")
	none.AdmissionID = ""
	if h := f.win(none); h.AdmissionID != "" {
		t.Fatalf("hold of a request without an admission has AdmissionID %q", h.AdmissionID)
	}
	f.restock(out.Hold.ReservationID)
	check("restocked")
}

// testRebuildKeepsAdmissionIDs: rebuilt holds report the admission the
// record says they spent, and that admission is spent: a live hold took its
// turn.
func testRebuildKeepsAdmissionIDs(t *testing.T, f *fixture) {
	a, b := holdOf(f.req("ua")), holdOf(f.req("ub"))
	b.AdmissionID = ""
	if err := f.g.Rebuild(f.ctx, f.sale, 5, epoch, []flashsale.Hold{a, b}, nil, "test"); err != nil {
		t.Fatal(err)
	}
	f.setPaused(false)
	f.wantHolds(a, b)
	got, found := f.lookup(a.UserID, a.IdempotencyKey)
	if !found || got.AdmissionID != a.AdmissionID {
		t.Fatalf("Lookup of a rebuilt hold = %+v, %v; want AdmissionID %q", got, found, a.AdmissionID)
	}
	replay := flashsale.GateReserve{
		SaleID: f.sale, ReservationID: "res-replay", UserID: a.UserID, Quantity: a.Quantity, Epoch: epoch,
		IdempotencyKey: a.IdempotencyKey, RequestHash: a.RequestHash, Now: f.clock.Now(),
	}
	f.wantHold("replay of a rebuilt hold", f.expect(replay, flashsale.VerdictReplayed).Hold, a)
	reuse := f.req("uc")
	reuse.AdmissionID = a.AdmissionID
	f.expect(reuse, flashsale.VerdictAdmissionUsed)
	// b spent none, so none is spent for it.
	f.win(f.req("uc"))
}

// testRebuildHandsOutNoTurn: what a shopper can do after a rebuild from the
// record is what it could do before. A shopper whose hold ended (its turn
// taken) stays refused with that admission, under the new epoch too (the
// waiting room hands the same place the same admission id again); a
// shopper who holds stays limited; a hold the record never took (voided)
// leaves its admission free. It holds for a gate that had the sale and for
// one that lost everything (a restarted process, a Redis that lost its
// keys), since the spends come from the record; and a second rebuild
// changes nothing.
func testRebuildHandsOutNoTurn(t *testing.T, f *fixture) {
	f.load(10)
	cancelled := f.req("u1")
	if !f.restock(f.win(cancelled).ReservationID) {
		t.Fatal("restock moved nothing")
	}
	holding := f.req("u2")
	holding.Instrument = "card-2"
	held := f.win(holding)
	voided := f.req("u3")
	if !f.void(f.win(voided)) {
		t.Fatal("void moved nothing")
	}
	// What the record says: u2's live hold, and the admissions of u1's
	// ended hold and u2's.
	holds := []flashsale.Hold{held}
	spent := []flashsale.SpentAdmission{
		{UserID: "u1", AdmissionID: cancelled.AdmissionID}, {UserID: "u2", AdmissionID: holding.AdmissionID}}
	check := func(stage string, e int64) {
		t.Helper()
		at := func(r flashsale.GateReserve) flashsale.GateReserve {
			r = f.again(r)
			r.Epoch = e
			r.IdempotencyKey += "-" + stage // a new attempt, not a replay
			return r
		}
		for what, r := range map[string]flashsale.GateReserve{
			"u1's ended hold's admission": at(cancelled), "u2's live hold's admission": at(holding),
		} {
			if out := f.reserve(r); out.Verdict != flashsale.VerdictAdmissionUsed {
				t.Fatalf("%s: %s: %v; want admission_used", stage, what, out.Verdict)
			}
		}
		limited := at(f.req("u2"))
		f.expect(limited, flashsale.VerdictLimitReached)
		card := at(f.req("u4"))
		card.Instrument = "card-2"
		f.expect(card, flashsale.VerdictLimitReached)
		f.wantHold(stage+": replay of the live hold", f.expect(f.again(holding), flashsale.VerdictReplayed).Hold, held)
	}
	check("before", epoch)

	f.setPaused(true)
	if err := f.g.Rebuild(f.ctx, f.sale, 10, epoch+1, holds, spent, "test"); err != nil {
		t.Fatal(err)
	}
	f.setPaused(false)
	check("after a rebuild", epoch+1)
	if err := f.g.Rebuild(f.ctx, f.sale, 10, epoch+2, holds, spent, "test"); err != nil {
		t.Fatal(err)
	}
	f.setPaused(false)
	check("after a second rebuild", epoch+2)

	// A gate that lost the sale altogether.
	if err := f.g.Drop(f.ctx, f.sale); err != nil {
		t.Fatal(err)
	}
	if err := f.g.Rebuild(f.ctx, f.sale, 10, epoch+3, holds, spent, "test"); err != nil {
		t.Fatal(err)
	}
	f.setPaused(false)
	check("after a rebuild of a lost sale", epoch+3)
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch + 3, Initial: 10, Counter: 9, Won: 1, AuditedCounter: 9})

	// The voided hold's admission was never spent: u3 wins with it.
	again := f.again(voided)
	again.Epoch = epoch + 3
	f.win(again)
}

func testRebuildNotLoaded(t *testing.T, f *fixture) {
	h := holdOf(f.req("u1"))
	h.Quantity = 2
	if err := f.g.Rebuild(f.ctx, f.sale, 5, 3, []flashsale.Hold{h}, nil, "test"); err != nil {
		t.Fatal(err)
	}
	// Nothing was loaded before, so the counter went from 0 to 3.
	f.wantAudit(f.lastAudit(), "rebuild", "test", 3, 3, "")
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Paused: true, Epoch: 3, Initial: 5, Counter: 3, Won: 2, AuditedCounter: 3})
	// A Load after a rebuild changes nothing.
	if ok, err := f.g.Load(f.ctx, f.sale, 5, 3, "test"); ok || err != nil {
		t.Fatalf("Load after Rebuild = %v, %v; want false, nil", ok, err)
	}
	// An empty record rebuilds to the full stock.
	if err := f.g.Rebuild(f.ctx, f.sale, 5, 4, nil, nil, "test"); err != nil {
		t.Fatal(err)
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Paused: true, Epoch: 4, Initial: 5, Counter: 5, AuditedCounter: 5})
	f.wantHolds()
}

func testRebuildRefuses(t *testing.T, f *fixture) {
	f.load(3)
	won := f.win(f.req("u1"))
	snap, n := f.snapshot(), len(f.audit())
	h1, h2 := holdOf(f.req("u2")), holdOf(f.req("u3"))
	h1.Quantity, h2.Quantity = 2, 2
	one := holdOf(f.req("u4"))
	dup := one
	dup.UserID = "u5"
	sep := one
	sep.UserID = "u\x1f"
	sepAdm := one
	sepAdm.AdmissionID = "adm\x1f"
	zero := one
	zero.Quantity = 0
	noUser := one
	noUser.UserID = ""
	for name, spent := range map[string][]flashsale.SpentAdmission{
		"a spent admission without a user":        {{AdmissionID: "adm-1"}},
		"a spent admission without an id":         {{UserID: "u1"}},
		"a separator in a spent admission":        {{UserID: "u1", AdmissionID: "adm\x1f"}},
		"a separator in a spent admission's user": {{UserID: "u\x1f", AdmissionID: "adm-1"}},
	} {
		if err := f.g.Rebuild(f.ctx, f.sale, 3, epoch+1, []flashsale.Hold{one}, spent, "test"); err == nil {
			t.Errorf("Rebuild with %s = nil; want an error", name)
		}
	}
	for name, holds := range map[string][]flashsale.Hold{
		"more units than initial": {h1, h2},
		"repeated reservation":    {one, dup},
		"separator":               {sep},
		"separator in admission":  {sepAdm},
		"zero quantity":           {zero},
		"no user":                 {noUser},
	} {
		if err := f.g.Rebuild(f.ctx, f.sale, 3, epoch+1, holds, nil, "test"); err == nil {
			t.Errorf("Rebuild with %s = nil; want an error", name)
		}
	}
	f.wantSnapshot(snap)
	f.wantHolds(won)
	if got := len(f.audit()); got != n {
		t.Fatalf("refused rebuilds wrote %d audit entries", got-n)
	}
	f.expect(f.req("u5"), flashsale.VerdictWon)
}

func testRebuildLarge(t *testing.T, f *fixture) {
	const n = 100_000
	f.load(10)
	holds := make([]flashsale.Hold, n)
	for i := range holds {
		holds[i] = flashsale.Hold{
			ReservationID:  fmt.Sprintf("res-big-%06d", i),
			UserID:         fmt.Sprintf("user-%06d", i),
			Quantity:       1 + i%2,
			Instrument:     fmt.Sprintf("fp-%06d", i),
			IdempotencyKey: fmt.Sprintf("key-%06d", i),
			RequestHash:    fmt.Sprintf("hash-%06d", i),
			AdmissionID:    fmt.Sprintf("adm-%06d", i),
			CreatedAt:      f.clock.Now().Add(-time.Duration(i) * time.Millisecond),
		}
	}
	const units = n/2*1 + n/2*2
	if err := f.g.Rebuild(f.ctx, f.sale, units+500, epoch+1, holds, nil, "test"); err != nil {
		t.Fatalf("Rebuild of %d holds: %v", n, err)
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Paused: true, Epoch: epoch + 1, Initial: units + 500, Counter: 500, Won: units, AuditedCounter: 500})
	got := f.holds()
	if len(got) != n {
		t.Fatalf("Holds = %d; want %d", len(got), n)
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		f.wantHold("rebuilt hold", got[i], holds[i])
	}
	f.setPaused(false)
	last := holds[n-1]
	r := flashsale.GateReserve{
		SaleID: f.sale, ReservationID: "res-new", UserID: last.UserID, Quantity: last.Quantity,
		Epoch: epoch + 1, IdempotencyKey: last.IdempotencyKey, RequestHash: last.RequestHash, Now: f.clock.Now(),
	}
	out := f.expect(r, flashsale.VerdictReplayed)
	f.wantHold("replay of a rebuilt key", out.Hold, last)
	r.IdempotencyKey = "new-key"
	f.expect(r, flashsale.VerdictLimitReached)
}

func testTamper(t *testing.T, f *fixture) {
	f.load(10)
	held := f.req("u1")
	f.win(held)
	if d := f.snapshot().Drift(); d != 0 {
		t.Fatalf("Drift = %d before tampering", d)
	}
	f.h.Tamper(t, f.g, f.sale, 3)
	s := f.snapshot()
	if s.Drift() != 3 || s.Counter != 12 || s.Won != 1 || s.Restocked != 0 {
		t.Fatalf("after a +3 write behind the gate: %+v (drift %d); want counter 12, drift 3", s, s.Drift())
	}
	unaudited := s.Counter - s.AuditedCounter
	// The extra units would sell through the perfectly correct path, and
	// every unit after them would be one too many. A counter that
	// disagrees with the gate's own bookkeeping sells nothing, not even
	// units that exist: it fails closed until a rebuild.
	r := f.req("u2")
	r.Quantity = 12
	f.expect(r, flashsale.VerdictPaused)
	f.expect(f.req("u3"), flashsale.VerdictPaused)
	// Holds still come back, and an audited mutation moves the counter and
	// the audited counter alike, so an unaudited write stays visible.
	if moved, err := f.g.Restock(f.ctx, f.sale, held.ReservationID, "sweeper"); err != nil || !moved {
		t.Fatalf("Restock after tampering = %v, %v", moved, err)
	}
	if s := f.snapshot(); s.Drift() != 3 || s.Counter-s.AuditedCounter != unaudited {
		t.Fatalf("after a restock: %+v (drift %d); want drift 3 and counter - audited %d", s, s.Drift(), unaudited)
	}
	// A rebuild from the record puts the counter right, and it sells again.
	if err := f.g.Rebuild(f.ctx, f.sale, 10, 1, nil, nil, "rebuild"); err != nil {
		t.Fatal(err)
	}
	if err := f.g.SetPaused(f.ctx, f.sale, false, "operator"); err != nil {
		t.Fatal(err)
	}
	f.win(f.req("u4"))
	if s := f.snapshot(); s.Drift() != 0 || s.Counter != 9 {
		t.Fatalf("after the rebuild: %+v", s)
	}
}

// testTamperEitherWay: a counter written behind the gate sells nothing,
// whichever way it was moved (up, down, to zero, below zero) and whether
// or not the gate had already seen the sale sold out. The checks before
// the drift in flashsale.Verdict's order (the idempotency key) still
// answer first; every check after it (the epoch, the admission, the
// stock, the limits) answers paused, the first time and every time after,
// so that no gate's quicker path for a repeated or a sold-out rejection
// can answer sold out where the order says paused. Nothing is written.
func testTamperEitherWay(t *testing.T, f *fixture) {
	for _, tc := range []struct {
		name    string
		soldOut bool // the gate answered sold out before the write
		delta   int64
	}{
		{"up", false, 3},
		{"down", false, -3},
		{"down to zero", false, -9},
		{"below zero", false, -12},
		{"up from sold out", true, 2},
		{"down from sold out", true, -1},
	} {
		f.sale = flashsale.NewID("sale_")
		initial := int64(10)
		if tc.soldOut {
			initial = 1
		}
		f.load(initial)
		held := f.req("u1")
		held.Instrument = "card-1"
		won := f.win(held)
		if tc.soldOut {
			f.expect(f.req("u2"), flashsale.VerdictSoldOut)
		}
		f.h.Tamper(t, f.g, f.sale, tc.delta)
		counter := initial - 1 + tc.delta
		if s := f.snapshot(); s.Counter != counter || s.Drift() != tc.delta {
			t.Fatalf("%s: after the write behind the gate %+v (drift %d); want counter %d, drift %d",
				tc.name, s, s.Drift(), counter, tc.delta)
		}
		snap, n := f.snapshot(), len(f.audit())

		// The key on record comes before the drift.
		f.wantHold(tc.name+": replay", f.expect(f.again(held), flashsale.VerdictReplayed).Hold, won)
		reused := f.again(held)
		reused.RequestHash = "changed"
		f.expect(reused, flashsale.VerdictKeyReused)

		// Everything after it is hidden behind it.
		stale := f.req("u3")
		stale.Epoch = epoch + 1
		spent := f.req("u4")
		spent.AdmissionID = held.AdmissionID
		big := f.req("u5")
		big.Quantity = int(max(counter, 0)) + 1
		card := f.req("u6")
		card.Instrument = held.Instrument
		for what, r := range map[string]flashsale.GateReserve{
			"a fresh request": f.req("u7"), "a stale epoch": stale, "a spent admission": spent,
			"more than is left": big, "the winner again": f.req("u1"), "the winner's card": card,
		} {
			for try := range 3 {
				out := f.reserve(f.again(r))
				if out.Verdict != flashsale.VerdictPaused || out.Remaining != counter || out.Epoch != epoch {
					t.Fatalf("%s: %s, try %d: %+v; want paused with %d left at epoch %d",
						tc.name, what, try+1, out, counter, epoch)
				}
			}
		}
		if got := f.snapshot(); got != snap {
			t.Fatalf("%s: rejections changed the snapshot: %+v, was %+v", tc.name, got, snap)
		}
		if got := len(f.audit()); got != n {
			t.Fatalf("%s: rejections wrote %d audit entries", tc.name, got-n)
		}
		if _, found := f.lookup(held.UserID, held.IdempotencyKey); !found {
			t.Fatalf("%s: the winner's key is forgotten", tc.name)
		}
		// A hold still comes back, and the drift stays.
		if !f.restock(won.ReservationID) {
			t.Fatalf("%s: restock moved nothing", tc.name)
		}
		f.expect(f.req("u8"), flashsale.VerdictPaused)
		if d := f.snapshot().Drift(); d != tc.delta {
			t.Fatalf("%s: drift %d after a restock; want %d", tc.name, d, tc.delta)
		}
	}
}

// testOrderFull walks flashsale.Verdict's whole order with one request
// that fails every check, putting right one thing at a time: each answer
// is the first check still failing. Each step asks twice, so that a gate
// answering repeated rejections another way (a lock-free path, a
// sold-out script) is held to the same order. It runs with the counter
// written behind the gate upwards and downwards (to zero).
func testOrderFull(t *testing.T, f *fixture) {
	for _, delta := range []int64{3, -1} {
		f.sale = flashsale.NewID("sale_")
		step := func(what string, r flashsale.GateReserve, want flashsale.Verdict) {
			t.Helper()
			for try := range 2 {
				if out := f.reserve(f.again(r)); out.Verdict != want {
					t.Fatalf("delta %+d, %s, try %d: %v; want %v", delta, what, try+1, out.Verdict, want)
				}
			}
		}
		first := f.req("u1")
		first.Instrument = "card-1"
		r := first
		r.RequestHash = "another request"
		r.Epoch = epoch + 1
		r.Quantity = 5
		step("not loaded", r, flashsale.VerdictNotLoaded)
		f.load(2)
		f.win(first)
		f.setPaused(true)
		f.h.Tamper(t, f.g, f.sale, delta)
		step("the key holds another request", r, flashsale.VerdictKeyReused)
		r.IdempotencyKey = "key-of-" + f.sale
		step("paused", r, flashsale.VerdictPaused)
		f.setPaused(false)
		step("written behind the gate", r, flashsale.VerdictPaused)
		f.h.Tamper(t, f.g, f.sale, -delta)
		step("a stale epoch", r, flashsale.VerdictStaleEpoch)
		r.Epoch = epoch
		step("a spent admission", r, flashsale.VerdictAdmissionUsed)
		r.AdmissionID = "adm-of-" + f.sale
		step("more than is left", r, flashsale.VerdictSoldOut)
		r.Quantity = 1
		step("the shopper holds", r, flashsale.VerdictLimitReached)
		r.UserID = "u2"
		step("the card holds", r, flashsale.VerdictLimitReached)
		r.Instrument = ""
		f.win(f.again(r))
		f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 2, Counter: 0, Won: 2,
			AuditedCounter: 0})
	}
}

func testAudit(t *testing.T, f *fixture) {
	f.load(10)
	var wins []flashsale.Hold
	for i := range 5 {
		f.clock.Advance(time.Millisecond)
		wins = append(wins, f.win(f.req(fmt.Sprintf("u%d", i))))
	}
	all := f.audit()
	if len(all) != 6 {
		t.Fatalf("audit log has %d entries; want a load and 5 reserves", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatalf("audit seq not increasing: %d then %d", all[i-1].Seq, all[i].Seq)
		}
		if all[i].At.Before(all[i-1].At) {
			t.Fatalf("audit times go back: %v then %v", all[i-1].At, all[i].At)
		}
	}
	last3, err := f.g.Audit(f.ctx, f.sale, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(last3) != 3 {
		t.Fatalf("Audit(3) returned %d entries", len(last3))
	}
	for i, e := range last3 {
		w := wins[2+i]
		if e.ReservationID != w.ReservationID || e.Counter != int64(10-3-i) || e.Seq != all[3+i].Seq || !e.At.Equal(w.CreatedAt) {
			t.Fatalf("Audit(3)[%d] = %+v; want the win of %s leaving %d at %v", i, e, w.ReservationID, 10-3-i, w.CreatedAt)
		}
	}
	// A reserve is dated by its request, not by when the gate got to it.
	r := f.req("late")
	f.clock.Advance(5 * time.Millisecond)
	f.win(r)
	if e := f.lastAudit(); !e.At.Equal(r.Now) {
		t.Fatalf("reserve audited at %v; want the request's time %v", e.At, r.Now)
	}
	none, err := f.g.Audit(f.ctx, f.sale, 0)
	if err != nil || len(none) != 0 {
		t.Fatalf("Audit(0) = %v, %v; want nothing", none, err)
	}
}

func testDrop(t *testing.T, f *fixture) {
	f.load(5)
	r := f.req("u1")
	f.win(r)
	if err := f.g.Drop(f.ctx, f.sale); err != nil {
		t.Fatal(err)
	}
	f.wantSnapshot(flashsale.GateSnapshot{})
	f.wantHolds()
	if a := f.audit(); len(a) != 0 {
		t.Fatalf("audit after Drop: %+v", a)
	}
	if _, found := f.lookup(r.UserID, r.IdempotencyKey); found {
		t.Fatal("Lookup after Drop found a key")
	}
	f.expect(f.again(r), flashsale.VerdictNotLoaded)
	// A dropped sale loads afresh: nothing of the old one remains.
	f.load(5)
	out := f.expect(f.again(r), flashsale.VerdictWon)
	if out.Remaining != 4 {
		t.Fatalf("after reload Remaining %d; want 4", out.Remaining)
	}
	if err := f.g.Drop(f.ctx, "sale_never"); err != nil {
		t.Fatalf("Drop of an unknown sale: %v", err)
	}
}

func testSalesSeparate(t *testing.T, f *fixture) {
	f.load(1)
	other := flashsale.NewID("sale_")
	if ok, err := f.g.Load(f.ctx, other, 1, epoch, "test"); !ok || err != nil {
		t.Fatalf("Load(other) = %v, %v", ok, err)
	}
	t.Cleanup(func() { _ = f.g.Drop(context.Background(), other) })
	r := f.req("u1")
	f.win(r)
	f.expect(f.req("u2"), flashsale.VerdictSoldOut)
	// The same shopper, key and admission at the other sale is another
	// reserve.
	r.SaleID, r.ReservationID = other, "res-other"
	f.win(r)
	s, err := f.g.Snapshot(f.ctx, other)
	if err != nil || s.Counter != 0 || s.Won != 1 {
		t.Fatalf("other sale: %+v, %v", s, err)
	}
	f.setPaused(true)
	if s, _ := f.g.Snapshot(f.ctx, other); s.Paused {
		t.Fatal("pausing one sale paused another")
	}
}

func testPing(t *testing.T, f *fixture) {
	if err := f.g.Ping(f.ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// start runs fn(i) for i in [0, n) on n goroutines released together, and
// waits for them.
func start(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			fn(i)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
}

// tally counts verdicts from many goroutines.
type tally struct {
	mu     sync.Mutex
	counts map[flashsale.Verdict]int
	errs   []error
}

func (c *tally) add(out flashsale.GateOutcome, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = make(map[flashsale.Verdict]int)
	}
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	c.counts[out.Verdict]++
}

func (c *tally) check(t *testing.T, want map[flashsale.Verdict]int) {
	t.Helper()
	if len(c.errs) > 0 {
		t.Fatalf("%d reserves failed, first: %v", len(c.errs), c.errs[0])
	}
	for v, n := range want {
		if c.counts[v] != n {
			t.Fatalf("verdicts %v; want %v", c.counts, want)
		}
	}
	total := 0
	for _, n := range c.counts {
		total += n
	}
	wantTotal := 0
	for _, n := range want {
		wantTotal += n
	}
	if total != wantTotal {
		t.Fatalf("verdicts %v; want only %v", c.counts, want)
	}
}

func testConcurrentCrowd(t *testing.T, f *fixture) {
	const shoppers, units = 1000, 100
	f.load(units)
	reqs := make([]flashsale.GateReserve, shoppers)
	for i := range reqs {
		reqs[i] = f.req(fmt.Sprintf("crowd-%d", i))
	}
	var c tally
	start(shoppers, func(i int) {
		out, err := f.g.Reserve(f.ctx, reqs[i])
		if err == nil && out.Remaining < 0 {
			err = fmt.Errorf("remaining %d", out.Remaining)
		}
		c.add(out, err)
	})
	c.check(t, map[flashsale.Verdict]int{flashsale.VerdictWon: units, flashsale.VerdictSoldOut: shoppers - units})
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: units, Counter: 0, Won: units, AuditedCounter: 0})
	if hs := f.holds(); len(hs) != units {
		t.Fatalf("Holds = %d; want %d", len(hs), units)
	}
}

func testConcurrentOneUser(t *testing.T, f *fixture) {
	const attempts = 50
	f.load(10)
	reqs := make([]flashsale.GateReserve, attempts)
	for i := range reqs {
		reqs[i] = f.req("greedy")
	}
	var c tally
	start(attempts, func(i int) { c.add(f.g.Reserve(f.ctx, reqs[i])) })
	c.check(t, map[flashsale.Verdict]int{flashsale.VerdictWon: 1, flashsale.VerdictLimitReached: attempts - 1})
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 10, Counter: 9, Won: 1, AuditedCounter: 9})
}

func testConcurrentSameRequest(t *testing.T, f *fixture) {
	const attempts = 50
	// One unit: a replay that raced its own win must never read the gate
	// as sold out.
	f.load(1)
	first := f.req("impatient")
	reqs := make([]flashsale.GateReserve, attempts)
	for i := range reqs {
		reqs[i] = f.again(first)
	}
	var c tally
	var mu sync.Mutex
	ids := make(map[string]int)
	start(attempts, func(i int) {
		out, err := f.g.Reserve(f.ctx, reqs[i])
		c.add(out, err)
		mu.Lock()
		ids[out.Hold.ReservationID]++
		mu.Unlock()
	})
	c.check(t, map[flashsale.Verdict]int{flashsale.VerdictWon: 1, flashsale.VerdictReplayed: attempts - 1})
	if len(ids) != 1 {
		t.Fatalf("answers named %d reservations: %v; want one", len(ids), ids)
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 1, Counter: 0, Won: 1, AuditedCounter: 0})
}

func testConcurrentRestock(t *testing.T, f *fixture) {
	const sweepers = 20
	f.load(1)
	won := f.win(f.req("u1"))
	var moved atomic.Int32
	var failed atomic.Value
	start(sweepers, func(int) {
		ok, err := f.g.Restock(f.ctx, f.sale, won.ReservationID, "test-sweeper")
		if err != nil {
			failed.Store(err)
		}
		if ok {
			moved.Add(1)
		}
	})
	if err := failed.Load(); err != nil {
		t.Fatalf("Restock: %v", err)
	}
	if moved.Load() != 1 {
		t.Fatalf("%d of %d concurrent restocks moved units; want exactly 1", moved.Load(), sweepers)
	}
	f.wantSnapshot(flashsale.GateSnapshot{Loaded: true, Epoch: epoch, Initial: 1, Counter: 1, Won: 1, Restocked: 1, AuditedCounter: 1})
}

func testConcurrentChurn(t *testing.T, f *fixture) {
	const (
		units    = 5
		workers  = 16
		rounds   = 150
		initial  = int64(units)
		watchers = 2
	)
	f.load(initial)
	stop := make(chan struct{})
	var watched sync.WaitGroup
	var bad atomic.Value
	for range watchers {
		watched.Add(1)
		go func() {
			defer watched.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := f.g.Snapshot(f.ctx, f.sale)
				switch {
				case err != nil:
					bad.Store(err)
				case s.Counter < 0 || s.Counter > initial || s.Drift() != 0 || s.Counter+s.Held() != initial || s.AuditedCounter != s.Counter:
					bad.Store(fmt.Errorf("snapshot broke the invariant: %+v", s))
				}
			}
		}()
	}
	var wins, lost atomic.Int64
	start(workers, func(w int) {
		// kept is a hold this worker sits on for a while, so the gate
		// always has some units held; it goes back when the worker loses,
		// so that kept holds cannot starve everyone.
		var kept *flashsale.Hold
		giveBack := func(h flashsale.Hold, void bool) {
			var moved bool
			var err error
			if void {
				moved, err = f.g.Void(f.ctx, f.sale, h, "test-void")
			} else {
				moved, err = f.g.Restock(f.ctx, f.sale, h.ReservationID, "test-sweeper")
			}
			if err != nil || !moved {
				bad.Store(fmt.Errorf("giving back %s: %v, %v", h.ReservationID, moved, err))
			}
		}
		for i := range rounds {
			r := f.req(fmt.Sprintf("churn-%d-%d", w, i%3))
			out, err := f.g.Reserve(f.ctx, r)
			if err != nil {
				bad.Store(err)
				return
			}
			if out.Remaining < 0 {
				bad.Store(fmt.Errorf("counter seen at %d", out.Remaining))
			}
			if out.Verdict != flashsale.VerdictWon {
				lost.Add(1)
				if kept != nil {
					giveBack(*kept, false)
					kept = nil
				}
				continue
			}
			wins.Add(1)
			switch {
			case i%5 == 0 && kept == nil:
				kept = &out.Hold
			case i%5 == 1:
				giveBack(out.Hold, true)
			default:
				giveBack(out.Hold, false)
			}
		}
	})
	close(stop)
	watched.Wait()
	if err := bad.Load(); err != nil {
		t.Fatal(err)
	}
	s := f.snapshot()
	held := int64(0)
	for _, h := range f.holds() {
		held += int64(h.Quantity)
	}
	if s.Drift() != 0 || s.Counter+s.Held() != initial || s.Held() != held || s.Won != wins.Load() {
		t.Fatalf("after churn: %+v (drift %d), %d units in holds, %d wins", s, s.Drift(), held, wins.Load())
	}
	if wins.Load() == 0 || lost.Load() == 0 {
		t.Fatalf("churn had %d wins and %d rejections; want both", wins.Load(), lost.Load())
	}
}
