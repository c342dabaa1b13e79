package redis

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/gatetest"
	"github.com/flashsale/flashsale/internal/testenv"
)

// shardBackends are the Redis deployments the sharded tests run on: the
// single server and the cluster, where the shards spread over masters.
var shardBackends = []struct {
	name string
	open func(testing.TB) (rueidis.Client, string)
}{
	{"redis", testenv.Redis},
	{"cluster", testenv.RedisCluster},
}

func forEachShardBackend(t *testing.T, test func(t *testing.T, open func(testing.TB) (rueidis.Client, string))) {
	for _, b := range shardBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.open)
		})
	}
}

// newSharded returns a sharded gate whose every sale has shards shards.
func newSharded(t testing.TB, open func(testing.TB) (rueidis.Client, string), shards int) *ShardedGate {
	client, prefix := open(t)
	return NewSharded(ShardedConfig{Config: Config{Client: client, Prefix: prefix},
		Shards: func(context.Context, string) (int, error) { return shards, nil }})
}

// A sale of one shard is the plain gate's sale: the conformance suite
// passes through the sharded gate unchanged.
func TestShardedGateOneShard(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		gatetest.Exercise(t, gatetest.Harness{
			New: func(t *testing.T, now func() time.Time) flashsale.GateAdmin {
				client, prefix := open(t)
				return NewSharded(ShardedConfig{Config: Config{Client: client, Prefix: prefix, Now: now},
					Shards: func(context.Context, string) (int, error) { return 1, nil }})
			},
			Tamper: func(t *testing.T, g flashsale.GateAdmin, saleID string, delta int64) {
				rg := g.(*ShardedGate).Plain()
				if err := rg.client.Do(t.Context(), rg.client.B().Incrby().Key(rg.StockKey(saleID)).Increment(delta).Build()).Error(); err != nil {
					t.Fatalf("INCRBY: %v", err)
				}
			},
		})
	})
}

// shardFixture is a sale of several shards.
type shardFixture struct {
	t      *testing.T
	ctx    context.Context
	g      *ShardedGate
	sale   string
	shards int
	n      atomic.Int64
}

func newShardFixture(t *testing.T, open func(testing.TB) (rueidis.Client, string), shards int, initial int64) *shardFixture {
	f := &shardFixture{t: t, ctx: t.Context(), g: newSharded(t, open, shards), sale: flashsale.NewID("sale_"), shards: shards}
	if initial >= 0 {
		if ok, err := f.g.Load(f.ctx, f.sale, initial, 1, "test"); !ok || err != nil {
			t.Fatalf("Load = %v, %v", ok, err)
		}
	}
	return f
}

// user returns the i-th user id that routes to shard k.
func (f *shardFixture) user(k, i int) string {
	for j := 0; ; j++ {
		u := fmt.Sprintf("user-%d-%d", k, j)
		if flashsale.ShardOf(u, f.shards) == k {
			if i == 0 {
				return u
			}
			i--
		}
	}
}

func (f *shardFixture) req(user string) flashsale.GateReserve {
	n := f.n.Add(1)
	now := time.Now()
	return flashsale.GateReserve{
		SaleID: f.sale, ReservationID: fmt.Sprintf("res-%d", n), UserID: user, Quantity: 1,
		AdmissionID: fmt.Sprintf("adm-%d", n), Epoch: 1,
		IdempotencyKey: fmt.Sprintf("key-%d", n), RequestHash: "h", Now: now,
	}
}

func (f *shardFixture) expect(r flashsale.GateReserve, want flashsale.Verdict) flashsale.GateOutcome {
	f.t.Helper()
	out, err := f.g.Reserve(f.ctx, r)
	if err != nil {
		f.t.Fatalf("Reserve(%s): %v", r.UserID, err)
	}
	if out.Verdict != want {
		f.t.Fatalf("Reserve(%s) = %v; want %v", r.UserID, out.Verdict, want)
	}
	return out
}

func (f *shardFixture) snapshot() flashsale.GateSnapshot {
	f.t.Helper()
	s, err := f.g.Snapshot(f.ctx, f.sale)
	if err != nil {
		f.t.Fatalf("Snapshot: %v", err)
	}
	return s
}

// balanced fails unless the snapshot shows every unit accounted for: the
// shards' counters and the units in flight plus what they hold make the
// initial stock, and no shard's counter disagrees with its bookkeeping.
func (f *shardFixture) balanced(s flashsale.GateSnapshot, initial int64) {
	f.t.Helper()
	if !s.Loaded || s.Shards != f.shards || s.Initial != initial || s.Drift() != 0 || s.ShardDrift != 0 ||
		s.Counter != s.AuditedCounter || s.Unloaded != 0 || s.Counter+s.Held() != initial {
		f.t.Fatalf("snapshot %+v (drift %d); want every one of %d units accounted for", s, s.Drift(), initial)
	}
}

func (f *shardFixture) states() []flashsale.ShardState {
	f.t.Helper()
	st, err := f.g.ShardStates(f.ctx, f.sale)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func TestShardedLoadSplitsTheStock(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 3, 10)
		var allot []int64
		for _, s := range f.states() {
			allot = append(allot, s.Allotment)
		}
		if !slices.Equal(allot, []int64{4, 3, 3}) {
			t.Fatalf("allotments %v; want [4 3 3]", allot)
		}
		f.balanced(f.snapshot(), 10)
		// Each shard is a sale of the plain gate under a hash tag of its
		// own, so a cluster may put each on another master.
		slots := map[uint16]bool{}
		for k := range 3 {
			key := f.g.Plain().StockKey(shardSale(f.sale, k))
			if !strings.Contains(key, "{"+f.sale+":"+fmt.Sprint(k)+"}") {
				t.Fatalf("shard %d's stock key %q lacks its own hash tag", k, key)
			}
			slots[keySlot(key)] = true
		}
		if len(slots) != 3 {
			t.Fatalf("the shards share slots: %v", slots)
		}
		// Loading again changes nothing.
		if ok, err := f.g.Load(f.ctx, f.sale, 10, 1, "test"); ok || err != nil {
			t.Fatalf("second Load = %v, %v; want false, nil", ok, err)
		}
	})
}

func TestShardedDryShardPulls(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 3, 3) // one unit a shard
		// Three shoppers of shard 0: the first takes its unit, the others
		// pull the other shards' units over.
		for i := range 3 {
			f.expect(f.req(f.user(0, i)), flashsale.VerdictWon)
		}
		if out := f.expect(f.req(f.user(0, 3)), flashsale.VerdictSoldOut); out.Remaining != 0 {
			t.Fatalf("sold out with %d left", out.Remaining)
		}
		f.expect(f.req(f.user(1, 0)), flashsale.VerdictSoldOut)
		s := f.snapshot()
		f.balanced(s, 3)
		if s.Counter != 0 || s.Won != 3 || s.InFlight != 0 {
			t.Fatalf("after three wins: %+v", s)
		}
		audit, err := f.g.Audit(f.ctx, f.sale, 100)
		if err != nil {
			t.Fatal(err)
		}
		moved := map[string]int64{}
		for _, e := range audit {
			if strings.HasPrefix(e.Op, "transfer-") {
				moved[e.Op] += e.Delta
			}
		}
		if moved["transfer-out"] != -2 || moved["transfer-in"] != 2 {
			t.Fatalf("transfers audited %v; want 2 units out and in", moved)
		}
		// A restock on another shard: a shopper of the dry shard gets it.
		st := f.states()
		if st[0].Held() != 3 {
			t.Fatalf("shard 0 holds %d; want 3", st[0].Held())
		}
	})
}

func TestShardedRestockComesBackToAnyShopper(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 2, 2)
		a := f.expect(f.req(f.user(0, 0)), flashsale.VerdictWon).Hold
		f.expect(f.req(f.user(1, 0)), flashsale.VerdictWon)
		f.expect(f.req(f.user(1, 1)), flashsale.VerdictSoldOut)
		if moved, err := f.g.Restock(f.ctx, f.sale, a.ReservationID, "sweeper"); err != nil || !moved {
			t.Fatalf("Restock = %v, %v", moved, err)
		}
		if moved, err := f.g.Restock(f.ctx, f.sale, a.ReservationID, "sweeper"); err != nil || moved {
			t.Fatalf("second Restock = %v, %v; want false", moved, err)
		}
		// The unit is back on shard 0; a shopper of shard 1 pulls it.
		f.expect(f.req(f.user(1, 1)), flashsale.VerdictWon)
		f.balanced(f.snapshot(), 2)
	})
}

// One shopper firing 50 reserves at once wins at most once: the shopper's
// every reserve goes to one shard, whose script checks the buyer and
// decrements in one step.
func TestShardedOneShopperWinsOnce(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 3, 30)
		const attempts = 50
		reqs := make([]flashsale.GateReserve, attempts)
		for i := range reqs {
			reqs[i] = f.req("greedy")
		}
		var won, limited, other atomic.Int64
		crowd(attempts, func(i int) {
			out, err := f.g.Reserve(f.ctx, reqs[i])
			switch {
			case err != nil:
				t.Error(err)
			case out.Verdict == flashsale.VerdictWon:
				won.Add(1)
			case out.Verdict == flashsale.VerdictLimitReached:
				limited.Add(1)
			default:
				other.Add(1)
			}
		})
		if won.Load() != 1 || limited.Load() != attempts-1 || other.Load() != 0 {
			t.Fatalf("%d won, %d limit reached, %d other; want 1, %d, 0", won.Load(), limited.Load(), other.Load(), attempts-1)
		}
		s := f.snapshot()
		f.balanced(s, 30)
		if s.Won != 1 {
			t.Fatalf("%+v; want one unit won", s)
		}
	})
}

// crowd runs fn(i) for i in [0, n) on n goroutines released together.
func crowd(n int, fn func(i int)) {
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

// A sharded sale under a crowd sells exactly its stock: every unit goes,
// wherever it started, and none is left stranded on a shard or in flight.
func TestShardedCrowdSellsExactlyItsStock(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		const shoppers, units = 1000, 100
		f := newShardFixture(t, open, 3, units)
		reqs := make([]flashsale.GateReserve, shoppers)
		for i := range reqs {
			reqs[i] = f.req(fmt.Sprintf("crowd-%d", i))
		}
		var won, soldOut atomic.Int64
		crowd(shoppers, func(i int) {
			out, err := f.g.Reserve(f.ctx, reqs[i])
			switch {
			case err != nil:
				t.Error(err)
			case out.Verdict == flashsale.VerdictWon:
				won.Add(1)
			case out.Verdict == flashsale.VerdictSoldOut:
				soldOut.Add(1)
			default:
				t.Errorf("verdict %v", out.Verdict)
			}
		})
		if won.Load() != units || soldOut.Load() != shoppers-units {
			t.Fatalf("%d won, %d sold out; want %d and %d", won.Load(), soldOut.Load(), units, shoppers-units)
		}
		s := f.snapshot()
		f.balanced(s, units)
		if s.Counter != 0 || s.InFlight != 0 || s.Won != units {
			t.Fatalf("after the crowd: %+v; want nothing left, nothing in flight", s)
		}
		for _, st := range f.states() {
			if st.Counter != 0 || st.Sending != 0 {
				t.Fatalf("shard %d stranded units: %+v", st.Shard, st)
			}
		}
		c, err := f.g.Consolidate(f.ctx, f.sale)
		if err != nil || c.Landed+c.Refunded+c.Waiting+c.Moved != 0 || len(c.Lost) != 0 {
			t.Fatalf("Consolidate after the crowd = %+v, %v; want nothing to do", c, err)
		}
	})
}

// The per-instrument limit across shards: two shoppers on different
// shards with one card; the second win is voided at once (its units,
// key and admission given back) and answered limit_reached.
func TestShardedInstrumentClaimAcrossShards(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 4, 10)
		a, b := f.user(0, 0), f.user(1, 0)
		ra := f.req(a)
		ra.Instrument = "card-1"
		held := f.expect(ra, flashsale.VerdictWon).Hold
		rb := f.req(b)
		rb.Instrument = "card-1"
		f.expect(rb, flashsale.VerdictLimitReached)
		s := f.snapshot()
		f.balanced(s, 10)
		if s.Held() != 1 {
			t.Fatalf("%+v; want only a's unit held", s)
		}
		if _, found, err := f.g.Lookup(f.ctx, f.sale, b, rb.IdempotencyKey); found || err != nil {
			t.Fatalf("b's refused key is remembered: %v, %v", found, err)
		}
		// Another card is another instrument.
		rb2 := f.req(b)
		rb2.Instrument, rb2.AdmissionID = "card-2", rb.AdmissionID // the refused win gave the admission back
		f.expect(rb2, flashsale.VerdictWon)
		// Once a's hold is over, card-1 may buy again, on any shard.
		if moved, err := f.g.Restock(f.ctx, f.sale, held.ReservationID, "sweeper"); err != nil || !moved {
			t.Fatalf("Restock = %v, %v", moved, err)
		}
		rc := f.req(f.user(2, 0))
		rc.Instrument = "card-1"
		f.expect(rc, flashsale.VerdictWon)
		f.balanced(f.snapshot(), 10)
	})
}

// A transfer cut off after its debit leaves its units in flight, counted
// by the snapshot; Consolidate lands them.
func TestShardedTransferCutAfterDebit(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 2, 10) // 5 and 5
		for i := range 5 {
			f.expect(f.req(f.user(0, i)), flashsale.VerdictWon)
		}
		var cut atomic.Bool
		cut.Store(true)
		f.g.afterDebit = func(string) bool { return cut.Load() }
		// Shard 0 is dry: the pull debits shard 1 and dies there.
		if _, err := f.g.Reserve(f.ctx, f.req(f.user(0, 5))); err == nil {
			t.Fatal("Reserve with its transfer cut off = nil error")
		}
		s := f.snapshot()
		f.balanced(s, 10)
		if s.InFlight == 0 || s.Counter != 5 {
			t.Fatalf("%+v; want the debited units in flight and counted", s)
		}
		st := f.states()
		if st[1].Sending != s.InFlight || st[0].Counter+st[1].Counter != 5-s.InFlight {
			t.Fatalf("shards %+v; want shard 1 sending %d", st, s.InFlight)
		}
		cut.Store(false)
		c, err := f.g.Consolidate(f.ctx, f.sale)
		if err != nil || c.Landed != s.InFlight || c.Waiting != 0 || c.Refunded != 0 {
			t.Fatalf("Consolidate = %+v, %v; want %d units landed", c, err, s.InFlight)
		}
		s = f.snapshot()
		f.balanced(s, 10)
		if s.InFlight != 0 {
			t.Fatalf("%+v; want nothing in flight", s)
		}
		// A second pass finds nothing to finish, and every unit sells.
		if c, err := f.g.Consolidate(f.ctx, f.sale); err != nil || c.Landed+c.Refunded+c.Waiting != 0 {
			t.Fatalf("second Consolidate = %+v, %v", c, err)
		}
		for i := range 5 {
			f.expect(f.req(f.user(0, 5+i)), flashsale.VerdictWon)
		}
		f.expect(f.req(f.user(1, 0)), flashsale.VerdictSoldOut)
	})
}

// A credit repeated under one transfer id lands once.
func TestShardedCreditIsIdempotent(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 2, 10)
	f.g.afterDebit = func(string) bool { return true }
	ok, err := f.g.transfer(f.ctx, f.sale, 0, 1, 3, f.inc(), "test")
	if ok || err == nil {
		t.Fatalf("transfer cut after its debit = %v, %v", ok, err)
	}
	f.g.afterDebit = nil
	reads, err := f.g.read(f.ctx, f.sale, 2)
	if err != nil || len(reads[0].pending) != 1 {
		t.Fatalf("reads %+v, %v; want one debit in flight", reads, err)
	}
	d := reads[0].pending[0]
	for range 3 {
		if _, err := f.g.finish(f.ctx, f.sale, d, reads[0].inc, "test"); err != nil {
			t.Fatal(err)
		}
	}
	st := f.states()
	if st[0].Allotment != 2 || st[1].Allotment != 8 || st[0].Counter != 2 || st[1].Counter != 8 || st[0].Sending != 0 {
		t.Fatalf("after one transfer finished three times: %+v", st)
	}
	f.balanced(f.snapshot(), 10)
}

func (f *shardFixture) inc() string {
	f.t.Helper()
	inc, err := f.g.layout(f.ctx, f.sale, f.shards, 0, "")
	if err != nil {
		f.t.Fatal(err)
	}
	return inc
}

// Writes behind the gate to two shards that cancel out still show, and
// those shards sell nothing.
func TestShardedTamperShowsPerShard(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 2, 10)
	c := f.g.Plain().client
	for k, delta := range []int64{2, -2} {
		if err := c.Do(f.ctx, c.B().Incrby().Key(f.g.Plain().StockKey(shardSale(f.sale, k))).Increment(delta).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	s := f.snapshot()
	if s.Drift() != 0 || s.ShardDrift != 8 {
		t.Fatalf("%+v (drift %d); want drift 0 and ShardDrift 8 (|2|+|2| for each shard)", s, s.Drift())
	}
	f.expect(f.req(f.user(0, 0)), flashsale.VerdictPaused)
	f.expect(f.req(f.user(1, 0)), flashsale.VerdictPaused)
}

// shardKeyNames are the names of a shard's keys (and of layout 1's, which
// must stay missing).
var shardKeyNames = []string{"ctr", "meta", "book", "audit", "stock", "held", "buyers", "instr", "idem", "adm", "xout", "xpend", "xin", "xpeer", "claims"}

// dumpShard returns shard k's keys as DUMP serialises them ("" for a
// missing key).
func (f *shardFixture) dumpShard(k int) map[string]string {
	f.t.Helper()
	c := f.g.Plain().client
	out := map[string]string{}
	for _, name := range shardKeyNames {
		key := f.g.Plain().key(shardSale(f.sale, k), name)
		v, err := c.Do(f.ctx, c.B().Dump().Key(key).Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			f.t.Fatalf("DUMP %s: %v", key, err)
		}
		out[key] = v
	}
	return out
}

// failOver makes shard k look like a promoted replica that missed every
// write since dump: its keys put back as they were, and its meta naming
// the master that wrote them, which is gone.
func (f *shardFixture) failOver(k int, dump map[string]string) {
	f.t.Helper()
	c := f.g.Plain().client
	for key, v := range dump {
		var err error
		if v == "" {
			err = c.Do(f.ctx, c.B().Del().Key(key).Build()).Error()
		} else {
			err = c.Do(f.ctx, c.B().Restore().Key(key).Ttl(0).SerializedValue(v).Replace().Build()).Error()
		}
		if err != nil {
			f.t.Fatalf("put back %s: %v", key, err)
		}
	}
	meta := f.g.Plain().key(shardSale(f.sale, k), "meta")
	if err := c.Do(f.ctx, c.B().Hset().Key(meta).FieldValue().FieldValue("node", "the-master-that-died").Build()).Error(); err != nil {
		f.t.Fatal(err)
	}
}

// A shard that fails over is lost: its shoppers are told to come back, the
// other shards keep selling, and it is rebuilt from the record, not from
// the promoted replica's counter (which missed decrements), before it
// sells again.
func TestShardedRebuildLostShard(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		var lost atomic.Int64
		lost.Store(-1)
		f := newShardFixture(t, open, 3, 30) // 10 a shard
		f.g.lost = func(sale string, k int) { lost.Store(int64(k)) }
		var record []flashsale.Hold
		win := func(user string, epoch int64) flashsale.GateOutcome {
			r := f.req(user)
			r.Epoch = epoch
			out := f.expect(r, flashsale.VerdictWon)
			record = append(record, out.Hold)
			return out
		}
		for k := range 3 {
			for i := range 2 {
				win(f.user(k, i), 1)
			}
		}
		before := f.dumpShard(1)
		for i := range 3 {
			win(f.user(1, 2+i), 1)
		}
		win(f.user(0, 2), 1)
		// Units on their way to shard 1 when it fails.
		f.g.afterDebit = func(string) bool { return true }
		if ok, err := f.g.transfer(f.ctx, f.sale, 2, 1, 2, f.inc(), "test"); ok || err == nil {
			t.Fatalf("transfer cut after its debit = %v, %v", ok, err)
		}
		f.g.afterDebit = nil
		f.failOver(1, before)

		f.expect(f.req(f.user(1, 9)), flashsale.VerdictPaused)
		if lost.Load() != 1 {
			t.Fatalf("Lost was told of shard %d; want 1", lost.Load())
		}
		win(f.user(0, 3), 1) // the others keep selling
		s := f.snapshot()
		if s.Unloaded != 1 || !s.Loaded {
			t.Fatalf("%+v; want one shard unloaded", s)
		}
		c, err := f.g.Consolidate(f.ctx, f.sale)
		if err != nil || !slices.Equal(c.Lost, []int{1}) || c.Waiting != 2 {
			t.Fatalf("Consolidate = %+v, %v; want shard 1 lost and 2 units waiting for it", c, err)
		}

		// The record knows every hold; epoch 2 fences its writes in flight.
		if err := f.g.RebuildShards(f.ctx, f.sale, []int{1}, 30, 2, record, nil, "test rebuild"); err != nil {
			t.Fatal(err)
		}
		st := f.states()
		if !st[1].Loaded || !st[1].Paused || st[1].Held() != 5 {
			t.Fatalf("rebuilt shard %+v; want loaded, paused, holding 5", st[1])
		}
		s = f.snapshot()
		f.balanced(s, 30)
		if s.InFlight != 2 || s.Held() != int64(len(record)) {
			t.Fatalf("%+v; want 2 units in flight and %d held", s, len(record))
		}
		f.expect(f.req(f.user(1, 9)), flashsale.VerdictPaused)
		if err := f.g.ResumeShards(f.ctx, f.sale, []int{1}, "test"); err != nil {
			t.Fatal(err)
		}
		// The transfer lands on the rebuilt shard, once.
		if c, err := f.g.Consolidate(f.ctx, f.sale); err != nil || c.Landed != 2 || len(c.Lost) != 0 {
			t.Fatalf("Consolidate = %+v, %v; want the 2 units landed", c, err)
		}
		f.balanced(f.snapshot(), 30)

		// Admissions: the kept shards still take those of epoch 1; the
		// rebuilt one, whose spent admissions were lost, only epoch 2's.
		if out := win(f.user(2, 5), 1); out.Epoch != 2 {
			t.Fatalf("a kept shard's win at epoch %d; want 2 (the record's)", out.Epoch)
		}
		stale := f.req(f.user(1, 9))
		f.expect(stale, flashsale.VerdictStaleEpoch)
		win(f.user(1, 9), 2)

		// Every unit sells, and no more.
		sold := int64(len(record))
		for i := 0; ; i++ {
			r := f.req(fmt.Sprintf("tail-%d", i))
			r.Epoch = 2
			out, err := f.g.Reserve(f.ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if out.Verdict == flashsale.VerdictSoldOut {
				break
			}
			if out.Verdict != flashsale.VerdictWon {
				t.Fatalf("tail reserve: %v", out.Verdict)
			}
			sold++
		}
		s = f.snapshot()
		f.balanced(s, 30)
		if sold != 30 || s.Counter != 0 {
			t.Fatalf("sold %d of 30; %+v", sold, s)
		}
	})
}

func TestShardedRebuildShardsRefuses(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 3, 3)
	var record []flashsale.Hold
	for i := range 3 {
		record = append(record, f.expect(f.req(f.user(1, i)), flashsale.VerdictWon).Hold)
	}
	// Shard 1 took every unit (two by pulls); a rebuild of shard 1 alone
	// leaves it what the others do not have: 3 units, its 3 holds.
	f.failOver(1, f.dumpShard(1))
	if err := f.g.RebuildShards(f.ctx, f.sale, []int{1}, 3, 2, record, nil, "test"); err != nil {
		t.Fatal(err)
	}
	f.balanced(f.snapshot(), 3)
	// Holds that take more than the lost shard's share are refused.
	extra := append(slices.Clone(record), flashsale.Hold{ReservationID: "res-x", UserID: f.user(1, 7), Quantity: 1})
	if err := f.g.RebuildShards(f.ctx, f.sale, []int{1}, 3, 3, extra, nil, "test"); err == nil {
		t.Fatal("RebuildShards with more held than the shard can have = nil")
	}
	// Another lost shard must be rebuilt with it.
	f.failOver(2, f.dumpShard(2))
	if err := f.g.RebuildShards(f.ctx, f.sale, []int{1}, 3, 4, record, nil, "test"); err == nil {
		t.Fatal("RebuildShards with another shard lost too = nil")
	}
	if err := f.g.RebuildShards(f.ctx, f.sale, []int{1, 2}, 3, 5, record, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.g.ResumeShards(f.ctx, f.sale, []int{1, 2}, "test"); err != nil {
		t.Fatal(err)
	}
	f.balanced(f.snapshot(), 3)
}

// A rebuild hands out no turn on a sale split over shards: a lost shard
// rebuilt alone gets its shoppers' spent admissions back from the record
// while the kept shards keep theirs, and a full rebuild puts each spend on
// its shopper's shard. A turn taken by a hold that has ended (cancelled,
// expired) stays taken, at the new epoch too.
func TestShardedRebuildHandsOutNoTurn(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 3, 9)
		before := f.dumpShard(1)
		var (
			holds []flashsale.Hold
			spent []flashsale.SpentAdmission
			taken []flashsale.GateReserve // a request of each shopper who took a turn
		)
		for k := range 3 {
			ended := f.req(f.user(k, 0))
			out := f.expect(ended, flashsale.VerdictWon)
			if moved, err := f.g.Restock(f.ctx, f.sale, out.Hold.ReservationID, "test"); err != nil || !moved {
				t.Fatalf("Restock = %v, %v", moved, err)
			}
			live := f.req(f.user(k, 1))
			holds = append(holds, f.expect(live, flashsale.VerdictWon).Hold)
			for _, r := range []flashsale.GateReserve{ended, live} {
				spent = append(spent, flashsale.SpentAdmission{UserID: r.UserID, AdmissionID: r.AdmissionID})
				taken = append(taken, r)
			}
		}
		check := func(stage string, epochs ...int64) {
			t.Helper()
			for _, e := range epochs {
				for _, r := range taken {
					again := f.again(r)
					again.Epoch = e
					again.IdempotencyKey += fmt.Sprintf("-%s-%d", stage, e)
					if out, err := f.g.Reserve(f.ctx, again); err != nil || out.Verdict != flashsale.VerdictAdmissionUsed {
						t.Fatalf("%s: %s (shard %d) at epoch %d, with the admission it spent: %v, %v; want admission_used",
							stage, r.UserID, flashsale.ShardOf(r.UserID, 3), e, out.Verdict, err)
					}
				}
			}
		}
		check("before", 1)

		// Shard 1's master fails over to a replica that saw none of it.
		f.failOver(1, before)
		if err := f.g.RebuildShards(f.ctx, f.sale, []int{1}, 9, 2, holds, spent, "test"); err != nil {
			t.Fatal(err)
		}
		if err := f.g.ResumeShards(f.ctx, f.sale, []int{1}, "test"); err != nil {
			t.Fatal(err)
		}
		f.balanced(f.snapshot(), 9)
		// The kept shards still take epoch 1's admissions; all take 2's.
		check("after shard 1's rebuild", 2)
		for _, r := range taken {
			if flashsale.ShardOf(r.UserID, 3) != 1 {
				again := f.again(r)
				again.IdempotencyKey += "-old-epoch"
				f.expect(again, flashsale.VerdictAdmissionUsed)
			}
		}

		if err := f.g.Rebuild(f.ctx, f.sale, 9, 3, holds, spent, "test"); err != nil {
			t.Fatal(err)
		}
		if err := f.g.SetPaused(f.ctx, f.sale, false, "test"); err != nil {
			t.Fatal(err)
		}
		f.balanced(f.snapshot(), 9)
		check("after a full rebuild", 3)
		// A shopper who never took a turn still may.
		fresh := f.req(f.user(1, 5))
		fresh.Epoch = 3
		f.expect(fresh, flashsale.VerdictWon)
	})
}

// A full rebuild puts each hold back on its user's shard, with its
// instrument's claim, and splits what is left.
func TestShardedRebuild(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		f := newShardFixture(t, open, 3, -1) // never loaded
		var holds []flashsale.Hold
		for k := range 3 {
			h := flashsale.Hold{ReservationID: fmt.Sprintf("res-r%d", k), UserID: f.user(k, 0), Quantity: k + 1,
				IdempotencyKey: "key", RequestHash: "h", Instrument: fmt.Sprintf("card-%d", k), CreatedAt: time.Now()}
			holds = append(holds, h)
		}
		if err := f.g.Rebuild(f.ctx, f.sale, 12, 3, holds, nil, "test"); err != nil {
			t.Fatal(err)
		}
		s := f.snapshot()
		f.balanced(s, 12)
		if !s.Paused || s.Epoch != 3 || s.Counter != 6 || s.Held() != 6 {
			t.Fatalf("%+v; want paused at epoch 3, 6 left, 6 held", s)
		}
		for k, st := range f.states() {
			if st.Held() != int64(k+1) || st.Counter != 2 {
				t.Fatalf("shard %d: %+v; want its user's %d units held and 2 left", k, st, k+1)
			}
		}
		if err := f.g.SetPaused(f.ctx, f.sale, false, "test"); err != nil {
			t.Fatal(err)
		}
		r := f.req(f.user(0, 0))
		r.Epoch, r.IdempotencyKey = 3, "key"
		if out := f.expect(r, flashsale.VerdictReplayed); out.Hold.ReservationID != "res-r0" {
			t.Fatalf("replay = %+v", out.Hold)
		}
		// card-2's claim came back with its hold.
		r = f.req(f.user(0, 1))
		r.Epoch, r.Instrument = 3, "card-2"
		f.expect(r, flashsale.VerdictLimitReached)
		holdsBack, err := f.g.Holds(f.ctx, f.sale)
		if err != nil || len(holdsBack) != 3 {
			t.Fatalf("Holds = %v, %v", holdsBack, err)
		}
	})
}

// While shoppers win and give back and transfers move units between
// shards, every snapshot accounts for every unit.
func TestShardedSnapshotsBalanceUnderChurn(t *testing.T) {
	forEachShardBackend(t, func(t *testing.T, open func(testing.TB) (rueidis.Client, string)) {
		const units, workers, rounds = 6, 12, 60
		f := newShardFixture(t, open, 3, units)
		stop := make(chan struct{})
		var watched sync.WaitGroup
		var bad atomic.Value
		var snaps atomic.Int64
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
				if err != nil {
					bad.Store(err)
					return
				}
				if s.Drift() != 0 || s.ShardDrift != 0 || s.Counter+s.Held() != units || s.Counter < 0 {
					bad.Store(fmt.Errorf("snapshot %+v (drift %d) does not balance", s, s.Drift()))
					return
				}
				snaps.Add(1)
			}
		}()
		var wins atomic.Int64
		crowd(workers, func(w int) {
			for i := range rounds {
				out, err := f.g.Reserve(f.ctx, f.req(fmt.Sprintf("churn-%d-%d", w, i)))
				if err != nil {
					bad.Store(err)
					return
				}
				if out.Verdict != flashsale.VerdictWon {
					continue
				}
				wins.Add(1)
				if moved, err := f.g.Restock(f.ctx, f.sale, out.Hold.ReservationID, "test"); err != nil || !moved {
					bad.Store(fmt.Errorf("restock: %v, %v", moved, err))
					return
				}
			}
		})
		close(stop)
		watched.Wait()
		if err := bad.Load(); err != nil {
			t.Fatal(err)
		}
		s := f.snapshot()
		f.balanced(s, units)
		if s.Counter != units || s.Won != wins.Load() || wins.Load() < rounds {
			t.Fatalf("after churn: %+v, %d wins, %d snapshots", s, wins.Load(), snaps.Load())
		}
		audit, err := f.g.Audit(f.ctx, f.sale, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		transfers := 0
		for _, e := range audit {
			if e.Op == "transfer-in" {
				transfers++
			}
		}
		if transfers == 0 {
			t.Fatal("churn moved no units between shards; the test proves nothing")
		}
		t.Logf("%d wins, %d transfers, %d snapshots", wins.Load(), transfers, snaps.Load())
	})
}

// A shard whose Redis does not answer stops only its own shoppers: they
// are told to come back, the snapshot counts it unloaded (so the warmer
// does not fail the sale closed), and it is not taken for lost.
func TestShardedUnreachableShard(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 2, 10)
	down := testenv.StartRedisServer(t)
	// A second gate whose shard 1 keys are on a server that is down:
	// the plain gate routes by client, so a test client that sends
	// shard 1's keys elsewhere stands in for a dead master.
	client, prefix := testenv.Redis(t)
	split := &splitClient{Client: client, other: mustClient(t, down.Addr()), tag: "{" + f.sale + ":1}"}
	g := NewSharded(ShardedConfig{Config: Config{Client: split, Prefix: prefix},
		Shards: func(context.Context, string) (int, error) { return 2, nil }})
	f.g = g
	if ok, err := g.Load(f.ctx, f.sale, 10, 1, "test"); !ok || err != nil {
		t.Fatalf("Load = %v, %v", ok, err)
	}
	down.Kill()
	// Callers bound every gate call (purchase: GateTimeout), and rueidis
	// retries a read-only script on a dead node until the deadline.
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	f.ctx = ctx
	f.expect(f.req(f.user(1, 0)), flashsale.VerdictPaused)
	f.expect(f.req(f.user(0, 0)), flashsale.VerdictWon)
	lctx, lcancel := context.WithTimeout(f.ctx, time.Second)
	defer lcancel()
	if _, found, err := g.Lookup(lctx, f.sale, f.user(1, 0), "k"); found || err != nil {
		t.Fatalf("Lookup on the shard that is down = %v, %v; want not found, nil", found, err)
	}
	s := f.snapshot()
	if !s.Loaded || s.Unloaded != 1 {
		t.Fatalf("%+v; want loaded with one shard unloaded", s)
	}
	c, err := g.Consolidate(f.ctx, f.sale)
	if err != nil || len(c.Lost) != 0 {
		t.Fatalf("Consolidate = %+v, %v; want no shard lost (one is only unreachable)", c, err)
	}
	if st := f.states(); !st[1].Unreachable || st[1].Loaded {
		t.Fatalf("shard 1 %+v; want unreachable", st[1])
	}
}

// splitClient sends the commands whose first key carries tag to other.
type splitClient struct {
	rueidis.Client
	other rueidis.Client
	tag   string
}

func (c *splitClient) pick(cmd rueidis.Completed) rueidis.Client {
	for _, a := range cmd.Commands() {
		if strings.Contains(a, c.tag) {
			return c.other
		}
	}
	return c.Client
}

func (c *splitClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return c.pick(cmd).Do(ctx, cmd)
}

func mustClient(t *testing.T, addr string) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
		Dialer: net.Dialer{Timeout: 200 * time.Millisecond}, ConnWriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A claim whose release was cut off (the hold went back, the claim
// stayed) blocks the card only until the next consolidation.
func TestShardedStaleClaimIsDropped(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 3, 10)
	a := f.req(f.user(0, 0))
	a.Instrument = "card-9"
	held := f.expect(a, flashsale.VerdictWon).Hold
	// The plain gate's restock gives the units back without the claim's
	// release, as a process that died between the two would.
	if moved, err := f.g.Plain().Restock(f.ctx, shardSale(f.sale, 0), held.ReservationID, "test"); err != nil || !moved {
		t.Fatalf("Restock = %v, %v", moved, err)
	}
	b := f.req(f.user(1, 0))
	b.Instrument = "card-9"
	f.expect(b, flashsale.VerdictLimitReached)
	if _, err := f.g.Consolidate(f.ctx, f.sale); err != nil {
		t.Fatal(err)
	}
	f.expect(f.again(b), flashsale.VerdictWon)
	f.balanced(f.snapshot(), 10)
}

// again is r retried: same key and admission, a new reservation id.
func (f *shardFixture) again(r flashsale.GateReserve) flashsale.GateReserve {
	r.ReservationID = fmt.Sprintf("res-%d", f.n.Add(1))
	return r
}

// A failover may empty the layout's slot as well as a shard's: the rebuilt
// shard takes the kept shards' incarnation, so units still move between
// them.
func TestShardedRebuildKeepsIncarnation(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 2, 4) // 2 and 2
	c := f.g.Plain().client
	keys := []string{f.g.Plain().key(f.sale, "layout")}
	for _, name := range shardKeyNames {
		keys = append(keys, f.g.Plain().key(shardSale(f.sale, 1), name))
	}
	if err := c.Do(f.ctx, c.B().Del().Key(keys...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if c, err := f.g.Consolidate(f.ctx, f.sale); err != nil || !slices.Equal(c.Lost, []int{1}) {
		t.Fatalf("Consolidate = %+v, %v; want shard 1 lost", c, err)
	}
	if err := f.g.RebuildShards(f.ctx, f.sale, []int{1}, 4, 2, nil, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.g.ResumeShards(f.ctx, f.sale, []int{1}, "test"); err != nil {
		t.Fatal(err)
	}
	// Shard 0's third and fourth shoppers need shard 1's units.
	for i := range 4 {
		r := f.req(f.user(0, i))
		r.Epoch = 2
		f.expect(r, flashsale.VerdictWon)
	}
	f.balanced(f.snapshot(), 4)
}

// Drop forgets every shard, its ledgers and claims, and the layout; the
// sale then loads afresh.
func TestShardedDrop(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 3, 6)
	r := f.req(f.user(0, 0))
	r.Instrument = "card"
	f.expect(r, flashsale.VerdictWon)
	for i := range 3 { // the third pulls
		f.expect(f.req(f.user(1, i)), flashsale.VerdictWon)
	}
	if err := f.g.Drop(f.ctx, f.sale); err != nil {
		t.Fatal(err)
	}
	if s := f.snapshot(); s != (flashsale.GateSnapshot{}) {
		t.Fatalf("Snapshot after Drop = %+v", s)
	}
	c := f.g.Plain().client
	keys, err := c.Do(f.ctx, c.B().Keys().Pattern(f.g.Plain().prefix+"{"+f.sale+"*").Build()).AsStrSlice()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left after Drop: %v, %v", keys, err)
	}
	if ok, err := f.g.Load(f.ctx, f.sale, 6, 1, "test"); !ok || err != nil {
		t.Fatalf("Load after Drop = %v, %v", ok, err)
	}
	f.balanced(f.snapshot(), 6)
}

// TestShardedLayoutOneShardMovesNothing: a shard whose layout 1 stock key
// exists beside its counter (a server of layout 1 rebuilt it) is not
// usable to this layout's transfers either: it reads as not loaded, gives
// no units, and takes none, so no unit leaves or enters a counter that
// layout 1's servers may be selling from.
func TestShardedLayoutOneShardMovesNothing(t *testing.T) {
	f := newShardFixture(t, testenv.Redis, 2, 10)
	c := f.g.Plain().client
	ctr := func(k int) string {
		t.Helper()
		v, err := c.Do(f.ctx, c.B().Get().Key(f.g.ShardStockKey(f.sale, k)).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := c.Do(f.ctx, c.B().Set().Key(f.g.Plain().keys(shardSale(f.sale, 0)).legacy).Value("5").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if st := f.states(); st[0].Loaded || !st[1].Loaded {
		t.Fatalf("shard states %+v; want shard 0 not loaded, shard 1 loaded", st)
	}
	before0, before1 := ctr(0), ctr(1)
	inc := f.inc()
	for _, dir := range [][2]int{{0, 1}, {1, 0}} {
		moved, err := f.g.transfer(f.ctx, f.sale, dir[0], dir[1], 2, inc, "test")
		if err != nil || moved {
			t.Fatalf("transfer %d to %d = %v, %v; want nothing moved", dir[0], dir[1], moved, err)
		}
	}
	if got := ctr(0); got != before0 {
		t.Fatalf("shard 0's counter %s, was %s: a transfer moved units in or out", got, before0)
	}
	// Shard 1 gave 2 units that shard 0 would not take: they wait in
	// flight, counted by the snapshot, not credited anywhere.
	if got := ctr(1); got != "3" || before1 != "5" {
		t.Fatalf("shard 1's counter %s, was %s; want 2 units in flight", got, before1)
	}
}
