package storetest

import (
	"time"

	"github.com/flashsale/flashsale"
)

// testAttempts: every reservation of the sale but the voided, with its
// instrument, the account's age and the order it became, oldest first.
func testAttempts(e *env) {
	s := e.sale()
	born := t0.Add(-48 * time.Hour)
	a := e.hold(s, "u-a", func(r *flashsale.Reservation) { r.PaymentFingerprint, r.AccountCreated = "card-1", born })
	b := e.hold(s, "u-b", func(r *flashsale.Reservation) { r.CreatedAt = r.CreatedAt.Add(time.Second) })
	_, ord, err := e.store.ConfirmReservation(e.ctx, a.ID, "u-a", "pay", t0.Add(time.Minute))
	if err != nil {
		e.t.Fatal(err)
	}
	void := newHold(s, "u-v")
	void.State, void.RestockedAt = flashsale.ReservationVoided, t0
	if _, err := e.store.VoidReservation(e.ctx, void); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.store.Attempts(e.ctx, s.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(got) != 2 {
		e.t.Fatalf("%d attempts, want 2 (the voided one left out): %+v", len(got), got)
	}
	first, second := got[0], got[1]
	if first.ReservationID != a.ID || first.Instrument != "card-1" || !first.AccountCreated.Equal(born) ||
		first.OrderID != ord.ID || first.OrderState != flashsale.OrderConfirmed || first.OrderVersion != ord.Version ||
		first.State != flashsale.ReservationConfirmed || first.Quantity != 1 {
		e.t.Fatalf("first attempt %+v (order %+v)", first, ord)
	}
	if second.ReservationID != b.ID || second.OrderID != "" || !second.AccountCreated.IsZero() || second.State != flashsale.ReservationPending {
		e.t.Fatalf("second attempt %+v", second)
	}
}
