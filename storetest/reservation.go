package storetest

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

func testReservationCreateAndRead(e *env) {
	t := e.t
	s := e.sale()
	r := newHold(s, "u-1")
	r.Quantity = 2
	r.PaymentFingerprint, r.IdempotencyKey, r.RequestHash = "card-1", "key-1", "hash-1"
	ok(t, "CreateReservation", e.store.CreateReservation(e.ctx, r))
	if r.State != flashsale.ReservationPending || r.Version != 1 {
		t.Errorf("after CreateReservation: state %q, version %d; want pending, 1", r.State, r.Version)
	}

	want := flashsale.Reservation{
		ID: r.ID, SaleID: s.ID, SKU: s.SKU, UserID: "u-1", Quantity: 2,
		State: flashsale.ReservationPending, PaymentFingerprint: "card-1",
		IdempotencyKey: "key-1", RequestHash: "hash-1", Epoch: 1,
		CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute), Version: 1,
	}
	same(t, "Reservation", *e.reservation(r.ID), want)

	_, err := e.store.Reservation(e.ctx, "res_missing")
	wantIs(t, "Reservation(missing)", err, flashsale.ErrNotFound)

	orphan := newHold(s, "u-2")
	orphan.SaleID = "sale_missing"
	wantIs(t, "CreateReservation(no such sale)", e.store.CreateReservation(e.ctx, orphan), flashsale.ErrNotFound)
}

func testReservationDuplicateLiveHold(e *env) {
	t := e.t
	s := e.sale()
	first := e.hold(s, "u-1")

	sameID := newHold(s, "u-2")
	sameID.ID = first.ID
	wantIs(t, "CreateReservation(same id)", e.store.CreateReservation(e.ctx, sameID), flashsale.ErrDuplicate)

	second := newHold(s, "u-1")
	wantIs(t, "second live hold of a shopper", e.store.CreateReservation(e.ctx, second), flashsale.ErrDuplicate)

	// The limit is per sale, and holds without instrument or key do not
	// collide with each other.
	e.hold(e.sale(), "u-1")
	e.hold(s, "u-2")
	e.hold(s, "u-3")

	// Once the first hold is over, the shopper may try again.
	e.cancel(first, t0.Add(time.Minute))
	again := e.hold(s, "u-1")

	// A confirmed hold is live too.
	e.confirm(again, t0.Add(2*time.Minute))
	wantIs(t, "a hold beside a confirmed one", e.store.CreateReservation(e.ctx, newHold(s, "u-1")), flashsale.ErrDuplicate)

	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Pending: 2, Confirmed: 1, Cancelled: 1})
}

func testReservationDuplicateInstrument(e *env) {
	t := e.t
	s := e.sale()
	card := func(r *flashsale.Reservation) { r.PaymentFingerprint = "card-1" }
	first := e.hold(s, "u-1", card)

	other := newHold(s, "u-2")
	card(other)
	wantIs(t, "a second live hold on one instrument", e.store.CreateReservation(e.ctx, other), flashsale.ErrDuplicate)

	e.hold(e.sale(), "u-2", card) // another sale
	e.cancel(first, t0.Add(time.Minute))
	e.hold(s, "u-2", card)
}

func testReservationIdempotencyKey(e *env) {
	t := e.t
	s := e.sale()
	key := func(k string) func(*flashsale.Reservation) {
		return func(r *flashsale.Reservation) { r.IdempotencyKey, r.RequestHash = k, "hash-"+k }
	}
	first := e.hold(s, "u-1", key("k1"))

	got, err := e.store.ReservationByKey(e.ctx, s.ID, "u-1", "k1")
	ok(t, "ReservationByKey", err)
	same(t, "ReservationByKey", *got, *e.reservation(first.ID))

	// Keys are the shopper's own: another shopper may use the same one.
	theirs := e.hold(s, "u-2", key("k1"))
	got, err = e.store.ReservationByKey(e.ctx, s.ID, "u-2", "k1")
	ok(t, "ReservationByKey(u-2)", err)
	if got.ID != theirs.ID {
		t.Errorf("ReservationByKey(u-2) = %s, want %s", got.ID, theirs.ID)
	}

	for _, c := range []struct{ sale, user, key string }{
		{s.ID, "u-1", "k2"},
		{s.ID, "u-3", "k1"},
		{"sale_missing", "u-1", "k1"},
		{s.ID, "u-4", ""},
	} {
		_, err := e.store.ReservationByKey(e.ctx, c.sale, c.user, c.key)
		wantIs(t, fmt.Sprintf("ReservationByKey(%q, %q, %q)", c.sale, c.user, c.key), err, flashsale.ErrNotFound)
	}
	e.hold(s, "u-4") // a hold without a key is not found under ""
	_, err = e.store.ReservationByKey(e.ctx, s.ID, "u-4", "")
	wantIs(t, `ReservationByKey under ""`, err, flashsale.ErrNotFound)

	// The key names its reservation whatever became of it.
	e.cancel(first, t0.Add(time.Minute))
	reused := newHold(s, "u-1")
	key("k1")(reused)
	wantIs(t, "a new hold under a used key", e.store.CreateReservation(e.ctx, reused), flashsale.ErrDuplicate)
	got, err = e.store.ReservationByKey(e.ctx, s.ID, "u-1", "k1")
	ok(t, "ReservationByKey after cancel", err)
	if got.ID != first.ID || got.State != flashsale.ReservationCancelled {
		t.Errorf("ReservationByKey after cancel = %s %s, want %s cancelled", got.ID, got.State, first.ID)
	}
	e.hold(s, "u-1", key("k2"))
}

func testReservationStaleEpoch(e *env) {
	t := e.t
	s := e.sale(func(s *flashsale.Sale) { s.Epoch = 5 })
	for _, epoch := range []int64{0, 4, 6} {
		r := newHold(s, "u-1")
		r.Epoch = epoch
		wantIs(t, fmt.Sprintf("CreateReservation at epoch %d of 5", epoch), e.store.CreateReservation(e.ctx, r), flashsale.ErrStaleEpoch)
	}
	e.hold(s, "u-1")
	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Pending: 1})
}

func testConfirm(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1", func(r *flashsale.Reservation) { r.Quantity = 2 })
	at := t0.Add(time.Minute)

	res, ord, err := e.store.ConfirmReservation(e.ctx, r.ID, "u-1", "pay-1", at)
	ok(t, "ConfirmReservation", err)
	if ord == nil || !strings.HasPrefix(ord.ID, "ord_") {
		t.Fatalf("ConfirmReservation order = %+v, want an ord_ id", ord)
	}
	wantRes := flashsale.Reservation{
		ID: r.ID, SaleID: s.ID, SKU: s.SKU, UserID: "u-1", Quantity: 2,
		State: flashsale.ReservationConfirmed, Epoch: 1,
		CreatedAt: t0, ExpiresAt: r.ExpiresAt, ConfirmedAt: at, OrderID: ord.ID, Version: 2,
	}
	wantOrd := flashsale.Order{
		ID: ord.ID, ReservationID: r.ID, SaleID: s.ID, SKU: s.SKU, UserID: "u-1", Quantity: 2,
		State: flashsale.OrderConfirmed, PaymentRef: "pay-1", Version: 1, CreatedAt: at, UpdatedAt: at,
	}
	same(t, "confirmed reservation", *res, wantRes)
	same(t, "order", *ord, wantOrd)
	same(t, "Reservation", *e.reservation(r.ID), wantRes)
	got, err := e.store.Order(e.ctx, ord.ID)
	ok(t, "Order", err)
	same(t, "Order", *got, wantOrd)

	// Confirming again, even after the hold would have ended, returns the
	// same order and changes nothing.
	res, again, err := e.store.ConfirmReservation(e.ctx, r.ID, "u-1", "pay-2", t0.Add(time.Hour))
	ok(t, "ConfirmReservation again", err)
	same(t, "reservation confirmed again", *res, wantRes)
	same(t, "order confirmed again", *again, wantOrd)
	orders, err := e.store.Orders(e.ctx, s.ID)
	ok(t, "Orders", err)
	if len(orders) != 1 {
		t.Errorf("Orders = %d orders after two confirms, want 1", len(orders))
	}
	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Confirmed: 2})

	_, _, err = e.store.ConfirmReservation(e.ctx, r.ID, "u-2", "pay-3", at)
	wantIs(t, "ConfirmReservation by another shopper", err, flashsale.ErrNotFound)
	_, _, err = e.store.ConfirmReservation(e.ctx, "res_missing", "u-1", "pay-3", at)
	wantIs(t, "ConfirmReservation(missing)", err, flashsale.ErrNotFound)
}

func testConfirmExpired(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1")

	// Still pending (no sweeper has run), but the hold ended at ExpiresAt.
	for _, at := range []time.Time{r.ExpiresAt, r.ExpiresAt.Add(time.Minute)} {
		_, _, err := e.store.ConfirmReservation(e.ctx, r.ID, "u-1", "pay", at)
		wantCode(t, "ConfirmReservation at "+at.Format(time.TimeOnly), err, flashsale.CodeReservationExpired)
	}
	got := e.reservation(r.ID)
	if got.State != flashsale.ReservationPending || got.Version != 1 || !got.RestockedAt.IsZero() {
		t.Errorf("a refused confirm changed the hold: %+v", got)
	}

	// Expired by the sweeper: refused whatever the clock says.
	if due, err := e.store.ExpireDue(e.ctx, r.ExpiresAt, 10); err != nil || len(due) != 1 {
		t.Fatalf("ExpireDue = %d, %v; want 1", len(due), err)
	}
	_, _, err := e.store.ConfirmReservation(e.ctx, r.ID, "u-1", "pay", t0.Add(time.Minute))
	wantCode(t, "ConfirmReservation of an expired hold", err, flashsale.CodeReservationExpired)

	orders, err := e.store.Orders(e.ctx, s.ID)
	ok(t, "Orders", err)
	if len(orders) != 0 {
		t.Errorf("Orders = %d, want none", len(orders))
	}
}

func testConfirmRefused(e *env) {
	t := e.t
	s := e.sale()
	cancelled := e.hold(s, "u-1")
	e.cancel(cancelled, t0.Add(time.Minute))
	_, _, err := e.store.ConfirmReservation(e.ctx, cancelled.ID, "u-1", "pay", t0.Add(2*time.Minute))
	wantCode(t, "ConfirmReservation of a cancelled hold", err, flashsale.CodeReservationCancelled)

	voided := newHold(s, "u-2")
	voided.RestockedAt = t0
	if _, err := e.store.VoidReservation(e.ctx, voided); err != nil {
		t.Fatalf("VoidReservation: %v", err)
	}
	_, _, err = e.store.ConfirmReservation(e.ctx, voided.ID, "u-2", "pay", t0.Add(time.Minute))
	wantIs(t, "ConfirmReservation of a voided hold", err, flashsale.ErrNotFound)

	if got := e.reservation(cancelled.ID); got.State != flashsale.ReservationCancelled || got.OrderID != "" {
		t.Errorf("cancelled hold after a refused confirm: %+v", got)
	}
}

func testCancel(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1", func(r *flashsale.Reservation) { r.Quantity = 3 })

	res, restocked, err := e.store.CancelReservation(e.ctx, r.ID, "u-1", t0.Add(time.Minute))
	ok(t, "CancelReservation", err)
	if !restocked {
		t.Errorf("the first CancelReservation did not restock")
	}
	want := flashsale.Reservation{
		ID: r.ID, SaleID: s.ID, SKU: s.SKU, UserID: "u-1", Quantity: 3,
		State: flashsale.ReservationCancelled, Epoch: 1,
		CreatedAt: t0, ExpiresAt: r.ExpiresAt, RestockedAt: t0.Add(time.Minute), Version: 2,
	}
	same(t, "cancelled reservation", *res, want)

	res, restocked, err = e.store.CancelReservation(e.ctx, r.ID, "u-1", t0.Add(2*time.Minute))
	ok(t, "CancelReservation again", err)
	if restocked {
		t.Errorf("the second CancelReservation restocked again")
	}
	if res == nil {
		t.Fatalf("CancelReservation again returned no reservation")
	}
	same(t, "reservation cancelled again", *res, want)
	same(t, "Reservation", *e.reservation(r.ID), want)

	// A hold past its end that no sweeper has reached yet: whichever of
	// cancel and sweeper comes first ends it, once.
	late := e.hold(s, "u-2")
	_, restocked, err = e.store.CancelReservation(e.ctx, late.ID, "u-2", late.ExpiresAt.Add(time.Minute))
	ok(t, "CancelReservation past expiry", err)
	if !restocked {
		t.Errorf("CancelReservation past expiry, before the sweeper, did not restock")
	}
	if due, err := e.store.ExpireDue(e.ctx, late.ExpiresAt.Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Errorf("ExpireDue after the cancel = %d holds, %v; want none", len(due), err)
	}
}

func testCancelRefused(e *env) {
	t := e.t
	s := e.sale()
	r := e.hold(s, "u-1")
	_, _, err := e.store.CancelReservation(e.ctx, r.ID, "u-2", t0.Add(time.Minute))
	wantIs(t, "CancelReservation by another shopper", err, flashsale.ErrNotFound)
	if got := e.reservation(r.ID); got.State != flashsale.ReservationPending || got.Version != 1 {
		t.Errorf("another shopper's cancel changed the hold: %+v", got)
	}
	_, _, err = e.store.CancelReservation(e.ctx, "res_missing", "u-1", t0)
	wantIs(t, "CancelReservation(missing)", err, flashsale.ErrNotFound)

	e.confirm(r, t0.Add(time.Minute))
	_, restocked, err := e.store.CancelReservation(e.ctx, r.ID, "u-1", t0.Add(2*time.Minute))
	wantCode(t, "CancelReservation of a confirmed hold", err, flashsale.CodeReservationConfirmed)
	if restocked {
		t.Errorf("a refused cancel restocked")
	}

	expired := e.hold(s, "u-3", func(r *flashsale.Reservation) { r.ExpiresAt = t0.Add(time.Minute) })
	if due, err := e.store.ExpireDue(e.ctx, t0.Add(time.Minute), 10); err != nil || len(due) != 1 {
		t.Fatalf("ExpireDue = %d, %v; want 1", len(due), err)
	}
	_, restocked, err = e.store.CancelReservation(e.ctx, expired.ID, "u-3", t0.Add(2*time.Minute))
	wantCode(t, "CancelReservation of an expired hold", err, flashsale.CodeReservationExpired)
	if restocked {
		t.Errorf("a refused cancel restocked")
	}

	voided := newHold(s, "u-4")
	voided.RestockedAt = t0
	if _, err := e.store.VoidReservation(e.ctx, voided); err != nil {
		t.Fatalf("VoidReservation: %v", err)
	}
	_, _, err = e.store.CancelReservation(e.ctx, voided.ID, "u-4", t0.Add(time.Minute))
	wantIs(t, "CancelReservation of a voided hold", err, flashsale.ErrNotFound)

	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Confirmed: 1, Expired: 1, Voided: 1})
}

func testExpireDue(e *env) {
	t := e.t
	s := e.sale()
	ends := func(d time.Duration) func(*flashsale.Reservation) {
		return func(r *flashsale.Reservation) { r.ExpiresAt = t0.Add(d) }
	}
	h1 := e.hold(s, "u-1", ends(time.Minute))
	h2 := e.hold(s, "u-2", ends(2*time.Minute))
	h3 := e.hold(s, "u-3", ends(3*time.Minute))
	confirmed := e.hold(s, "u-4", ends(time.Minute))
	e.confirm(confirmed, t0.Add(30*time.Second))
	cancelled := e.hold(s, "u-5", ends(time.Minute))
	e.cancel(cancelled, t0.Add(30*time.Second))
	other := e.sale()
	h4 := e.hold(other, "u-1", ends(90*time.Second))

	none, err := e.store.ExpireDue(e.ctx, t0.Add(59*time.Second), 10)
	ok(t, "ExpireDue before any hold ends", err)
	if len(none) != 0 {
		t.Errorf("ExpireDue before any hold ends = %d holds", len(none))
	}

	now := t0.Add(2 * time.Minute) // h2 ends exactly now: due
	due, err := e.store.ExpireDue(e.ctx, now, 10)
	ok(t, "ExpireDue", err)
	got := map[string]*flashsale.Reservation{}
	for _, r := range due {
		got[r.ID] = r
	}
	if len(due) != 3 || len(got) != 3 || got[h1.ID] == nil || got[h2.ID] == nil || got[h4.ID] == nil {
		t.Fatalf("ExpireDue(%v) = %v, want %s, %s and %s", now, ids(due), h1.ID, h2.ID, h4.ID)
	}
	for _, h := range []*flashsale.Reservation{h1, h2, h4} {
		want := *h
		want.SKU = s.SKU
		if h == h4 {
			want.SKU = other.SKU
		}
		want.State, want.RestockedAt, want.Version = flashsale.ReservationExpired, now, 2
		same(t, "expired hold", *got[h.ID], want)
		same(t, "Reservation of an expired hold", *e.reservation(h.ID), want)
	}

	again, err := e.store.ExpireDue(e.ctx, now, 10)
	ok(t, "ExpireDue again", err)
	if len(again) != 0 {
		t.Errorf("ExpireDue again = %v, want none: each hold is returned once", ids(again))
	}
	if r := e.reservation(h3.ID); r.State != flashsale.ReservationPending {
		t.Errorf("a hold not yet due was %s", r.State)
	}
	if r := e.reservation(confirmed.ID); r.State != flashsale.ReservationConfirmed || !r.RestockedAt.IsZero() {
		t.Errorf("ExpireDue touched a confirmed hold: %+v", r)
	}
	if r := e.reservation(cancelled.ID); r.State != flashsale.ReservationCancelled || !r.RestockedAt.Equal(t0.Add(30*time.Second)) {
		t.Errorf("ExpireDue touched a cancelled hold: %+v", r)
	}
}

func testExpireDueLimit(e *env) {
	t := e.t
	s := e.sale()
	var holds []*flashsale.Reservation
	for i := range 5 {
		// Created in the reverse order of their ends.
		holds = append(holds, e.hold(s, fmt.Sprintf("u-%d", i), func(r *flashsale.Reservation) {
			r.ExpiresAt = t0.Add(time.Duration(5-i) * time.Minute)
		}))
	}
	now := t0.Add(time.Hour)

	zero, err := e.store.ExpireDue(e.ctx, now, 0)
	ok(t, "ExpireDue(limit 0)", err)
	if len(zero) != 0 {
		t.Errorf("ExpireDue(limit 0) = %d holds", len(zero))
	}

	// Oldest end first, at most limit at a time.
	for i, want := range [][]string{{holds[4].ID, holds[3].ID}, {holds[2].ID, holds[1].ID}, {holds[0].ID}, {}} {
		due, err := e.store.ExpireDue(e.ctx, now, 2)
		ok(t, "ExpireDue", err)
		gotIDs := ids(due)
		if !sameSet(gotIDs, want) {
			t.Errorf("ExpireDue call %d = %v, want %v", i+1, gotIDs, want)
		}
	}
	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Expired: 5})
}

func testVoid(e *env) {
	t := e.t
	s := e.sale()
	r := newHold(s, "u-1")
	r.Quantity = 2
	r.PaymentFingerprint, r.IdempotencyKey, r.RequestHash = "card-1", "key-1", "hash-1"
	r.RestockedAt = t0.Add(time.Second)

	inserted, err := e.store.VoidReservation(e.ctx, r)
	ok(t, "VoidReservation", err)
	if !inserted {
		t.Fatalf("VoidReservation of an unknown id reported false")
	}
	want := flashsale.Reservation{
		ID: r.ID, SaleID: s.ID, SKU: s.SKU, UserID: "u-1", Quantity: 2,
		State: flashsale.ReservationVoided, PaymentFingerprint: "card-1", Epoch: 1,
		CreatedAt: t0, ExpiresAt: r.ExpiresAt, RestockedAt: t0.Add(time.Second), Version: 1,
	}
	same(t, "voided reservation", *e.reservation(r.ID), want)

	inserted, err = e.store.VoidReservation(e.ctx, r)
	ok(t, "VoidReservation again", err)
	if inserted {
		t.Errorf("VoidReservation again reported true: the units would go back twice")
	}

	// The tombstone wins over a late write of the same hold.
	late := newHold(s, "u-1")
	late.ID = r.ID
	wantIs(t, "CreateReservation of a voided id", e.store.CreateReservation(e.ctx, late), flashsale.ErrDuplicate)

	// Voiding a hold the record has changes nothing.
	live := e.hold(s, "u-2", func(h *flashsale.Reservation) { h.IdempotencyKey, h.RequestHash = "key-2", "hash-2" })
	before := e.reservation(live.ID)
	tomb := *live
	tomb.RestockedAt = t0.Add(time.Minute)
	inserted, err = e.store.VoidReservation(e.ctx, &tomb)
	ok(t, "VoidReservation of a recorded hold", err)
	if inserted {
		t.Errorf("VoidReservation of a recorded hold reported true")
	}
	same(t, "the recorded hold after VoidReservation", *e.reservation(live.ID), *before)

	noTime := newHold(s, "u-3")
	if _, err := e.store.VoidReservation(e.ctx, noTime); err == nil {
		t.Errorf("VoidReservation without RestockedAt succeeded")
	}

	totals, err := totalsOf(e, s.ID)
	ok(t, "SaleTotals", err)
	same(t, "SaleTotals", totals, flashsale.SaleTotals{Pending: 1, Voided: 2})
}

func testVoidThenRetryUnderKey(e *env) {
	t := e.t
	s := e.sale()
	// The gate said yes, the record write failed, the hold was voided.
	failed := newHold(s, "u-1")
	failed.PaymentFingerprint, failed.IdempotencyKey, failed.RequestHash = "card-1", "key-1", "hash-1"
	failed.RestockedAt = t0.Add(time.Second)
	if inserted, err := e.store.VoidReservation(e.ctx, failed); err != nil || !inserted {
		t.Fatalf("VoidReservation = %v, %v", inserted, err)
	}
	_, err := e.store.ReservationByKey(e.ctx, s.ID, "u-1", "key-1")
	wantIs(t, "ReservationByKey of a voided hold's key", err, flashsale.ErrNotFound)

	// The shopper's retry under the same key, user and instrument is a
	// fresh hold.
	retry := e.hold(s, "u-1", func(r *flashsale.Reservation) {
		r.PaymentFingerprint, r.IdempotencyKey, r.RequestHash = "card-1", "key-1", "hash-1"
		r.CreatedAt = t0.Add(2 * time.Second)
	})
	got, err := e.store.ReservationByKey(e.ctx, s.ID, "u-1", "key-1")
	ok(t, "ReservationByKey", err)
	if got.ID != retry.ID || got.State != flashsale.ReservationPending {
		t.Errorf("ReservationByKey = %s %s, want the retry %s pending", got.ID, got.State, retry.ID)
	}
}

func testReservationStates(e *env) {
	t := e.t
	s := e.sale()
	r1 := e.hold(s, "u-1")
	r2 := e.hold(s, "u-2")
	e.cancel(r2, t0.Add(time.Minute))
	r3 := e.hold(s, "u-3")
	e.confirm(r3, t0.Add(time.Minute))
	r4 := e.hold(e.sale(), "u-4")

	got, err := e.store.ReservationStates(e.ctx, s.ID, []string{r1.ID, r2.ID, r3.ID, r4.ID, "res_missing"})
	ok(t, "ReservationStates", err)
	want := map[string]flashsale.ReservationState{
		r1.ID: flashsale.ReservationPending,
		r2.ID: flashsale.ReservationCancelled,
		r3.ID: flashsale.ReservationConfirmed,
	}
	if !maps.Equal(got, want) {
		t.Errorf("ReservationStates = %v, want %v", got, want)
	}

	got, err = e.store.ReservationStates(e.ctx, s.ID, nil)
	ok(t, "ReservationStates(none)", err)
	if len(got) != 0 {
		t.Errorf("ReservationStates(none) = %v", got)
	}

	// Many ids at once (more than fit in one statement of some engines).
	many := []string{r1.ID}
	for i := range 1500 {
		many = append(many, fmt.Sprintf("res_missing_%d", i))
	}
	many = append(many, r3.ID)
	got, err = e.store.ReservationStates(e.ctx, s.ID, many)
	ok(t, "ReservationStates(many)", err)
	want = map[string]flashsale.ReservationState{r1.ID: flashsale.ReservationPending, r3.ID: flashsale.ReservationConfirmed}
	if !maps.Equal(got, want) {
		t.Errorf("ReservationStates(many) = %v, want %v", got, want)
	}
}

func ids(rs []*flashsale.Reservation) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// sameSet reports whether a and b hold the same distinct strings.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]bool, len(a))
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return len(m) == len(a)
}
