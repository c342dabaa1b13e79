package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/gatetest"
	"github.com/redis/rueidis"
)

// held makes a gate's first maxInFlight reserve calls wait until release
// is called, so that every reserve made meanwhile queues and goes in the
// batches after them.
type held struct {
	// queued receives each reserve that joins the queue, in the queue's
	// order; waiting, each call that waits.
	queued  chan flashsale.GateReserve
	waiting chan struct{}
	release func()
}

func holdCalls(g *Gate) *held {
	var (
		mu    sync.Mutex
		calls int
	)
	gate := make(chan struct{})
	h := &held{
		queued:  make(chan flashsale.GateReserve, 1024),
		waiting: make(chan struct{}, maxInFlight),
		release: sync.OnceFunc(func() { close(gate) }),
	}
	g.beforeCall = func([]flashsale.GateReserve) {
		mu.Lock()
		calls++
		first := calls <= maxInFlight
		mu.Unlock()
		if first {
			h.waiting <- struct{}{}
			<-gate
		}
	}
	g.queued = func(r flashsale.GateReserve) { h.queued <- r }
	return h
}

// occupy makes maxInFlight reserves take the sale's call slots and wait
// in holdCalls; they are stale (epoch 99), so they write nothing. It
// returns once they wait; the returned wait returns once they are
// answered.
func occupy(t *testing.T, g *Gate, h *held, saleID string) (wait func()) {
	var wg sync.WaitGroup
	for i := range maxInFlight {
		wg.Go(func() {
			now := time.Now()
			r := flashsale.GateReserve{SaleID: saleID, ReservationID: fmt.Sprintf("slot-%d", i), UserID: fmt.Sprintf("slot-%d", i),
				Quantity: 1, Epoch: 99, IdempotencyKey: "slot", RequestHash: "h", Now: now}
			if out, err := g.Reserve(context.Background(), r); err != nil || out.Verdict != flashsale.VerdictStaleEpoch {
				t.Errorf("slot reserve = %v, %v; want stale_epoch", out.Verdict, err)
			}
		})
	}
	for range maxInFlight {
		<-h.waiting
	}
	return wg.Wait
}

// TestGateBatchScript runs the conformance suite with every reserve sent
// through the batch script, as a batch of one: whatever a lone reserve
// must do, a reserve in a batch does too.
func TestGateBatchScript(t *testing.T) {
	gatetest.Exercise(t, gatetest.Harness{
		New: func(t *testing.T, now func() time.Time) flashsale.GateAdmin {
			g := newGate(t, now)
			g.batchAlone = true
			return g
		},
		Tamper: func(t *testing.T, g flashsale.GateAdmin, saleID string, delta int64) {
			rg := g.(*Gate)
			err := rg.client.Do(t.Context(), rg.client.B().Incrby().Key(rg.StockKey(saleID)).Increment(delta).Build()).Error()
			if err != nil {
				t.Fatalf("INCRBY: %v", err)
			}
		},
	})
}

// TestBatchDecidesAsInOrder queues reserves that interfere with each other
// (the same key, shopper, admission, card, reservation id) behind the
// calls in flight, so that they go as one batch, and checks that the
// batch answers each exactly as the same reserves made one at a time, in
// the queue's order, answer on a fresh sale.
func TestBatchDecidesAsInOrder(t *testing.T) {
	f := newFixture(t, 3)
	h := holdCalls(f.g)
	var (
		mu      sync.Mutex
		batches []int
	)
	hold := f.g.beforeCall
	f.g.beforeCall = func(rs []flashsale.GateReserve) {
		mu.Lock()
		batches = append(batches, len(rs))
		mu.Unlock()
		hold(rs)
	}
	slots := occupy(t, f.g, h, f.sale)

	now := time.Now()
	req := func(res, user, key, hash, adm, card string, epoch int64) flashsale.GateReserve {
		return flashsale.GateReserve{SaleID: f.sale, ReservationID: res, UserID: user, Quantity: 1, Instrument: card,
			AdmissionID: adm, Epoch: epoch,
			IdempotencyKey: key, RequestHash: hash, Now: now}
	}
	rs := []flashsale.GateReserve{
		req("r0", "u1", "k1", "h1", "a0", "", 1),      // won
		req("r1", "u1", "k1", "h1", "a1", "", 1),      // replays r0
		req("r2", "u1", "k1", "other", "a2", "", 1),   // key reused
		req("r3", "u1", "k2", "h", "a3", "", 1),       // u1 holds r0
		req("r4", "u2", "k1", "h", "shared", "", 1),   // won
		req("r5", "u3", "k1", "h", "shared", "", 1),   // admission spent by r4
		req("r6", "u4", "k1", "h", "a6", "card", 1),   // won, the last unit
		req("r7", "u5", "k1", "h", "a7", "card", 1),   // sold out
		req("r8", "u6", "k1", "h", "a8", "", 7),       // stale epoch
		req("r0", "u7", "k1", "h", "a9", "", 1),       // sold out, before the duplicate id
		req("r10", "u4", "k1", "h", "a10", "card", 1), // replays r6
	}
	type answer struct {
		out flashsale.GateOutcome
		err error
	}
	answers := make(map[string]answer)
	var order []flashsale.GateReserve
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			out, err := f.g.Reserve(f.ctx, r)
			mu.Lock()
			answers[r.ReservationID+"/"+r.UserID] = answer{out, err}
			mu.Unlock()
		})
		order = append(order, <-h.queued) // one at a time: the queue's order is rs's
	}
	h.release()
	wg.Wait()
	slots()

	if want := []int{1, 1, len(rs)}; fmt.Sprint(batches) != fmt.Sprint(want) {
		t.Fatalf("script calls decided %v reserves; want %v: the queued reserves in one batch", batches, want)
	}
	wantVerdicts := []flashsale.Verdict{
		flashsale.VerdictWon, flashsale.VerdictReplayed, flashsale.VerdictKeyReused, flashsale.VerdictLimitReached,
		flashsale.VerdictWon, flashsale.VerdictAdmissionUsed, flashsale.VerdictWon, flashsale.VerdictSoldOut,
		flashsale.VerdictStaleEpoch, flashsale.VerdictSoldOut, flashsale.VerdictReplayed,
	}
	// The same reserves, one at a time, on a fresh sale.
	seq := newFixture(t, 3)
	for i, r := range order {
		got := answers[r.ReservationID+"/"+r.UserID]
		r.SaleID = seq.sale
		want, err := seq.g.Reserve(seq.ctx, r)
		if got.err != nil || err != nil {
			t.Fatalf("reserve %d (%s): batched error %v, alone %v", i, r.ReservationID, got.err, err)
		}
		if got.out != want {
			t.Errorf("reserve %d (%s of %s): batched %+v; alone %+v", i, r.ReservationID, r.UserID, got.out, want)
		}
		if got.out.Verdict != wantVerdicts[i] {
			t.Errorf("reserve %d (%s of %s) = %v; want %v", i, r.ReservationID, r.UserID, got.out.Verdict, wantVerdicts[i])
		}
	}

	// The batch's one audit entry reads back as one per win, as the
	// reserves one at a time left them.
	batched, err := f.g.Audit(f.ctx, f.sale, 100)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := seq.g.Audit(seq.ctx, seq.sale, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(batched) != 4 || len(alone) != 4 {
		t.Fatalf("audit: %d entries batched, %d alone; want a load and three wins", len(batched), len(alone))
	}
	for i := 1; i < len(batched); i++ { // after the loads, which differ in time
		if batched[i] != alone[i] {
			t.Errorf("audit entry %d: batched %+v; alone %+v", i, batched[i], alone[i])
		}
	}
	if s := f.snapshot(); s.Counter != 0 || s.Held() != 3 || s.Drift() != 0 || s.AuditedCounter != 0 {
		t.Fatalf("snapshot %+v; want 3 held, none left, no drift", s)
	}
	if got := len(f.holds()); got != 3 {
		t.Fatalf("%d holds; want 3", got)
	}
}

// TestConcurrentBatchesNeverOversell has 240 reserves of 60 shoppers race
// for 25 units, every shopper asking four times under different keys and
// pairs of shoppers sharing a card, while the first calls are held so that
// the rest queue and go in full batches. However the batches fall, the units
// sell exactly once, each shopper and each card wins at most once, and the
// audit log accounts for every win.
func TestConcurrentBatchesNeverOversell(t *testing.T) {
	for _, tc := range []struct {
		name string
		gate func(t *testing.T) *Gate
	}{
		{"redis", func(t *testing.T) *Gate { return newGate(t, nil) }},
		{"cluster", func(t *testing.T) *Gate { return newClusterGate(t, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const (
				units    = 25
				shoppers = 60
				asks     = 4
			)
			f := &fixture{t: t, ctx: t.Context(), g: tc.gate(t), sale: flashsale.NewID("sale_")}
			if ok, err := f.g.Load(f.ctx, f.sale, units, 1, "test"); !ok || err != nil {
				t.Fatalf("Load = %v, %v", ok, err)
			}
			h := holdCalls(f.g)
			var (
				mu      sync.Mutex
				largest int
			)
			hold := f.g.beforeCall
			f.g.beforeCall = func(rs []flashsale.GateReserve) {
				mu.Lock()
				largest = max(largest, len(rs))
				mu.Unlock()
				hold(rs)
			}
			slots := occupy(t, f.g, h, f.sale)

			start := make(chan struct{})
			wins := make(map[string][]string) // shopper → reservation ids
			cards := make(map[string]int)
			var wg sync.WaitGroup
			for s := range shoppers {
				for a := range asks {
					wg.Go(func() {
						<-start
						now := time.Now()
						id := fmt.Sprintf("u%d-%d", s, a)
						r := flashsale.GateReserve{SaleID: f.sale, ReservationID: "res-" + id, UserID: fmt.Sprintf("u%d", s),
							Quantity: 1, Instrument: fmt.Sprintf("card-%d", s/2), AdmissionID: "adm-" + id,
							Epoch: 1, IdempotencyKey: "key-" + id,
							RequestHash: "h", Now: now}
						out, err := f.g.Reserve(f.ctx, r)
						if err != nil {
							t.Errorf("Reserve: %v", err)
							return
						}
						switch out.Verdict {
						case flashsale.VerdictWon:
							mu.Lock()
							wins[r.UserID] = append(wins[r.UserID], r.ReservationID)
							cards[r.Instrument]++
							mu.Unlock()
						case flashsale.VerdictSoldOut, flashsale.VerdictLimitReached:
						default:
							t.Errorf("Reserve = %v", out.Verdict)
						}
					})
				}
			}
			close(start)
			for range shoppers * asks {
				<-h.queued
			}
			h.release()
			wg.Wait()
			slots()
			if largest < 2 {
				t.Fatalf("the largest script call decided %d reserves; the test needs batches", largest)
			}
			t.Logf("largest batch: %d reserves", largest)

			won := make(map[string]bool)
			for user, ids := range wins {
				if len(ids) > 1 {
					t.Errorf("%s won %d times: %v", user, len(ids), ids)
				}
				for _, id := range ids {
					won[id] = true
				}
			}
			for card, n := range cards {
				if n > 1 {
					t.Errorf("%s won %d times", card, n)
				}
			}
			if len(won) != units {
				t.Fatalf("%d wins; want all %d units sold, once each", len(won), units)
			}
			if s := f.snapshot(); s.Counter != 0 || s.Held() != units || s.Drift() != 0 || s.AuditedCounter != s.Counter {
				t.Fatalf("snapshot %+v; want every unit held, none left, no drift", s)
			}
			holds := f.holds()
			if len(holds) != units {
				t.Fatalf("%d holds; want %d", len(holds), units)
			}
			for _, h := range holds {
				if !won[h.ReservationID] {
					t.Errorf("hold %s was not answered as a win", h.ReservationID)
				}
			}
			audit := f.audit()
			if len(audit) != 1+units {
				t.Fatalf("audit has %d entries; want a load and %d wins", len(audit), units)
			}
			counter := int64(units)
			for i, e := range audit[1:] {
				counter += e.Delta
				if e.Op != "reserve" || e.Delta != -1 || e.Counter != counter || !won[e.ReservationID] || e.Seq <= audit[i].Seq {
					t.Errorf("audit entry %+v after %+v; want each win once, in order, counting down", e, audit[i])
				}
				delete(won, e.ReservationID)
			}
		})
	}
}

// TestQueuedReserveCutShort: a reserve whose deadline passes while it
// queues fails closed, and is never sent.
func TestQueuedReserveCutShort(t *testing.T) {
	f := newFixture(t, 5)
	h := holdCalls(f.g)
	var (
		mu   sync.Mutex
		sent []string
	)
	hold := f.g.beforeCall
	f.g.beforeCall = func(rs []flashsale.GateReserve) {
		mu.Lock()
		for _, r := range rs {
			sent = append(sent, r.ReservationID)
		}
		mu.Unlock()
		hold(rs)
	}
	slots := occupy(t, f.g, h, f.sale)

	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error)
	r := f.req("u1")
	go func() {
		_, err := f.g.Reserve(ctx, r)
		done <- err
	}()
	<-h.queued
	cancel()
	if err := <-done; flashsale.ErrorCode(err) != flashsale.CodeUnavailable {
		t.Fatalf("Reserve cut short = %v; want an unavailable error (fail closed)", err)
	}
	h.release()
	slots()
	mu.Lock()
	for _, id := range sent {
		if id == r.ReservationID {
			t.Errorf("the reserve cut short was sent (calls: %v)", sent)
		}
	}
	mu.Unlock()
	if s := f.snapshot(); s.Counter != 5 || s.Won != 0 {
		t.Fatalf("snapshot %+v; want nothing taken", s)
	}
	// The sale goes on: a later reserve is answered.
	f.expect(f.req("u2"), flashsale.VerdictWon)
}

func (f *fixture) snapshot() flashsale.GateSnapshot {
	f.t.Helper()
	s, err := f.g.Snapshot(f.ctx, f.sale)
	if err != nil {
		f.t.Fatalf("Snapshot: %v", err)
	}
	return s
}

func (f *fixture) holds() []flashsale.Hold {
	f.t.Helper()
	hs, err := f.g.Holds(f.ctx, f.sale)
	if err != nil {
		f.t.Fatalf("Holds: %v", err)
	}
	return hs
}

func (f *fixture) audit() []flashsale.AuditEntry {
	f.t.Helper()
	a, err := f.g.Audit(f.ctx, f.sale, 1_000_000)
	if err != nil {
		f.t.Fatalf("Audit: %v", err)
	}
	return a
}

// TestBatchNoScript: a Redis that lost its script cache (a restart, a
// failover) still takes batches: EVALSHA falls back to EVAL.
func TestBatchNoScript(t *testing.T) {
	f := newFixture(t, 10)
	f.g.batchAlone = true
	f.expect(f.req("u1"), flashsale.VerdictWon)
	if err := f.do(f.g.client.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	f.expect(f.req("u2"), flashsale.VerdictWon)
	if s := f.snapshot(); s.Counter != 8 {
		t.Fatalf("snapshot %+v; want 8 left", s)
	}
}

// TestReserveCutShortInFlight: a reserve whose caller stops waiting while
// its batch is in flight fails closed at once; the batch still decides it
// (the caller was told it may or may not have happened), and the sale
// goes on.
func TestReserveCutShortInFlight(t *testing.T) {
	f := newFixture(t, 5)
	h := holdCalls(f.g)
	slots := occupy(t, f.g, h, f.sale)
	r := f.req("u1")
	inFlight, resume := make(chan struct{}), make(chan struct{})
	hold := f.g.beforeCall
	f.g.beforeCall = func(rs []flashsale.GateReserve) {
		hold(rs)
		for _, q := range rs {
			if q.ReservationID == r.ReservationID {
				close(inFlight)
				<-resume
			}
		}
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error)
	go func() {
		_, err := f.g.Reserve(ctx, r)
		done <- err
	}()
	<-h.queued
	h.release()
	<-inFlight
	cancel()
	if err := <-done; flashsale.ErrorCode(err) != flashsale.CodeUnavailable {
		t.Fatalf("Reserve cut short in flight = %v; want an unavailable error (fail closed)", err)
	}
	close(resume)
	slots()
	f.expect(f.req("u2"), flashsale.VerdictWon)
	if s := f.snapshot(); s.Won != 2 || s.Drift() != 0 {
		t.Fatalf("snapshot %+v; want the cut-short reserve and the next one won, no drift", s)
	}
}

// soldOutCalls records the gate's reserveSoldOutLua calls as "n/found"
// pairs: how many reserves each was sent and whether it found units.
func soldOutCalls(g *Gate) func() []string {
	var (
		mu    sync.Mutex
		calls []string
	)
	g.afterSoldOutCall = func(n int, stockLeft bool) {
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%d/%v", n, stockLeft))
		mu.Unlock()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

// batchOf queues rs behind the calls in flight, so that they go as one
// batch, and returns their answers in rs's order.
func batchOf(t *testing.T, f *fixture, rs []flashsale.GateReserve) []flashsale.GateOutcome {
	t.Helper()
	h := holdCalls(f.g)
	slots := occupy(t, f.g, h, f.sale)
	outs := make([]flashsale.GateOutcome, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			out, err := f.g.Reserve(f.ctx, r)
			if err != nil {
				t.Errorf("reserve %d (%s): %v", i, r.ReservationID, err)
			}
			outs[i] = out
		})
		<-h.queued // one at a time: the queue's order is rs's
	}
	h.release()
	wg.Wait()
	slots()
	return outs
}

// TestSoldOutBatchDecidesAsInOrder: on a sale the gate saw sell out, a
// batch goes with the sold-out script and answers every reserve exactly
// as reserveOneLua answers it alone: replays and reused keys, a stale
// epoch and a spent admission keep their own verdicts, everything else is
// sold out, and nothing is written.
func TestSoldOutBatchDecidesAsInOrder(t *testing.T) {
	now := time.Now()
	req := func(sale, res, user, key, hash, adm string, epoch int64) flashsale.GateReserve {
		return flashsale.GateReserve{SaleID: sale, ReservationID: res, UserID: user, Quantity: 1,
			AdmissionID: adm, Epoch: epoch,
			IdempotencyKey: key, RequestHash: hash, Now: now}
	}
	soldOut := func() *fixture {
		f := newFixture(t, 2)
		f.expect(req(f.sale, "w1", "u1", "k1", "h1", "a1", 1), flashsale.VerdictWon)
		f.expect(req(f.sale, "w2", "u2", "k2", "h2", "a2", 1), flashsale.VerdictWon)
		return f
	}
	f := soldOut()
	calls := soldOutCalls(f.g)
	before := f.dump()
	later := req(f.sale, "r9", "u9", "k9", "h", "a1", 1)
	later.Now = now.Add(24 * time.Hour) // a1 is still spent
	card := req(f.sale, "r8", "u8", "k8", "h", "a8", 1)
	card.Instrument = "card"
	two := req(f.sale, "r7", "u7", "k7", "h", "a7", 1)
	two.Quantity = 2
	rs := []flashsale.GateReserve{
		req(f.sale, "r0", "u1", "k1", "h1", "a0", 1),  // replays w1
		req(f.sale, "r1", "u1", "k1", "other", "", 1), // key reused
		req(f.sale, "r2", "u3", "k3", "h", "a3", 7),   // stale epoch
		req(f.sale, "r3", "u4", "k4", "h", "a1", 1),   // a1 spent by w1
		req(f.sale, "r4", "u5", "k5", "h", "a5", 1),   // sold out
		two, // sold out
		req(f.sale, "w1", "u6", "k6", "h", "a6", 1), // sold out, before the duplicate id
		req(f.sale, "r5", "u2", "k5", "h", "a9", 1), // sold out, before u2's limit
		card,  // sold out
		later, // a1 spent by w1, a day later too
		req(f.sale, "r6", "u2", "k2", "h2", "", 1), // replays w2
	}
	got := batchOf(t, f, rs)
	if want := []string{fmt.Sprintf("%d/false", len(rs))}; !slices.Equal(calls(), want) {
		t.Fatalf("sold-out script calls %v; want %v: the batch in one call", calls(), want)
	}
	wantVerdicts := []flashsale.Verdict{
		flashsale.VerdictReplayed, flashsale.VerdictKeyReused, flashsale.VerdictStaleEpoch, flashsale.VerdictAdmissionUsed,
		flashsale.VerdictSoldOut, flashsale.VerdictSoldOut, flashsale.VerdictSoldOut, flashsale.VerdictSoldOut,
		flashsale.VerdictSoldOut, flashsale.VerdictAdmissionUsed, flashsale.VerdictReplayed,
	}
	alone := soldOut()
	for i, r := range rs {
		r.SaleID = alone.sale
		want, err := alone.g.Reserve(alone.ctx, r)
		if err != nil {
			t.Fatalf("reserve %d (%s) alone: %v", i, r.ReservationID, err)
		}
		if got[i].Hold.ReservationID != "" {
			// The same hold, of the other sale.
			want.Hold.CreatedAt = got[i].Hold.CreatedAt
		}
		if got[i] != want {
			t.Errorf("reserve %d (%s of %s): batched %+v; alone %+v", i, r.ReservationID, r.UserID, got[i], want)
		}
		if got[i].Verdict != wantVerdicts[i] {
			t.Errorf("reserve %d (%s of %s) = %v; want %v", i, r.ReservationID, r.UserID, got[i].Verdict, wantVerdicts[i])
		}
	}
	f.unchanged("the sold-out batch", before)
}

// decideBatch sends rs to the gate as one batch, straight to the call
// the sale's queue would make, and returns their answers.
func decideBatch(f *fixture, rs []flashsale.GateReserve) []flashsale.GateOutcome {
	f.t.Helper()
	ps := make([]*pending, len(rs))
	for i, r := range rs {
		ps[i] = newPending(f.ctx, r)
	}
	f.g.decide(f.ctx, f.g.combiner(f.sale), ps)
	outs := make([]flashsale.GateOutcome, len(rs))
	for i, p := range ps {
		if p.err != nil {
			f.t.Fatalf("reserve %d (%s): %v", i, rs[i].ReservationID, p.err)
		}
		outs[i] = p.out
	}
	return outs
}

// TestSoldOutBatchFindsUnitsBack: units that come back after the gate
// saw the sale sell out (here restocked by another process's gate, which
// this one cannot know of) are sold to the next batch, never refused,
// and exactly once; once they are gone, batches are sold out again.
func TestSoldOutBatchFindsUnitsBack(t *testing.T) {
	f := newFixture(t, 2)
	first := f.expect(f.req("u1"), flashsale.VerdictWon)
	f.expect(f.req("u2"), flashsale.VerdictWon) // the gate reads the counter at zero
	if !f.g.combiner(f.sale).soldOut.Load() {
		t.Fatal("the gate did not note the sell-out")
	}
	calls := soldOutCalls(f.g)
	other := New(Config{Client: f.g.client, Prefix: f.g.prefix})
	if moved, err := other.Restock(f.ctx, f.sale, first.Hold.ReservationID, "test"); !moved || err != nil {
		t.Fatalf("Restock = %v, %v", moved, err)
	}

	outs := decideBatch(f, []flashsale.GateReserve{f.req("u3"), f.req("u4"), f.req("u5")})
	if want := []string{"3/true"}; !slices.Equal(calls(), want) {
		t.Fatalf("sold-out script calls %v; want %v: found the unit, decided nothing", calls(), want)
	}
	want := []flashsale.Verdict{flashsale.VerdictWon, flashsale.VerdictSoldOut, flashsale.VerdictSoldOut}
	for i, out := range outs {
		if out.Verdict != want[i] || out.Remaining != 0 {
			t.Errorf("reserve %d = %v with %d left; want %v with 0", i, out.Verdict, out.Remaining, want[i])
		}
	}
	if s := f.snapshot(); s.Counter != 0 || s.Held() != 2 || s.Drift() != 0 || s.AuditedCounter != 0 {
		t.Fatalf("snapshot %+v; want 2 held, none left, no drift", s)
	}

	outs = decideBatch(f, []flashsale.GateReserve{f.req("u6"), f.req("u7")})
	if want := []string{"3/true", "2/false"}; !slices.Equal(calls(), want) {
		t.Fatalf("sold-out script calls %v; want %v", calls(), want)
	}
	for i, out := range outs {
		if out.Verdict != flashsale.VerdictSoldOut {
			t.Errorf("reserve %d after the sell-out = %v; want sold_out", i, out.Verdict)
		}
	}
	if got := len(f.holds()); got != 2 {
		t.Fatalf("%d holds; want 2", got)
	}
}

// TestUndecidedReplyIsAnError feeds the reply readers replies the scripts
// never give, as Redis would send them (a script's return value): each
// leaves every reserve of the call with an error, never a verdict, and
// least of all a win or a sold-out. A reply that never came is the
// client's error, which fails closed as well.
func TestUndecidedReplyIsAnError(t *testing.T) {
	f := newFixture(t, 5)
	reply := func(lua string) []rueidis.RedisMessage {
		t.Helper()
		vals, err := f.do(f.g.client.B().Eval().Script("return " + lua).Numkeys(0).Build()).ToArray()
		if err != nil {
			t.Fatalf("EVAL return %s: %v", lua, err)
		}
		return vals
	}
	hold := "'" + strings.ReplaceAll(encodeHold(holdOf(new(flashsale.GateReserve))), sep, "\\031") + "'"
	batch := func(n int) []*pending {
		ps := make([]*pending, n)
		for i := range ps {
			ps[i] = newPending(f.ctx, f.req(fmt.Sprintf("u%d", i)))
		}
		return ps
	}
	for _, tc := range []struct {
		name    string
		reply   string
		n       int
		allowed codeSet
		ok      bool
	}{
		{"sold out, as the script answers it", "{'1', 0, '9'}", 1, batchCodes, true},
		{"a win and a replay", "{'1', 3, '23', " + hold + "}", 2, batchCodes, true},
		{"not loaded", "{'0'}", 3, batchCodes, true},
		{"one value, not '0'", "{'7'}", 2, batchCodes, false},
		{"units left, from the full script", "{'1'}", 2, batchCodes, false},
		{"nothing", "{}", 1, batchCodes, false},
		{"code 0: undecided", "{'1', 3, '1'}", 1, batchCodes, false},
		{"code 3: Go's to decide", "{'1', 3, '4'}", 1, batchCodes, false},
		{"code 4 in a batch", "{'1', 3, '5'}", 1, batchCodes, false},
		{"code 10", "{'1', 3, ';'}", 1, batchCodes, false},
		{"a win beside an unknown code", "{'1', 3, '2;'}", 2, batchCodes, false},
		{"fewer codes than reserves", "{'1', 3, '9'}", 2, batchCodes, false},
		{"a key on record without its hold", "{'1', 3, '3'}", 1, batchCodes, false},
		{"a hold without a key on record", "{'1', 3, '9', " + hold + "}", 1, batchCodes, false},
		{"an epoch that is no number", "{'x', 3, '9'}", 1, batchCodes, false},
		{"a win from the sold-out script", "{'1', 3, '2'}", 1, soldOutCodes, false},
		{"a duplicate id from the sold-out script", "{'1', 0, '0'}", 1, soldOutCodes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := batch(tc.n)
			answerBatch(live, reply(tc.reply), nil, tc.allowed)
			for i, p := range live {
				if tc.ok && p.err != nil {
					t.Errorf("reserve %d: %v; want a verdict", i, p.err)
				}
				if !tc.ok && (p.err == nil || p.out != (flashsale.GateOutcome{})) {
					t.Errorf("reserve %d = %+v, %v; want an error and no verdict", i, p.out, p.err)
				}
			}
		})
	}
	t.Run("a reply that never came", func(t *testing.T) {
		live := batch(2)
		answerBatch(live, nil, context.DeadlineExceeded, batchCodes)
		for i, p := range live {
			if flashsale.ErrorCode(p.err) != flashsale.CodeUnavailable || p.out != (flashsale.GateOutcome{}) {
				t.Errorf("reserve %d = %+v, %v; want unavailable and no verdict", i, p.out, p.err)
			}
		}
	})

	for _, tc := range []struct {
		reply string
		want  flashsale.Verdict // 0: an error
	}{
		{"{1, 4, '1'}", flashsale.VerdictWon},
		{"{8, 0, '1'}", flashsale.VerdictSoldOut},
		{"{4, 0, '0'}", flashsale.VerdictNotLoaded},
		{"{0, 4, '1'}", 0},
		{"{3, 4, '1'}", 0},
		{"{10, 4, '1'}", 0},
		{"{-2, 4, '1'}", 0},
		{"{2, 4, '1'}", 0}, // a key on record without its hold
		{"{1, 4}", 0},
		{"{'won', 4, '1'}", 0},
	} {
		r := f.req("alone")
		out, err := oneOutcome(&r, reply(tc.reply))
		if tc.want != 0 && (err != nil || out.Verdict != tc.want) {
			t.Errorf("one reserve, reply %s = %v, %v; want %v", tc.reply, out.Verdict, err, tc.want)
		}
		if tc.want == 0 && (err == nil || out != (flashsale.GateOutcome{})) {
			t.Errorf("one reserve, reply %s = %+v, %v; want an error and no verdict", tc.reply, out, err)
		}
	}
}

// TestApartBatchDecidesAsInOrder: a batch whose reserves share no
// reservation id, shopper, key, card or admission goes to the script marked
// apart, which then keeps no account of the batch's own wins; it must still
// decide each reserve as one at a time would, against what the sale held
// before the batch (a replay, a shopper and a card holding, a spent
// admission) and as its own wins use the units up.
func TestApartBatchDecidesAsInOrder(t *testing.T) {
	now := time.Now()
	req := func(sale, res, user, key, adm, card string, epoch int64) flashsale.GateReserve {
		return flashsale.GateReserve{SaleID: sale, ReservationID: res, UserID: user, Quantity: 1, Instrument: card,
			AdmissionID: adm, Epoch: epoch, IdempotencyKey: key, RequestHash: "h", Now: now}
	}
	batch := func(sale string) []flashsale.GateReserve {
		return []flashsale.GateReserve{
			req(sale, "r1", "u0", "k0", "a1", "", 1),   // replays r0
			req(sale, "r2", "u2", "k2", "a2", "c0", 1), // c0 holds r0
			req(sale, "r3", "u3", "k3", "a0", "", 1),   // a0 spent by r0
			req(sale, "r4", "u4", "k4", "a4", "", 9),   // stale epoch
			req(sale, "r5", "u5", "k5", "a5", "c5", 1), // won
			req(sale, "r6", "u6", "k6", "", "", 1),     // won
			req(sale, "r7", "u7", "k7", "a7", "", 1),   // won, the last unit
			req(sale, "r8", "u8", "k8", "a8", "c8", 1), // sold out
		}
	}
	want := []flashsale.Verdict{flashsale.VerdictReplayed, flashsale.VerdictLimitReached, flashsale.VerdictAdmissionUsed,
		flashsale.VerdictStaleEpoch, flashsale.VerdictWon, flashsale.VerdictWon, flashsale.VerdictWon, flashsale.VerdictSoldOut}

	f, seq := newFixture(t, 4), newFixture(t, 4)
	for _, x := range []*fixture{f, seq} {
		x.expect(req(x.sale, "r0", "u0", "k0", "a0", "c0", 1), flashsale.VerdictWon)
	}
	rs := batch(f.sale)
	ps := make([]*pending, len(rs))
	for i, r := range rs {
		ps[i] = newPending(f.ctx, r)
	}
	if !apart(ps) {
		t.Fatal("apart = false for reserves that share nothing")
	}
	got := decideBatch(f, rs)
	for i, r := range batch(seq.sale) {
		alone, err := seq.g.Reserve(seq.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if got[i].Verdict != want[i] || alone.Verdict != want[i] {
			t.Errorf("reserve %d (%s): batched %v, alone %v; want %v", i, r.ReservationID, got[i].Verdict, alone.Verdict, want[i])
		}
		if got[i].Remaining != alone.Remaining || got[i].Hold.ReservationID != alone.Hold.ReservationID {
			t.Errorf("reserve %d (%s): batched %+v; alone %+v", i, r.ReservationID, got[i], alone)
		}
	}
	if s := f.snapshot(); s.Counter != 0 || s.Held() != 4 || s.Drift() != 0 {
		t.Fatalf("snapshot %+v; want 4 held, none left, no drift", s)
	}
}

func TestApart(t *testing.T) {
	base := flashsale.GateReserve{SaleID: "s", ReservationID: "r", UserID: "u", IdempotencyKey: "k", Instrument: "c", AdmissionID: "a"}
	other := flashsale.GateReserve{SaleID: "s", ReservationID: "r2", UserID: "u2", IdempotencyKey: "k", Instrument: "c2", AdmissionID: "a2"}
	pair := func(b flashsale.GateReserve) []*pending {
		return []*pending{newPending(t.Context(), base), newPending(t.Context(), b)}
	}
	if !apart(pair(other)) {
		t.Fatal("two shoppers with the same key name (their own keys) are apart")
	}
	noCard := other
	noCard.Instrument, noCard.AdmissionID = "", ""
	if !apart([]*pending{newPending(t.Context(), noCard), newPending(t.Context(), flashsale.GateReserve{
		SaleID: "s", ReservationID: "r3", UserID: "u3", IdempotencyKey: "k"})}) {
		t.Fatal("reserves without cards or admissions are apart")
	}
	for name, change := range map[string]func(*flashsale.GateReserve){
		"reservation id": func(r *flashsale.GateReserve) { r.ReservationID = "r" },
		"shopper":        func(r *flashsale.GateReserve) { r.UserID = "u" },
		"card":           func(r *flashsale.GateReserve) { r.Instrument = "c" },
		"admission":      func(r *flashsale.GateReserve) { r.AdmissionID = "a" },
	} {
		b := other
		change(&b)
		if apart(pair(b)) {
			t.Errorf("two reserves sharing a %s are apart", name)
		}
	}
}
