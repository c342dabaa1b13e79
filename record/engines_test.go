package record_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/sqlite"
)

// The record's rules that need more than the flashsale.Store interface to
// be seen (the store's own clock, a writer beside the store), on every
// engine. What the interface alone shows is package storetest's.

// engine opens a store of one engine with the clock now, and returns with
// it a way to run SQL around the store, as another program would (queries
// in that engine's dialect).
type engine struct {
	name string
	open func(t *testing.T, now func() time.Time) (st flashsale.Store, raw func(sqlite, postgres string, args ...any) error)
}

var engines = []engine{
	{"sqlite", func(t *testing.T, now func() time.Time) (flashsale.Store, func(string, string, ...any) error) {
		path := filepath.Join(t.TempDir(), "record.db")
		st, err := sqlite.Open(t.Context(), path, sqlite.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		return st, func(q, _ string, args ...any) error {
			_, err := other.ExecContext(context.Background(), q, args...)
			return err
		}
	}},
	{"postgres", func(t *testing.T, now func() time.Time) (flashsale.Store, func(string, string, ...any) error) {
		st, err := postgres.Open(t.Context(), testenv.Postgres(t), postgres.WithMaxConns(2), postgres.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, func(_, q string, args ...any) error {
			_, err := st.Pool().Exec(context.Background(), q, args...)
			return err
		}
	}},
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func testSale(id string) *flashsale.Sale {
	return &flashsale.Sale{ID: id, SKU: "sku-" + id, InitialStock: 1, OpensAt: t0, HoldSeconds: 60,
		PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1, State: flashsale.SaleOpen, CreatedAt: t0.Add(-time.Hour)}
}

// TestUpdateSaleStampsTheClock: UpdateSale, the one write whose method
// takes no time, stamps updated_at with the store's clock.
func TestUpdateSaleStampsTheClock(t *testing.T) {
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			ctx := t.Context()
			s, _ := e.open(t, func() time.Time { return at })
			sale := testSale("sale_clock")
			if err := s.CreateSale(ctx, sale); err != nil {
				t.Fatalf("CreateSale: %v", err)
			}
			if err := s.UpdateSale(ctx, sale, 1); err != nil {
				t.Fatalf("UpdateSale: %v", err)
			}
			if !sale.UpdatedAt.Equal(at) {
				t.Errorf("UpdatedAt = %v, want the store's clock %v", sale.UpdatedAt, at)
			}
		})
	}
}

// TestShipOrderStaleVersion: an order moved by another writer (a refund
// tool, say) while still confirmed is a version conflict, not a ship.
func TestShipOrderStaleVersion(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			ctx := t.Context()
			s, raw := e.open(t, time.Now)
			sale := testSale("sale_ship")
			if err := s.CreateSale(ctx, sale); err != nil {
				t.Fatalf("CreateSale: %v", err)
			}
			r := &flashsale.Reservation{ID: "res_1", SaleID: sale.ID, UserID: "u-1", Quantity: 1, Epoch: 1,
				CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}
			if err := s.CreateReservation(ctx, r); err != nil {
				t.Fatalf("CreateReservation: %v", err)
			}
			_, ord, err := s.ConfirmReservation(ctx, r.ID, "u-1", "pay", t0)
			if err != nil {
				t.Fatalf("ConfirmReservation: %v", err)
			}
			if err := raw(`UPDATE orders SET payment_ref = 'pay-2', version = version + 1 WHERE order_id = ?1`,
				`UPDATE orders SET payment_ref = 'pay-2', version = version + 1 WHERE order_id = $1`, ord.ID); err != nil {
				t.Fatalf("the other writer: %v", err)
			}
			_, _, err = s.ChangeOrder(ctx, flashsale.OrderChange{OrderID: ord.ID, Version: 1, To: flashsale.OrderShipped,
				Actor: "operator", At: t0.Add(time.Hour)})
			if !errors.Is(err, flashsale.ErrVersionConflict) {
				t.Errorf("shipping at the stale version: %v, want ErrVersionConflict", err)
			}
			got, err := s.Order(ctx, ord.ID)
			if err != nil || got.State != flashsale.OrderConfirmed || got.Version != 2 {
				t.Errorf("Order after the refused ship = %+v, %v; want confirmed at version 2", got, err)
			}
		})
	}
}
