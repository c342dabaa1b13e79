package redis

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// benchParallelism is goroutines per core: many calls in flight is what
// lets rueidis pipeline them onto few connections.
const benchParallelism = 32

// request returns a one-unit request whose shopper, key, admission and
// reservation id are n's alone.
func request(saleID string, n int64, now time.Time) flashsale.GateReserve {
	id := strconv.FormatInt(n, 10)
	return flashsale.GateReserve{
		SaleID:           saleID,
		ReservationID:    "res-" + id,
		UserID:           "user-" + id,
		Quantity:         1,
		AdmissionID:      "adm-" + id,
		AdmissionExpires: now.Add(10 * time.Minute),
		Epoch:            1,
		IdempotencyKey:   "key-" + id,
		RequestHash:      "hash-" + id,
		Now:              now,
	}
}

// BenchmarkReserveWin measures wins from many parallel shoppers. Each sale
// holds 10,000 units; the caller that finds it sold out drops it and loads
// the next (inside the timing: two round trips per 10,000 wins).
func BenchmarkReserveWin(b *testing.B) {
	g := newGate(b, nil)
	ctx := context.Background()
	var (
		mu      sync.Mutex
		gen     atomic.Int64
		current atomic.Pointer[string]
		serial  atomic.Int64
	)
	next := func(seen *string) {
		mu.Lock()
		defer mu.Unlock()
		if current.Load() != seen {
			return
		}
		if seen != nil {
			g.Drop(ctx, *seen)
		}
		id := "bench-" + strconv.FormatInt(gen.Add(1), 10)
		if _, err := g.Load(ctx, id, 10_000, 1, "bench"); err != nil {
			b.Fatal(err)
		}
		current.Store(&id)
	}
	next(nil)
	now := time.Now()
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			sale := current.Load()
			out, err := g.Reserve(ctx, request(*sale, serial.Add(1), now))
			if err != nil {
				b.Fatal(err)
			}
			switch out.Verdict {
			case flashsale.VerdictWon:
			case flashsale.VerdictSoldOut, flashsale.VerdictNotLoaded:
				next(sale)
			default:
				b.Fatalf("verdict %v", out.Verdict)
			}
		}
	})
}

// BenchmarkReserveSoldOut measures the rejection almost every shopper gets.
func BenchmarkReserveSoldOut(b *testing.B) {
	g := newGate(b, nil)
	ctx := context.Background()
	now := time.Now()
	g.Load(ctx, "sale", 100, 1, "bench")
	var serial atomic.Int64
	for range 100 {
		if out, err := g.Reserve(ctx, request("sale", serial.Add(1), now)); err != nil || out.Verdict != flashsale.VerdictWon {
			b.Fatalf("setup: %v, %v", out.Verdict, err)
		}
	}
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := g.Reserve(ctx, request("sale", serial.Add(1), now))
			if err != nil || out.Verdict != flashsale.VerdictSoldOut {
				b.Fatalf("%v, %v", out.Verdict, err)
			}
		}
	})
}
