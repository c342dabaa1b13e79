package outbox

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/sqlite"
)

// The relay's throughput and latency on PostgreSQL, with a sink that costs
// nothing, so the figures are the outbox's: the claim, the fenced
// completion, and the database under them.
//
//	go test -run '^$' -bench 'Relay' -benchtime 50000x -count 3 ./outbox/

// counting is a sink that counts, and records each event's latency from
// its write (created_at) to its delivery.
type counting struct {
	n  atomic.Int64
	mu sync.Mutex
	// latencies, when not nil, collects write-to-sink times.
	latencies []time.Duration
}

func (c *counting) Name() string { return "counting" }

func (c *counting) Publish(_ context.Context, events []*flashsale.OutboxEvent) []error {
	c.n.Add(int64(len(events)))
	if c.latencies != nil {
		now := time.Now()
		c.mu.Lock()
		for _, ev := range events {
			c.latencies = append(c.latencies, now.Sub(ev.CreatedAt))
		}
		c.mu.Unlock()
	}
	return nil
}

// record is what the throughput benchmark needs of a store.
type benchRecord interface {
	Store
	AppendEvents(ctx context.Context, events ...flashsale.Event) (int, error)
}

func benchStore(b *testing.B, conns int32, opts ...postgres.Option) *postgres.Store {
	b.Helper()
	st, err := postgres.Open(context.Background(), testenv.Postgres(b), append(opts, postgres.WithMaxConns(conns))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// fill writes n due events in statements of a thousand.
func fill(b *testing.B, st benchRecord, n int) {
	b.Helper()
	at := time.Now()
	for n > 0 {
		k := min(n, 1000)
		events := make([]flashsale.Event, k)
		for i := range events {
			events[i] = flashsale.NewEvent("", flashsale.EventReservationCreated, "sale_bench", "sku-bench", at,
				flashsale.ReservationData{ReservationID: "res_x", UserID: "u", Quantity: 1, State: flashsale.ReservationPending, ExpiresAt: at})
		}
		if _, err := st.AppendEvents(context.Background(), events...); err != nil {
			b.Fatal(err)
		}
		n -= k
	}
}

// BenchmarkRelayThroughput drains b.N events written beforehand with 1, 4
// and 16 relays, each with a connection of its own.
func BenchmarkRelayThroughput(b *testing.B) {
	for _, relays := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			drain(b, benchStore(b, int32(relays)), relays)
		})
	}
}

// BenchmarkRelayThroughputSQLite is the same on the embedded record, whose
// one writer serialises the relays' claims and completions.
func BenchmarkRelayThroughputSQLite(b *testing.B) {
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "r.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			drain(b, st, relays)
		})
	}
}

// drain fills st with b.N events and times relays draining them.
func drain(b *testing.B, st benchRecord, relays int) {
	fill(b, st, b.N)
	sink := &counting{}
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range relays {
		r := New(Config{Store: st, Sink: sink, Name: fmt.Sprint("bench-", i)})
		wg.Go(func() {
			for sink.n.Load() < int64(b.N) {
				if _, err := r.Drain(context.Background()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRelayLatency writes b.N events one per transaction, as the
// purchase path does, from 8 writers at a steady total rate, with relays
// running as the engine runs them (woken by the store's events hook, one
// relay per commit in turn, else polling every 250ms); it reports the time
// from each event's write to its delivery, p50 and p99.
func BenchmarkRelayLatency(b *testing.B) {
	for _, c := range []struct {
		relays int
		rate   int // events a second
	}{{1, 1000}, {4, 1000}, {4, 4000}} {
		b.Run(fmt.Sprintf("relays=%d/rate=%d", c.relays, c.rate), func(b *testing.B) {
			// Each commit wakes one relay, in turn, as each server's
			// commits wake its own relay.
			var (
				relays []*Relay
				turn   atomic.Uint64
			)
			wake := func() { relays[turn.Add(1)%uint64(len(relays))].Notify() }
			st := benchStore(b, 8, postgres.WithEventsHook(func() { wake() }))
			relayStore, err := st.Sibling(context.Background(), int32(c.relays))
			if err != nil {
				b.Fatal(err)
			}
			defer relayStore.Close()
			sink := &counting{latencies: make([]time.Duration, 0, b.N)}
			for i := range c.relays {
				relays = append(relays, New(Config{Store: relayStore, Sink: sink, Name: fmt.Sprint("bench-", i)}))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, r := range relays {
				r.Start(ctx)
			}
			const writers = 8
			interval := time.Duration(float64(time.Second) * writers / float64(c.rate))
			b.ResetTimer()
			var wg sync.WaitGroup
			var written atomic.Int64
			for range writers {
				wg.Go(func() {
					tick := time.NewTicker(interval)
					defer tick.Stop()
					for written.Add(1) <= int64(b.N) {
						<-tick.C
						ev := flashsale.NewEvent("", flashsale.EventOrderConfirmed, "sale_bench", "sku", time.Now(),
							flashsale.OrderData{OrderID: "ord", To: flashsale.OrderConfirmed, Version: 1, Actor: "bench"})
						if _, err := st.AppendEvents(ctx, ev); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			for sink.n.Load() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			for _, r := range relays {
				r.Stop()
			}
			sink.mu.Lock()
			lat := slices.Clone(sink.latencies)
			sink.mu.Unlock()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
