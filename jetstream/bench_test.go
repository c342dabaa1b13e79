package jetstream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/postgres"
)

// BenchmarkRelayToJetStream drains b.N events written beforehand from the
// PostgreSQL outbox into the real JetStream (file storage, on this host),
// with 1 and 4 relays: the relay's throughput with a sink that costs what a
// broker costs.
//
//	go test -run '^$' -bench RelayToJetStream -benchtime 20000x -count 3 ./jetstream/
func BenchmarkRelayToJetStream(b *testing.B) {
	for _, relays := range []int{1, 4} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			ctx := context.Background()
			url, stream := testenv.NATS(b)
			sink, err := Open(ctx, Config{URL: url, Stream: stream, Subject: strings.ToLower(stream) + ".events"})
			if err != nil {
				b.Fatal(err)
			}
			defer sink.Close()
			st, err := postgres.Open(ctx, testenv.Postgres(b), postgres.WithMaxConns(int32(relays)))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			at := time.Now()
			for left := b.N; left > 0; left -= 1000 {
				events := make([]flashsale.Event, min(left, 1000))
				for i := range events {
					events[i] = flashsale.NewEvent("", flashsale.EventReservationCreated, "sale_bench", "sku", at,
						flashsale.ReservationData{ReservationID: "res_x", UserID: "u", Quantity: 1, State: flashsale.ReservationPending, ExpiresAt: at})
				}
				if _, err := st.AppendEvents(ctx, events...); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			var (
				wg        sync.WaitGroup
				mu        sync.Mutex
				delivered int
			)
			for i := range relays {
				r := outbox.New(outbox.Config{Store: st, Sink: sink, Name: fmt.Sprint("bench-", i)})
				wg.Go(func() {
					for {
						n, err := r.Drain(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						delivered += n
						done := delivered >= b.N
						mu.Unlock()
						if done || n == 0 {
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
