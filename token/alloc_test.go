//go:build !race

// The race detector drops pooled objects on purpose, so allocations are
// counted only without it.

package token_test

import "testing"

func TestVerifyAllocations(t *testing.T) {
	ring := newRing(t, testKey("k1"), testKey("k2"))
	tkt := ring.SignTicket(sampleTicket())
	adm := ring.SignAdmission(sampleAdmission())
	forged := tkt[:len(tkt)-1] + "A"
	for _, tc := range []struct {
		name string
		f    func()
		want float64
	}{
		// One string per verified token; a forged one costs nothing.
		{"ticket", func() { _, _ = ring.VerifyTicket(tkt, sampleSale) }, 1},
		{"admission", func() { _, _ = ring.VerifyAdmission(adm, t0) }, 1},
		{"forged", func() { _, _ = ring.VerifyTicket(forged, sampleSale) }, 0},
	} {
		tc.f() // fill the pool
		// A GC during the run may empty the pool; allow a little slack.
		if n := testing.AllocsPerRun(500, tc.f); n > tc.want+0.1 {
			t.Errorf("%s: %.2f allocations per verification, want %v", tc.name, n, tc.want)
		}
	}
}
