package postgres

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The baselines of the design: what one contended row can take in
// PostgreSQL, by the two ways of taking the last unit (a conditional UPDATE,
// and SELECT ... FOR UPDATE then UPDATE), with stock left and sold out.
// They are measured beside the gates' benchmarks so that the gap the gate
// exists to close is a number, not a claim.
//
//	go test -run x -bench . -benchtime 2s ./postgres/

// benchConns is the pool every benchmark shares its work over.
const benchConns = 16

// stockPool returns a pool of benchConns connections to a scratch schema
// holding stock(product_id 1, on_hand).
func stockPool(b *testing.B, onHand int) *pgxpool.Pool {
	b.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `
		CREATE TABLE stock (
			product_id INT PRIMARY KEY,
			on_hand    INT NOT NULL CHECK (on_hand >= 0)
		)`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO stock (product_id, on_hand) VALUES (1, $1)`, onHand); err != nil {
		b.Fatal(err)
	}
	return pool
}

// runParallel runs op from about benchConns goroutines and reports
// throughput.
func runParallel(b *testing.B, op func(ctx context.Context) error) {
	b.Helper()
	ctx := context.Background()
	// RunParallel starts parallelism × GOMAXPROCS goroutines: one per
	// connection, give or take a rounding.
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((benchConns + procs - 1) / procs)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkConditionalUpdate takes a unit with one statement; rows
// affected is the answer.
func BenchmarkConditionalUpdate(b *testing.B) {
	pool := stockPool(b, 1<<30)
	runParallel(b, func(ctx context.Context) error {
		tag, err := pool.Exec(ctx, `UPDATE stock SET on_hand = on_hand - 1 WHERE product_id = 1 AND on_hand >= 1`)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("took %d units with stock left", tag.RowsAffected())
		}
		return err
	})
}

// BenchmarkConditionalUpdateSoldOut is the same statement once the stock
// is gone: the branch almost every shopper takes.
func BenchmarkConditionalUpdateSoldOut(b *testing.B) {
	pool := stockPool(b, 0)
	runParallel(b, func(ctx context.Context) error {
		tag, err := pool.Exec(ctx, `UPDATE stock SET on_hand = on_hand - 1 WHERE product_id = 1 AND on_hand >= 1`)
		if err == nil && tag.RowsAffected() != 0 {
			err = fmt.Errorf("took %d units when sold out", tag.RowsAffected())
		}
		return err
	})
}

// selectForUpdate is the pessimistic way: lock the row, decide, write.
func selectForUpdate(pool *pgxpool.Pool, wantUnit bool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var onHand int
			if err := tx.QueryRow(ctx, `SELECT on_hand FROM stock WHERE product_id = 1 FOR UPDATE`).Scan(&onHand); err != nil {
				return err
			}
			if onHand < 1 {
				if wantUnit {
					return fmt.Errorf("sold out with stock left")
				}
				return nil
			}
			if !wantUnit {
				return fmt.Errorf("%d on hand when sold out", onHand)
			}
			_, err := tx.Exec(ctx, `UPDATE stock SET on_hand = on_hand - 1 WHERE product_id = 1`)
			return err
		})
	}
}

// BenchmarkSelectForUpdate: BEGIN; SELECT ... FOR UPDATE; UPDATE; COMMIT.
func BenchmarkSelectForUpdate(b *testing.B) {
	runParallel(b, selectForUpdate(stockPool(b, 1<<30), true))
}

// BenchmarkSelectForUpdateSoldOut: the lock is taken even to say no.
func BenchmarkSelectForUpdateSoldOut(b *testing.B) {
	runParallel(b, selectForUpdate(stockPool(b, 0), false))
}

// BenchmarkCreateReservation records a hold as the record does for each of
// the gate's winners: one INSERT ... SELECT ... FOR SHARE, every shopper a
// different one.
func BenchmarkCreateReservation(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, testenv.Postgres(b), WithMaxConns(benchConns))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	t0 := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	sale := &flashsale.Sale{
		ID: flashsale.NewID("sale_"), SKU: "sku-bench", InitialStock: flashsale.MaxInitialStock, OpensAt: t0,
		HoldSeconds: 600, PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1,
		State: flashsale.SaleOpen, CreatedAt: t0,
	}
	if err := s.CreateSale(ctx, sale); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	runParallel(b, func(ctx context.Context) error {
		i := n.Add(1)
		return s.CreateReservation(ctx, &flashsale.Reservation{
			ID: flashsale.NewID("res_"), SaleID: sale.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1,
			PaymentFingerprint: fmt.Sprintf("card-%d", i), IdempotencyKey: fmt.Sprintf("key-%d", i),
			Epoch: 1, CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute),
		})
	})
}
