package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

func testSaleCreateAndRead(e *env) {
	t := e.t
	s := newSale()
	s.Name = "Lottery of the red sneaker"
	s.InitialStock = 250
	s.ClosesAt = t0.Add(2 * time.Hour)
	s.HoldSeconds = 300
	s.PerUserLimit = 2
	s.Fairness = flashsale.FairnessLottery
	s.RegistrationClosesAt = t0.Add(-10 * time.Minute)
	s.AdmissionPerSecond = 5000
	s.MinAccountAgeSeconds = 86400
	s.ChallengeBits = 12
	s.RequireInstrument = true
	s.NotifiedAdmissionSeconds = 900
	s.Shards = 4
	s.Display = flashsale.Display{Title: "Air « Rouge » — ¥19,800 ✓", Description: "Two lines.\nThe second.",
		ImageURL: "https://cdn.example.com/red.png?w=800&h=800", PriceText: "199,00\u202f€", ShopURL: "https://shop.example.com/",
		BrandColor: "#C0FFEE", LogoURL: "http://shop.example.com/logo.svg"}
	s.State = flashsale.SaleScheduled
	s.SeedCommitment = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	s.UpdatedAt = s.CreatedAt.Add(time.Second)
	want := *s
	ok(t, "CreateSale", e.store.CreateSale(e.ctx, s))
	same(t, "CreateSale changed the sale", *s, want)

	got, err := e.store.Sale(e.ctx, s.ID)
	ok(t, "Sale", err)
	same(t, "Sale", *got, want)

	got, err = e.store.SaleBySKU(e.ctx, s.SKU)
	ok(t, "SaleBySKU", err)
	same(t, "SaleBySKU", *got, want)

	_, err = e.store.Sale(e.ctx, "sale_missing")
	wantIs(t, "Sale(missing)", err, flashsale.ErrNotFound)
}

func testSaleCreateDefaults(e *env) {
	t := e.t
	s := newSale()
	s.Version, s.Epoch, s.State, s.UpdatedAt = 0, 0, "", time.Time{}
	ok(t, "CreateSale", e.store.CreateSale(e.ctx, s))
	if s.Version != 1 || s.Epoch != 1 || s.State != flashsale.SaleScheduled || !s.UpdatedAt.Equal(s.CreatedAt) {
		t.Errorf("CreateSale set version %d, epoch %d, state %q, updated %v; want 1, 1, scheduled, %v",
			s.Version, s.Epoch, s.State, s.UpdatedAt, s.CreatedAt)
	}
	got, err := e.store.Sale(e.ctx, s.ID)
	ok(t, "Sale", err)
	same(t, "Sale", *got, *s)
}

func testSaleDuplicateID(e *env) {
	t := e.t
	first := e.sale()
	again := newSale()
	again.ID = first.ID
	err := e.store.CreateSale(e.ctx, again)
	wantIs(t, "CreateSale(same id, other SKU)", err, flashsale.ErrDuplicate)
	if _, err := e.store.SaleBySKU(e.ctx, again.SKU); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("SaleBySKU of the refused sale: %v, want ErrNotFound", err)
	}
}

func testSaleExistsWhileActive(e *env) {
	t := e.t
	for _, state := range []flashsale.SaleState{flashsale.SaleScheduled, flashsale.SaleOpen, flashsale.SalePaused, flashsale.SaleSoldOut} {
		old := e.sale(func(s *flashsale.Sale) {
			s.State = state
			if state == flashsale.SalePaused {
				s.PausedAt, s.PauseReason = t0.Add(-time.Minute), "drill"
			}
		})
		next := newSale()
		next.SKU = old.SKU
		next.CreatedAt, next.UpdatedAt = t0, t0
		err := e.store.CreateSale(e.ctx, next)
		wantIs(t, "CreateSale while a "+string(state)+" sale holds the SKU", err, flashsale.ErrSaleExists)
		if flashsale.ErrorCode(err) != flashsale.CodeSaleExists {
			t.Errorf("code %q, want %q", flashsale.ErrorCode(err), flashsale.CodeSaleExists)
		}
		if _, err := e.store.Sale(e.ctx, next.ID); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("the refused sale was written: Sale = %v", err)
		}

		// Closing the old sale frees the SKU.
		_, err = e.store.SetSaleState(e.ctx, old.ID, flashsale.SaleClosed, "", t0)
		ok(t, "SetSaleState(closed)", err)
		ok(t, "CreateSale after the old sale closed", e.store.CreateSale(e.ctx, next))
		got, err := e.store.SaleBySKU(e.ctx, old.SKU)
		ok(t, "SaleBySKU", err)
		if got.ID != next.ID {
			t.Errorf("SaleBySKU = %s, want the new sale %s", got.ID, next.ID)
		}
	}
}

func testSaleExistsUntilClosesAt(e *env) {
	t := e.t
	old := e.sale(func(s *flashsale.Sale) { s.ClosesAt = t0.Add(time.Hour) })

	early := newSale()
	early.SKU = old.SKU
	early.CreatedAt, early.UpdatedAt = t0.Add(59*time.Minute), t0.Add(59*time.Minute)
	wantIs(t, "CreateSale before the old sale's closesAt", e.store.CreateSale(e.ctx, early), flashsale.ErrSaleExists)

	// At closesAt the old sale is closed: the SKU is free.
	next := newSale()
	next.SKU = old.SKU
	next.CreatedAt, next.UpdatedAt = t0.Add(time.Hour), t0.Add(time.Hour)
	ok(t, "CreateSale at the old sale's closesAt", e.store.CreateSale(e.ctx, next))
	got, err := e.store.SaleBySKU(e.ctx, old.SKU)
	ok(t, "SaleBySKU", err)
	if got.ID != next.ID {
		t.Errorf("SaleBySKU = %s, want %s", got.ID, next.ID)
	}

	// The new sale has no closesAt: it holds the SKU until it is closed.
	later := newSale()
	later.SKU = old.SKU
	later.CreatedAt, later.UpdatedAt = t0.Add(48*time.Hour), t0.Add(48*time.Hour)
	wantIs(t, "CreateSale while the new sale is active", e.store.CreateSale(e.ctx, later), flashsale.ErrSaleExists)

	// The old sale's row is untouched by giving up the SKU.
	oldNow, err := e.store.Sale(e.ctx, old.ID)
	ok(t, "Sale(old)", err)
	same(t, "old sale", *oldNow, *old)
}

func testSaleBySKU(e *env) {
	t := e.t
	_, err := e.store.SaleBySKU(e.ctx, "sku-nobody-sells")
	wantIs(t, "SaleBySKU(unknown)", err, flashsale.ErrNotFound)

	// Only closed sales: the newest.
	older := e.sale(func(s *flashsale.Sale) {
		s.State = flashsale.SaleClosed
		s.CreatedAt, s.UpdatedAt = t0.Add(-3*time.Hour), t0.Add(-3*time.Hour)
	})
	newer := e.sale(func(s *flashsale.Sale) {
		s.SKU = older.SKU
		s.State = flashsale.SaleClosed
		s.CreatedAt, s.UpdatedAt = t0.Add(-2*time.Hour), t0.Add(-2*time.Hour)
	})
	got, err := e.store.SaleBySKU(e.ctx, older.SKU)
	ok(t, "SaleBySKU", err)
	if got.ID != newer.ID {
		t.Errorf("SaleBySKU among closed sales = %s, want the newest %s", got.ID, newer.ID)
	}

	// The active sale wins over a newer closed one.
	active := e.sale(func(s *flashsale.Sale) {
		s.SKU = older.SKU
		s.CreatedAt, s.UpdatedAt = t0.Add(-90*time.Minute), t0.Add(-90*time.Minute)
	})
	e.sale(func(s *flashsale.Sale) {
		s.SKU = older.SKU
		s.State = flashsale.SaleClosed
		s.CreatedAt, s.UpdatedAt = t0, t0
	})
	got, err = e.store.SaleBySKU(e.ctx, older.SKU)
	ok(t, "SaleBySKU", err)
	if got.ID != active.ID {
		t.Errorf("SaleBySKU = %s, want the active sale %s", got.ID, active.ID)
	}
}

func testSalesNewestFirst(e *env) {
	t := e.t
	got, err := e.store.Sales(e.ctx)
	ok(t, "Sales", err)
	if len(got) != 0 {
		t.Fatalf("Sales of an empty record = %d sales", len(got))
	}
	var want []string
	for _, age := range []time.Duration{time.Hour, 3 * time.Hour, 2 * time.Hour} {
		s := e.sale(func(s *flashsale.Sale) { s.CreatedAt, s.UpdatedAt = t0.Add(-age), t0.Add(-age) })
		want = append(want, s.ID)
	}
	want = []string{want[0], want[2], want[1]}
	got, err = e.store.Sales(e.ctx)
	ok(t, "Sales", err)
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("Sales = %v, want newest first %v", ids, want)
	}
}

func testUpdateSale(e *env) {
	t := e.t
	s := e.sale()
	edit := *s
	edit.Name = "Renamed"
	edit.InitialStock = 50
	edit.ClosesAt = t0.Add(3 * time.Hour)
	edit.HoldSeconds = 120
	edit.PerUserLimit = 3
	edit.AdmissionPerSecond = 7
	edit.MinAccountAgeSeconds = 60
	edit.ChallengeBits = 4
	edit.RequireInstrument = true
	edit.NotifiedAdmissionSeconds = 600
	edit.SeedCommitment = "feed"
	edit.Display = flashsale.Display{Title: "Renamed drop", BrandColor: "#112233"}
	// Not editable: UpdateSale must leave these as recorded.
	edit.SKU = "sku-other"
	edit.State = flashsale.SaleClosed
	edit.Epoch = 9
	edit.Shards = 8
	edit.Fairness = flashsale.FairnessRandom
	edit.CreatedAt = t0

	ok(t, "UpdateSale", e.store.UpdateSale(e.ctx, &edit, 1))
	if edit.Version != 2 {
		t.Errorf("after UpdateSale, Version = %d, want 2", edit.Version)
	}
	if edit.UpdatedAt.Equal(s.UpdatedAt) || edit.UpdatedAt.IsZero() {
		t.Errorf("after UpdateSale, UpdatedAt = %v, want it set anew", edit.UpdatedAt)
	}

	want := *s
	want.Name, want.InitialStock, want.ClosesAt = "Renamed", 50, t0.Add(3*time.Hour)
	want.HoldSeconds, want.PerUserLimit, want.AdmissionPerSecond = 120, 3, 7
	want.MinAccountAgeSeconds, want.ChallengeBits, want.SeedCommitment = 60, 4, "feed"
	want.RequireInstrument = true
	want.NotifiedAdmissionSeconds = 600
	want.Display = flashsale.Display{Title: "Renamed drop", BrandColor: "#112233"}
	want.Version, want.UpdatedAt = 2, edit.UpdatedAt
	got, err := e.store.Sale(e.ctx, s.ID)
	ok(t, "Sale", err)
	same(t, "Sale after UpdateSale", *got, want)
	same(t, "UpdateSale's sale", edit, want)

	// Clearing ClosesAt and the display is an edit too.
	edit.ClosesAt = time.Time{}
	edit.Display = flashsale.Display{}
	ok(t, "UpdateSale(no closesAt)", e.store.UpdateSale(e.ctx, &edit, 2))
	got, err = e.store.Sale(e.ctx, s.ID)
	ok(t, "Sale", err)
	if !got.ClosesAt.IsZero() || got.Version != 3 || !got.Display.IsZero() {
		t.Errorf("after clearing closesAt and display: ClosesAt %v, Version %d, Display %+v; want zero, 3, zero",
			got.ClosesAt, got.Version, got.Display)
	}

	missing := newSale()
	wantIs(t, "UpdateSale(missing)", e.store.UpdateSale(e.ctx, missing, 1), flashsale.ErrNotFound)
}

func testUpdateSaleVersionConflict(e *env) {
	t := e.t
	s := e.sale()
	first := *s
	first.Name = "First writer"
	ok(t, "UpdateSale", e.store.UpdateSale(e.ctx, &first, 1))

	second := *s
	second.Name = "Second writer"
	second.InitialStock = 1
	err := e.store.UpdateSale(e.ctx, &second, 1)
	wantIs(t, "UpdateSale at a stale version", err, flashsale.ErrVersionConflict)
	if second.Name != "Second writer" || second.Version != 1 {
		t.Errorf("a refused UpdateSale changed its argument: %+v", second)
	}
	got, err := e.store.Sale(e.ctx, s.ID)
	ok(t, "Sale", err)
	same(t, "Sale after the refused update", *got, first)
}

func testSetSaleState(e *env) {
	t := e.t
	s := e.sale()

	paused, err := e.store.SetSaleState(e.ctx, s.ID, flashsale.SalePaused, "invariant drift", t0.Add(time.Minute))
	ok(t, "SetSaleState(paused)", err)
	want := *s
	want.State, want.PauseReason, want.PausedAt = flashsale.SalePaused, "invariant drift", t0.Add(time.Minute)
	want.Version, want.UpdatedAt = 2, t0.Add(time.Minute)
	same(t, "paused sale", *paused, want)
	got, err := e.store.Sale(e.ctx, s.ID)
	ok(t, "Sale", err)
	same(t, "Sale after pausing", *got, want)

	open, err := e.store.SetSaleState(e.ctx, s.ID, flashsale.SaleOpen, "ignored unless paused", t0.Add(2*time.Minute))
	ok(t, "SetSaleState(open)", err)
	want.State, want.PauseReason, want.PausedAt = flashsale.SaleOpen, "", time.Time{}
	want.Version, want.UpdatedAt = 3, t0.Add(2*time.Minute)
	same(t, "resumed sale", *open, want)

	soldOut, err := e.store.SetSaleState(e.ctx, s.ID, flashsale.SaleSoldOut, "", t0.Add(3*time.Minute))
	ok(t, "SetSaleState(sold_out)", err)
	if soldOut.State != flashsale.SaleSoldOut || soldOut.Version != 4 {
		t.Errorf("sold out: state %q version %d, want sold_out 4", soldOut.State, soldOut.Version)
	}

	_, err = e.store.SetSaleState(e.ctx, "sale_missing", flashsale.SalePaused, "x", t0)
	wantIs(t, "SetSaleState(missing)", err, flashsale.ErrNotFound)
}

func testBeginRebuild(e *env) {
	t := e.t
	s := e.sale()
	pending := e.hold(s, "u-pending", func(r *flashsale.Reservation) {
		r.Quantity = 2
		r.PaymentFingerprint = "card-1"
		r.IdempotencyKey = "key-1"
		r.RequestHash = "hash-1"
	})
	confirmed := e.hold(s, "u-confirmed", func(r *flashsale.Reservation) { r.CreatedAt = t0.Add(time.Second) })
	e.confirm(confirmed, t0.Add(time.Minute))
	cancelled := e.hold(s, "u-cancelled")
	e.cancel(cancelled, t0.Add(time.Minute))
	expired := e.hold(s, "u-expired", func(r *flashsale.Reservation) { r.ExpiresAt = t0.Add(time.Minute) })
	if got, err := e.store.ExpireDue(e.ctx, t0.Add(time.Minute), 10); err != nil || len(got) != 1 || got[0].ID != expired.ID {
		t.Fatalf("ExpireDue = %v, %v; want the one expired hold", got, err)
	}
	voided := newHold(s, "u-voided")
	voided.RestockedAt = t0.Add(time.Minute)
	if inserted, err := e.store.VoidReservation(e.ctx, voided); err != nil || !inserted {
		t.Fatalf("VoidReservation = %v, %v", inserted, err)
	}
	other := e.sale()
	e.hold(other, "u-other-sale")

	epoch, holds, err := e.store.BeginRebuild(e.ctx, s.ID, t0.Add(5*time.Minute))
	ok(t, "BeginRebuild", err)
	if epoch != 2 {
		t.Errorf("BeginRebuild epoch = %d, want 2", epoch)
	}
	want := []flashsale.Hold{
		{ReservationID: pending.ID, UserID: "u-pending", Quantity: 2, Instrument: "card-1", IdempotencyKey: "key-1", RequestHash: "hash-1", CreatedAt: t0},
		{ReservationID: confirmed.ID, UserID: "u-confirmed", Quantity: 1, CreatedAt: t0.Add(time.Second)},
	}
	sameHolds(t, "BeginRebuild holds", holds, want)

	got, err := e.store.Sale(e.ctx, s.ID)
	ok(t, "Sale", err)
	if got.Epoch != 2 || got.Version != 2 {
		t.Errorf("after BeginRebuild: epoch %d, version %d; want 2, 2", got.Epoch, got.Version)
	}

	// The old epoch, and any other, is refused; the new one is taken.
	for _, epoch := range []int64{1, 3} {
		r := newHold(s, "u-late")
		r.Epoch = epoch
		wantIs(t, "CreateReservation at a stale epoch", e.store.CreateReservation(e.ctx, r), flashsale.ErrStaleEpoch)
	}
	fresh := e.hold(s, "u-late", func(r *flashsale.Reservation) { r.Epoch = 2; r.CreatedAt = t0.Add(2 * time.Second) })

	epoch, holds, err = e.store.BeginRebuild(e.ctx, s.ID, t0.Add(6*time.Minute))
	ok(t, "second BeginRebuild", err)
	if epoch != 3 {
		t.Errorf("second BeginRebuild epoch = %d, want 3", epoch)
	}
	want = append(want, flashsale.Hold{ReservationID: fresh.ID, UserID: "u-late", Quantity: 1, CreatedAt: t0.Add(2 * time.Second)})
	sameHolds(t, "second BeginRebuild holds", holds, want)

	_, _, err = e.store.BeginRebuild(e.ctx, "sale_missing", t0)
	wantIs(t, "BeginRebuild(missing)", err, flashsale.ErrNotFound)
}

// sameHolds compares holds by reservation id, in any order.
func sameHolds(t *testing.T, what string, got, want []flashsale.Hold) {
	t.Helper()
	byID := func(hs []flashsale.Hold) map[string]flashsale.Hold {
		m := make(map[string]flashsale.Hold, len(hs))
		for _, h := range hs {
			m[h.ReservationID] = norm(h)
		}
		return m
	}
	g, w := byID(got), byID(want)
	if len(got) != len(want) || !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func testSaleTotals(e *env) {
	t := e.t
	s := e.sale()
	qty := func(n int) func(*flashsale.Reservation) {
		return func(r *flashsale.Reservation) { r.Quantity = n }
	}
	e.hold(s, "u-p1", qty(2))
	e.hold(s, "u-p2", qty(1))
	e.confirm(e.hold(s, "u-c", qty(3)), t0.Add(time.Minute))
	e.cancel(e.hold(s, "u-x", qty(4)), t0.Add(time.Minute))
	e.hold(s, "u-e", qty(5), func(r *flashsale.Reservation) { r.ExpiresAt = t0.Add(time.Second) })
	if got, err := e.store.ExpireDue(e.ctx, t0.Add(time.Second), 10); err != nil || len(got) != 1 {
		t.Fatalf("ExpireDue = %d holds, %v; want 1", len(got), err)
	}
	voided := newHold(s, "u-v")
	voided.Quantity, voided.RestockedAt = 6, t0.Add(time.Minute)
	if _, err := e.store.VoidReservation(e.ctx, voided); err != nil {
		t.Fatalf("VoidReservation: %v", err)
	}
	e.hold(e.sale(), "u-other-sale", qty(7))

	got, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", got, flashsale.SaleTotals{Pending: 3, Confirmed: 3, Expired: 5, Cancelled: 4, Voided: 6})

	got, err = totalsOf(e, "sale_missing")
	ok(t, "SaleTotals(missing)", err)
	same(t, "SaleTotals(missing)", got, flashsale.SaleTotals{})
}
