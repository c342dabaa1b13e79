package redis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkReserveDecisions measures reserve decisions through the sharded
// gate, for the deployments of issue 8 side by side in one run: a sale of
// one shard on the single Redis, and sales of one and of three shards on
// the Redis Cluster (three masters, each with a replica). Each deployment
// is measured on the decision nearly every shopper gets (sold out: the
// sale's units are gone) and on wins (a sale of 10 million units, so no
// shard runs dry while measured). Decisions/s is b.N over the elapsed
// time, with benchParallelism goroutines per core in flight.
func BenchmarkReserveDecisions(b *testing.B) {
	for _, d := range []struct {
		name   string
		open   func(testing.TB) (rueidis.Client, string)
		shards int
	}{
		{"redis-1shard", testenv.Redis, 1},
		{"cluster-1shard", testenv.RedisCluster, 1},
		{"cluster-3shards", testenv.RedisCluster, 3},
	} {
		b.Run(d.name+"/soldout", func(b *testing.B) {
			g := newSharded(b, d.open, d.shards)
			ctx := context.Background()
			now := time.Now()
			sale := spreadSale(b, g)
			if _, err := g.Load(ctx, sale, int64(d.shards), 1, "bench"); err != nil {
				b.Fatal(err)
			}
			var serial atomic.Int64
			for won := 0; won < d.shards; {
				out, err := g.Reserve(ctx, request(sale, serial.Add(1), now))
				if err != nil {
					b.Fatal(err)
				}
				if out.Verdict == flashsale.VerdictWon {
					won++
				}
			}
			benchDecisions(b, g, sale, &serial, now, flashsale.VerdictSoldOut)
		})
		b.Run(d.name+"/win", func(b *testing.B) {
			g := newSharded(b, d.open, d.shards)
			ctx := context.Background()
			sale := spreadSale(b, g)
			if _, err := g.Load(ctx, sale, 10_000_000, 1, "bench"); err != nil {
				b.Fatal(err)
			}
			var serial atomic.Int64
			benchDecisions(b, g, sale, &serial, time.Now(), flashsale.VerdictWon)
		})
	}
}

func benchDecisions(b *testing.B, g *ShardedGate, sale string, serial *atomic.Int64, now time.Time, want flashsale.Verdict) {
	ctx := context.Background()
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := g.Reserve(ctx, request(sale, serial.Add(1), now))
			if err != nil || out.Verdict != want {
				b.Fatalf("%v, %v; want %v", out.Verdict, err, want)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// spreadSale returns a sale id whose shards (of a sale of g's shard count)
// are served by as many different cluster masters as there are shards or
// masters, so the benchmark measures the spread and not the luck of the
// hash. On one server any id will do.
func spreadSale(b *testing.B, g *ShardedGate) string {
	b.Helper()
	n, _ := g.count(context.Background(), "")
	client := g.Plain().client
	if client.Mode() != rueidis.ClientModeCluster || n == 1 {
		return flashsale.NewID("sale_")
	}
	slots, err := client.Do(context.Background(), client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		b.Fatal(err)
	}
	owner := make([]string, 16384)
	masters := map[string]bool{}
	for _, r := range slots {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			b.Fatalf("CLUSTER SLOTS entry %v: %v", r, err)
		}
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		m, _ := f[2].ToArray()
		port, _ := m[1].AsInt64()
		addr := fmt.Sprint(port)
		masters[addr] = true
		for s := lo; s <= hi; s++ {
			owner[s] = addr
		}
	}
	want := min(n, len(masters))
	for range 10_000 {
		id := flashsale.NewID("sale_")
		on := map[string]bool{}
		for k := range n {
			on[owner[keySlot(g.ShardStockKey(id, k))]] = true
		}
		if len(on) == want {
			return id
		}
	}
	b.Fatal("no sale id spread its shards over the masters")
	return ""
}
