package redis

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/gatetest"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// newClusterGate returns a gate on the test Redis Cluster, under a key
// prefix of t's own.
func newClusterGate(t testing.TB, now func() time.Time) *Gate {
	client, prefix := testenv.RedisCluster(t)
	return New(Config{Client: client, Prefix: prefix, Now: now})
}

// TestGateOnCluster runs the conformance suite on Redis Cluster: a sale's
// keys share one hash slot, so every script runs on the one master that
// holds it, and the gate behaves exactly as on one server.
func TestGateOnCluster(t *testing.T) {
	gatetest.Exercise(t, gatetest.Harness{
		New: func(t *testing.T, now func() time.Time) flashsale.GateAdmin {
			return newClusterGate(t, now)
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

// TestOpenCluster opens the gate from --redis-url's cluster form (seed
// addresses as addr parameters) and sells through it.
func TestOpenCluster(t *testing.T) {
	newClusterGate(t, nil) // skips, or fails under CI, when the cluster is missing
	ctx := t.Context()
	prefix := "fstest:" + testenv.Suffix() + ":"
	g, err := Open(ctx, testenv.RedisClusterURL(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		testenv.DeleteKeys(g.client, prefix)
		g.Close()
	})
	if g.client.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v; want a cluster client", g.client.Mode())
	}
	if err := g.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	sale := flashsale.NewID("sale_")
	if ok, err := g.Load(ctx, sale, 1, 1, "test"); !ok || err != nil {
		t.Fatalf("Load = %v, %v", ok, err)
	}
	r := flashsale.GateReserve{SaleID: sale, ReservationID: "res-1", UserID: "u1", Quantity: 1, Epoch: 1,
		IdempotencyKey: "k1", RequestHash: "h", Now: time.Now()}
	if out, err := g.Reserve(ctx, r); err != nil || out.Verdict != flashsale.VerdictWon {
		t.Fatalf("Reserve = %v, %v; want won", out.Verdict, err)
	}
}
