package storetest

import (
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// testSpentAdmissions: the record keeps the admission each hold spent and
// gives back, for a gate rebuilt from it, those of every hold that is not
// voided, whatever its state (a cancelled or expired hold took its turn
// too); and it refuses a second hold on an admission, whatever the gate
// said, except where the first was voided.
func testSpentAdmissions(e *env) {
	t := e.t
	s, other := e.sale(), e.sale()
	spend := func(adm string) func(*flashsale.Reservation) {
		return func(r *flashsale.Reservation) { r.AdmissionID = adm }
	}
	e.hold(s, "u-1", spend("adm-1"))
	e.confirm(e.hold(s, "u-2", spend("adm-2")), t0.Add(time.Minute))
	e.cancel(e.hold(s, "u-3", spend("adm-3")), t0.Add(time.Minute))
	expiring := e.hold(s, "u-4", spend("adm-4"), func(r *flashsale.Reservation) { r.ExpiresAt = t0.Add(time.Second) })
	expired, err := e.store.ExpireDue(e.ctx, t0.Add(time.Minute), 10)
	ok(t, "ExpireDue", err)
	if len(expired) != 1 || expired[0].ID != expiring.ID {
		t.Fatalf("ExpireDue = %v; want %s", ids(expired), expiring.ID)
	}
	e.hold(s, "u-5") // spent none
	tomb := newHold(s, "u-6")
	tomb.AdmissionID, tomb.RestockedAt = "adm-6", t0.Add(time.Second)
	if inserted, err := e.store.VoidReservation(e.ctx, tomb); err != nil || !inserted {
		t.Fatalf("VoidReservation = %v, %v", inserted, err)
	}
	e.hold(other, "u-7", spend("adm-7"))

	want := []flashsale.SpentAdmission{
		{UserID: "u-1", AdmissionID: "adm-1"}, {UserID: "u-2", AdmissionID: "adm-2"},
		{UserID: "u-3", AdmissionID: "adm-3"}, {UserID: "u-4", AdmissionID: "adm-4"},
	}
	check := func(stage string) {
		t.Helper()
		got, err := e.store.SpentAdmissions(e.ctx, s.ID)
		ok(t, "SpentAdmissions", err)
		slices.SortFunc(got, func(a, b flashsale.SpentAdmission) int { return strings.Compare(a.AdmissionID, b.AdmissionID) })
		if !slices.Equal(got, want) {
			t.Errorf("%s: SpentAdmissions = %+v; want %+v", stage, got, want)
		}
	}
	check("after the holds")

	// A turn is taken once: a second hold on it is refused, live or not
	// the first, by the same shopper or another.
	for _, u := range []struct{ user, adm string }{{"u-9", "adm-1"}, {"u-3", "adm-3"}, {"u-9", "adm-4"}} {
		again := newHold(s, u.user)
		again.AdmissionID = u.adm
		wantIs(t, u.user+"'s hold on "+u.adm, e.store.CreateReservation(e.ctx, again), flashsale.ErrDuplicate)
	}
	// A voided hold gave its admission back; an admission of another sale
	// is another turn.
	e.hold(s, "u-6", spend("adm-6"))
	e.hold(s, "u-10", spend("adm-7"))
	want = append(want, flashsale.SpentAdmission{UserID: "u-6", AdmissionID: "adm-6"},
		flashsale.SpentAdmission{UserID: "u-10", AdmissionID: "adm-7"})

	// A rebuild reads them after it has bumped the epoch.
	_, _, err = e.store.BeginRebuild(e.ctx, s.ID, t0.Add(3*time.Minute))
	ok(t, "BeginRebuild", err)
	check("after BeginRebuild")

	none, err := e.store.SpentAdmissions(e.ctx, "sale_missing")
	ok(t, "SpentAdmissions(no such sale)", err)
	if len(none) != 0 {
		t.Errorf("SpentAdmissions(no such sale) = %+v; want none", none)
	}
}
