package memory

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// benchStock is the stock of each sale BenchmarkReserveWin sells out before
// it moves to a fresh one, so the maps stay the size of a real sale.
const benchStock = 10_000

// requests returns n distinct one-unit requests of worker w, made before
// the timer runs so that the benchmark measures the gate, not fmt.
func requests(w, n int, now time.Time) []flashsale.GateReserve {
	rs := make([]flashsale.GateReserve, n)
	for i := range rs {
		id := fmt.Sprintf("%d-%d", w, i)
		rs[i] = flashsale.GateReserve{
			ReservationID:  "res-" + id,
			UserID:         "user-" + id,
			Quantity:       1,
			AdmissionID:    "adm-" + id,
			Epoch:          1,
			IdempotencyKey: "key-" + id,
			RequestHash:    "hash-" + id,
			Now:            now,
		}
	}
	return rs
}

// BenchmarkReserveWin measures wins from parallel shoppers. Each sale holds
// benchStock units; the worker that finds it sold out drops it and loads
// the next (that O(1) swap is inside the timing).
func BenchmarkReserveWin(b *testing.B) { benchWin(b, 1) }

// BenchmarkReserveWinCrowd is BenchmarkReserveWin with 16 shoppers a core,
// as a server's handlers are many goroutines to a core: a reserve then
// often finds the sale's lock taken.
func BenchmarkReserveWinCrowd(b *testing.B) { benchWin(b, 16) }

func benchWin(b *testing.B, perCore int) {
	ctx := context.Background()
	g := New(Config{})
	var (
		mu      sync.Mutex
		gen     atomic.Int64
		current atomic.Pointer[string]
	)
	next := func(seen *string) {
		mu.Lock()
		defer mu.Unlock()
		if current.Load() != seen {
			return // someone else moved on already
		}
		if seen != nil {
			g.Drop(ctx, *seen)
		}
		id := fmt.Sprintf("sale-%d", gen.Add(1))
		g.Load(ctx, id, benchStock, 1, "bench")
		current.Store(&id)
	}
	next(nil)
	// One worker per P, as RunParallel starts them; each gets its own
	// shoppers. A worker never wins more than benchStock times in one
	// sale, so cycling through benchStock+1 requests never repeats a shopper
	// within a sale.
	now := time.Now()
	pool := make([][]flashsale.GateReserve, perCore*runtime.GOMAXPROCS(0))
	for w := range pool {
		pool[w] = requests(w, benchStock+1, now)
	}
	var workers atomic.Int64
	b.SetParallelism(perCore)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rs := pool[workers.Add(1)-1]
		i := 0
		for pb.Next() {
			sale := current.Load()
			r := &rs[i%len(rs)]
			r.SaleID = *sale
			out, err := g.Reserve(ctx, *r)
			if err != nil {
				b.Fatal(err)
			}
			switch out.Verdict {
			case flashsale.VerdictWon:
				i++
			case flashsale.VerdictSoldOut, flashsale.VerdictNotLoaded:
				next(sale)
			default:
				b.Fatalf("verdict %v", out.Verdict)
			}
		}
	})
}

// BenchmarkReserveSoldOut measures the rejection almost every shopper gets:
// distinct shoppers, keys and admissions against a sold-out sale.
func BenchmarkReserveSoldOut(b *testing.B) {
	ctx := context.Background()
	g := New(Config{})
	g.Load(ctx, "sale", 1000, 1, "bench")
	now := time.Now()
	// Sell out with real wins, so the filter holds keys as in a real sale.
	for _, r := range requests(0, 1000, now) {
		r.SaleID = "sale"
		if out, _ := g.Reserve(ctx, r); out.Verdict != flashsale.VerdictWon {
			b.Fatalf("setup: %v", out.Verdict)
		}
	}
	pool := make([][]flashsale.GateReserve, runtime.GOMAXPROCS(0))
	for w := range pool {
		pool[w] = requests(w+1, 1<<14, now)
		for i := range pool[w] {
			pool[w][i].SaleID = "sale"
		}
	}
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rs := pool[workers.Add(1)-1]
		i := 0
		for pb.Next() {
			out, err := g.Reserve(ctx, rs[i&(len(rs)-1)])
			if err != nil || out.Verdict != flashsale.VerdictSoldOut {
				b.Fatalf("%v, %v", out.Verdict, err)
			}
			i++
		}
	})
}
