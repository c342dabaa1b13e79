package postgres

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestUnreachableIsUnavailable: when the database cannot be reached (its
// connections cut, new ones refused), every method says so with
// CodeUnavailable, which clients see as 503 "repeat the request", not as
// an internal error (500); what the server itself refuses keeps its own
// meaning.
func TestUnreachableIsUnavailable(t *testing.T) {
	base := testenv.Postgres(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	s, err := Open(t.Context(), u.String(), WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sale := &flashsale.Sale{ID: flashsale.NewID("sale_"), SKU: "sku-" + flashsale.NewID(""), Name: "n", InitialStock: 5,
		OpensAt: now, HoldSeconds: 60, PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1,
		State: flashsale.SaleOpen, Epoch: 1, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateSale(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
	// The server answers: a duplicate sale is a conflict, not an outage.
	if err := s.CreateSale(t.Context(), sale); flashsale.ErrorCode(err) == flashsale.CodeUnavailable {
		t.Fatalf("a duplicate sale reads as an outage: %v", err)
	}

	proxy.Cut()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	calls := map[string]func() error{
		"Sale":               func() error { _, err := s.Sale(ctx, sale.ID); return err },
		"SaleBySKU":          func() error { _, err := s.SaleBySKU(ctx, sale.SKU); return err },
		"Sales":              func() error { _, err := s.Sales(ctx); return err },
		"SaleTotals":         func() error { _, err := s.SaleTotals(ctx, sale.ID); return err },
		"SetSaleState":       func() error { _, err := s.SetSaleState(ctx, sale.ID, flashsale.SalePaused, "r", now); return err },
		"BeginRebuild":       func() error { _, _, err := s.BeginRebuild(ctx, sale.ID, now); return err },
		"Reservation":        func() error { _, err := s.Reservation(ctx, "res_x"); return err },
		"ReservationByKey":   func() error { _, err := s.ReservationByKey(ctx, sale.ID, "u", "k"); return err },
		"ConfirmReservation": func() error { _, _, err := s.ConfirmReservation(ctx, "res_x", "u", "p", now); return err },
		"CancelReservation":  func() error { _, _, err := s.CancelReservation(ctx, "res_x", "u", now); return err },
		"ExpireDue":          func() error { _, err := s.ExpireDue(ctx, now, 10); return err },
		"ReservationStates":  func() error { _, err := s.ReservationStates(ctx, sale.ID, []string{"res_x"}); return err },
		"Order":              func() error { _, err := s.Order(ctx, "ord_x"); return err },
		"Orders":             func() error { _, err := s.Orders(ctx, sale.ID); return err },
		"ChangeOrder": func() error {
			_, _, err := s.ChangeOrder(ctx, flashsale.OrderChange{OrderID: "ord_x", Version: 1, To: flashsale.OrderShipped,
				Actor: "operator", At: now})
			return err
		},
		"Draw": func() error { _, err := s.Draw(ctx, sale.ID); return err },
		"Ping": func() error { return s.Ping(ctx) },
		"CreateReservation": func() error {
			return s.CreateReservation(ctx, &flashsale.Reservation{ID: flashsale.NewID("res_"), SaleID: sale.ID, UserID: "u",
				Quantity: 1, State: flashsale.ReservationPending, IdempotencyKey: "k", RequestHash: "h", Epoch: 1,
				CreatedAt: now, ExpiresAt: now.Add(time.Minute), Version: 1})
		},
		"VoidReservation": func() error {
			_, err := s.VoidReservation(ctx, &flashsale.Reservation{ID: flashsale.NewID("res_"), SaleID: sale.ID, UserID: "u",
				Quantity: 1, State: flashsale.ReservationVoided, CreatedAt: now, ExpiresAt: now.Add(time.Minute), RestockedAt: now})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if flashsale.ErrorCode(err) != flashsale.CodeUnavailable {
			t.Errorf("%s with the database cut off: %v (code %q), want %q", name, err, flashsale.ErrorCode(err), flashsale.CodeUnavailable)
		}
		if errors.Is(err, flashsale.ErrNotFound) || errors.Is(err, flashsale.ErrDuplicate) {
			t.Errorf("%s with the database cut off reads as a verdict: %v", name, err)
		}
	}
}

// TestUnavailableKeepsVerdicts: errors the server answers with, and the
// domain's own, are not outages; the server refusing connections while it
// starts or shuts down is.
func TestUnavailableKeepsVerdicts(t *testing.T) {
	for _, err := range []error{flashsale.ErrNotFound, flashsale.ErrDuplicate, flashsale.ErrStaleEpoch,
		flashsale.ErrVersionConflict, &pgconn.PgError{Code: "23505"}, &pgconn.PgError{Code: "42P01"}} {
		if got := unavailable(err); flashsale.ErrorCode(got) == flashsale.CodeUnavailable || !errors.Is(got, err) {
			t.Errorf("unavailable(%v) = %v", err, got)
		}
	}
	for _, err := range []error{&pgconn.PgError{Code: "57P03"}, &pgconn.PgError{Code: "57P01"}, &pgconn.PgError{Code: "08006"},
		context.DeadlineExceeded} {
		if got := unavailable(err); flashsale.ErrorCode(got) != flashsale.CodeUnavailable || !errors.Is(got, err) {
			t.Errorf("unavailable(%v) = %v, want CodeUnavailable wrapping it", err, got)
		}
	}
	if unavailable(nil) != nil {
		t.Error("unavailable(nil) is not nil")
	}
}
