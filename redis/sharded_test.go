package redis

import (
	"context"
	"fmt"
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
		AdmissionID: fmt.Sprintf("adm-%d", n), AdmissionExpires: now.Add(time.Minute), Epoch: 1,
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
