package redis

import (
	"context"
	"runtime"
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

// benchClients is how many shoppers the gate benchmarks below keep in
// flight, as redis-benchmark -c 50 keeps 50 clients (bench/gates.sh
// compares the two).
const benchClients = 50

// setClients makes b.RunParallel run about benchClients goroutines.
func setClients(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((benchClients + procs - 1) / procs)
}

// benchStock is the stock of each sale BenchmarkReserveWin sells before
// it moves to the next: the design's sale of ten thousand units, so that
// the sale's hashes (holds, buyers, keys, admissions) grow to the size a
// real sale's do, as in the in-process gate's benchmark. The sold-out
// answers at each sale's end (one per shopper in flight, 50 in 10,000)
// stay a rounding error of the wins.
const benchStock = 10_000

// request returns a one-unit request whose shopper, key, admission and
// reservation id are n's alone. Its ids are slices of one string, so that
// the benchmarks measure the gate more than their own requests.
func request(saleID string, n int64, now time.Time) flashsale.GateReserve {
	id := strconv.FormatInt(n, 10)
	all := "res-" + id + "user-" + id + "adm-" + id + "key-" + id + "hash-" + id
	field := func(i, prefix int) string { return all[i : i+prefix+len(id)] }
	return flashsale.GateReserve{
		SaleID:         saleID,
		ReservationID:  field(0, 4),
		UserID:         field(4+len(id), 5),
		Quantity:       1,
		AdmissionID:    field(9+2*len(id), 4),
		Epoch:          1,
		IdempotencyKey: field(13+3*len(id), 4),
		RequestHash:    field(17+4*len(id), 5),
		Now:            now,
	}
}

// BenchmarkReserveWin measures wins from benchClients parallel shoppers.
// Each sale holds benchStock units; the caller that finds it sold out drops it and loads
// the next (inside the timing: two round trips per benchStock wins).
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
		if _, err := g.Load(ctx, id, benchStock, 1, "bench"); err != nil {
			b.Fatal(err)
		}
		current.Store(&id)
	}
	next(nil)
	now := time.Now()
	setClients(b)
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

// BenchmarkReserveSoldOut measures the rejection almost every shopper
// gets, from benchClients parallel shoppers.
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
	setClients(b)
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

// BenchmarkReserveOneShopper is a quiet sale: one reserve at a time, so
// every call goes alone, as it did before reserves were batched, and the
// figure is the latency of one decision (a round trip and one script
// run). Batching must not make it worse.
func BenchmarkReserveOneShopper(b *testing.B) {
	g := newGate(b, nil)
	ctx := context.Background()
	now := time.Now()
	var n int64
	b.Run("win", func(b *testing.B) {
		sale := "quiet-" + strconv.Itoa(b.N)
		g.Load(ctx, sale, int64(b.N), 1, "bench")
		b.ResetTimer()
		for range b.N {
			n++
			if out, err := g.Reserve(ctx, request(sale, n, now)); err != nil || out.Verdict != flashsale.VerdictWon {
				b.Fatalf("%v, %v", out.Verdict, err)
			}
		}
	})
	b.Run("soldout", func(b *testing.B) {
		g.Load(ctx, "empty", 0, 1, "bench")
		b.ResetTimer()
		for range b.N {
			n++
			if out, err := g.Reserve(ctx, request("empty", n, now)); err != nil || out.Verdict != flashsale.VerdictSoldOut {
				b.Fatalf("%v, %v", out.Verdict, err)
			}
		}
	})
}
