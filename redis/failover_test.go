package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestForeignNodeFailsClosed: a counter whose meta names another node than
// the one serving it (what a promoted replica looks like, or a slot moved
// elsewhere) is not trusted. Simulated on the shared cluster by rewriting
// the node id; TestFailoverFailsClosed does it for real.
func TestForeignNodeFailsClosed(t *testing.T) {
	g := newClusterGate(t, nil)
	ctx := t.Context()
	sale := flashsale.NewID("sale_")
	if ok, err := g.Load(ctx, sale, 5, 1, "test"); !ok || err != nil {
		t.Fatalf("Load = %v, %v", ok, err)
	}
	r := flashsale.GateReserve{SaleID: sale, ReservationID: "res-1", UserID: "u1", Quantity: 1, Epoch: 1,
		IdempotencyKey: "k1", RequestHash: "h", Now: time.Now()}
	won, err := g.Reserve(ctx, r)
	if err != nil || won.Verdict != flashsale.VerdictWon {
		t.Fatalf("Reserve = %v, %v", won.Verdict, err)
	}
	meta := g.key(sale, "meta")
	node, err := g.client.Do(ctx, g.client.B().Hget().Key(meta).Field("node").Build()).ToString()
	if err != nil || len(node) != 40 {
		t.Fatalf("meta's node = %q, %v; want the 40-character id of the master", node, err)
	}
	if err := g.client.Do(ctx, g.client.B().Hset().Key(meta).FieldValue().FieldValue("node", "a-node-that-is-gone").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	assertUntrusted(t, g, sale, r)

	// Only a rebuild from the record trusts it again.
	if err := g.Rebuild(ctx, sale, 5, 2, []flashsale.Hold{won.Hold}, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if err := g.SetPaused(ctx, sale, false, "test"); err != nil {
		t.Fatal(err)
	}
	r2 := r
	r2.ReservationID, r2.UserID, r2.IdempotencyKey, r2.Epoch = "res-2", "u2", "k2", 2
	if out, err := g.Reserve(ctx, r2); err != nil || out.Verdict != flashsale.VerdictWon || out.Remaining != 3 {
		t.Fatalf("after the rebuild Reserve = %+v, %v; want won with 3 left", out, err)
	}
}

// assertUntrusted checks that the gate treats the sale as not loaded, in
// every path that reads or moves its counter, and does not reload it.
// A sale whose keys are all gone (the replica had not even received the
// load) is simply not loaded: Load may load it afresh, and only the
// record's check (control) keeps a sale that has taken holds from that.
func assertUntrusted(t *testing.T, g *Gate, sale string, r flashsale.GateReserve) {
	t.Helper()
	ctx := t.Context()
	r.ReservationID, r.IdempotencyKey = r.ReservationID+"-again", r.IdempotencyKey+"-again"
	if out, err := g.Reserve(ctx, r); err != nil || out.Verdict != flashsale.VerdictNotLoaded {
		t.Fatalf("Reserve on an untrusted counter = %v, %v; want not loaded", out.Verdict, err)
	}
	if s, err := g.Snapshot(ctx, sale); err != nil || s.Loaded {
		t.Fatalf("Snapshot of an untrusted counter = %+v, %v; want not loaded", s, err)
	}
	if _, err := g.Restock(ctx, sale, "res-1", "test"); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("Restock on an untrusted counter = %v; want ErrNotLoaded", err)
	}
	if _, found, err := g.Lookup(ctx, sale, "u1", "k1"); found || err != nil {
		t.Fatalf("Lookup on an untrusted counter = %v, %v; want not found", found, err)
	}
	n, err := g.client.Do(ctx, g.client.B().Exists().Key(g.key(sale, "meta")).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Log("the promoted replica had none of the sale's keys")
		return
	}
	if ok, err := g.Load(ctx, sale, 5, 1, "test"); ok || err != nil {
		t.Fatalf("Load over an untrusted counter = %v, %v; want false: only a rebuild may replace it", ok, err)
	}
}

// TestFailoverFailsClosed kills the master that holds a sale's counter, in
// a cluster of the test's own, right after a burst of wins. Its replica
// takes over with whatever replication had carried, possibly without the
// last decrements; the gate must not sell on that counter, only on one
// rebuilt from the record.
func TestFailoverFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster of its own and kills a master")
	}
	c := testenv.StartRedisCluster(t, 3, 1)
	g := New(Config{Client: c.Client(), Prefix: "fs:"})
	ctx := t.Context()
	sale := flashsale.NewID("sale_")
	if ok, err := g.Load(ctx, sale, 100, 1, "test"); !ok || err != nil {
		t.Fatalf("Load = %v, %v", ok, err)
	}
	var holds []flashsale.Hold
	var r flashsale.GateReserve
	for i := range 20 {
		r = flashsale.GateReserve{SaleID: sale, ReservationID: "res-" + string(rune('a'+i)), UserID: "u" + string(rune('a'+i)),
			Quantity: 1, Epoch: 1, IdempotencyKey: "k", RequestHash: "h", Now: time.Now()}
		out, err := g.Reserve(ctx, r)
		if err != nil || out.Verdict != flashsale.VerdictWon {
			t.Fatalf("Reserve = %v, %v", out.Verdict, err)
		}
		holds = append(holds, out.Hold)
	}
	master := c.MasterOf(g.StockKey(sale))
	c.Kill(master)
	c.WaitFailover(master)
	if now := c.MasterOf(g.StockKey(sale)); now == master {
		t.Fatalf("the sale's slot is still served by %s", master)
	}
	waitAnswers(t, g, sale)
	assertUntrusted(t, g, sale, r)

	// The record says 20 holds: the rebuilt counter is 80, whatever the
	// promoted replica's counter was.
	if err := g.Rebuild(ctx, sale, 100, 2, holds, nil, "test"); err != nil {
		t.Fatal(err)
	}
	s, err := g.Snapshot(ctx, sale)
	if err != nil || !s.Loaded || s.Counter != 80 || s.Won != 20 {
		t.Fatalf("after the rebuild Snapshot = %+v, %v; want 80 left, 20 held", s, err)
	}
}

// waitAnswers waits, for at most 30 seconds, until the gate's client has
// found the promoted master (its view of the cluster refreshes on errors).
func waitAnswers(t *testing.T, g *Gate, sale string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := g.Snapshot(ctx, sale)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate does not answer after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
