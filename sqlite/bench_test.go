package sqlite

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// BenchmarkCreateReservationCrowd writes holds from 32 goroutines a core,
// as a crowd of reserves does, with each commit alone (group=1, as before
// group commit) and grouped (group=64), in the same run.
func BenchmarkCreateReservationCrowd(b *testing.B) {
	for _, group := range []int{1, maxGroup} {
		b.Run(fmt.Sprintf("group=%d", group), func(b *testing.B) {
			s, err := Open(b.Context(), b.TempDir()+"/record.db")
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.db.groupMax = group
			t0 := time.Date(2030, 3, 1, 10, 0, 0, 0, time.UTC)
			sale := &flashsale.Sale{ID: "sale_bench", SKU: "bench", Name: "Bench", InitialStock: 1 << 30,
				OpensAt: t0, HoldSeconds: 600, PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1,
				State: flashsale.SaleOpen, Epoch: 1, Version: 1, CreatedAt: t0, UpdatedAt: t0}
			if err := s.CreateSale(b.Context(), sale); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := next.Add(1)
					r := &flashsale.Reservation{ID: fmt.Sprintf("res_%d", n), SaleID: sale.ID,
						UserID: fmt.Sprintf("user-%d", n), Quantity: 1, Epoch: 1, CreatedAt: t0,
						ExpiresAt: t0.Add(10 * time.Minute), IdempotencyKey: fmt.Sprintf("key-%d", n)}
					if err := s.CreateReservation(b.Context(), r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
