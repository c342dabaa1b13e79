package rehearsal

import (
	"strings"
	"testing"
	"time"
)

// The funnel's rows: each stage is the one before less those who ended
// there, and the final rows (the endings and bought) add up to the crowd,
// each shopper once.
func TestFunnelRowsAddUp(t *testing.T) {
	s := newStats()
	add := func(at stage, why ending, code string, n int) {
		for range n {
			s.end(at, why, code)
		}
	}
	add(stageNone, endClosed, "", 3)
	add(stageArrived, endSoldOut, "", 500)
	add(stageArrived, endGaveUp, "", 120)
	add(stageArrived, endRefused, "not_eligible", 40)
	add(stageArrived, endRefused, "not_registered", 2)
	add(stageAdmitted, endSoldOut, "sold_out", 30)
	add(stageReserved, endWalkedAway, "", 5)
	add(stageReserved, endPayFailed, "", 4)
	add(stageReserved, endPaidLate, "", 1)
	add(stageBought, endBought, "", 95)
	const crowd = 800
	rows := s.funnel(crowd)
	if got := FunnelEnds(rows); got != crowd {
		t.Fatalf("final rows add up to %d, want %d: %+v", got, crowd, rows)
	}
	stages := map[string]int64{}
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
		if r.Stage {
			stages[r.Name] = r.Count
		}
	}
	want := map[string]int64{"arrived": 797, "admitted": 135, "reserved": 105, "bought": 95}
	for k, v := range want {
		if stages[k] != v {
			t.Errorf("stage %s: %d, want %d (%v)", k, stages[k], v, stages)
		}
	}
	for _, n := range []string{"never arrived: the sale closed first", "turned away: not_eligible", "turned away: not_registered",
		"told sold out before they could reserve"} {
		if !strings.Contains(strings.Join(names, "|"), n) {
			t.Errorf("no row %q in %v", n, names)
		}
	}
}

// The verdict fails, and says why, on what the rehearsal promises: an
// oversale, a broken invariant, shoppers the funnel lost, a late sold out.
func TestVerdict(t *testing.T) {
	good := func() *Report {
		return &Report{Config: Config{Users: 10}, Store: storeFigures{Initial: 5, Confirmed: 5},
			Funnel:      []FunnelRow{{Name: "told sold out", Count: 5, Final: true}, {Name: "bought", Count: 5, Stage: true, Final: true}},
			SoldOutSeen: true, SoldOutAnnounced: 200 * time.Millisecond}
	}
	if pass, why := good().Verdict(); !pass || !strings.Contains(why, "nothing oversold") || !strings.Contains(why, "all 10 shoppers") {
		t.Fatalf("a good rehearsal: %v %q", pass, why)
	}
	for name, tc := range map[string]struct {
		spoil func(*Report)
		want  string
	}{
		"oversold":  {func(r *Report) { r.Oversold, r.Store.Confirmed = 1, 6 }, "OVERSOLD by 1 units"},
		"invariant": {func(r *Report) { r.Store.Counter = 2 }, "counter + confirmed + pending = 7, not the stock 5"},
		"lost":      {func(r *Report) { r.Funnel[0].Count = 4 }, "the funnel accounts for 9 shoppers of 10"},
		"late":      {func(r *Report) { r.SoldOutAnnounced = 1500 * time.Millisecond }, "sold out announced 1.5s after"},
		"stale":     {func(r *Report) { r.StalePolls = 3 }, "3 polls answered as if units remained"},
	} {
		r := good()
		tc.spoil(r)
		if pass, why := r.Verdict(); pass || !strings.Contains(why, tc.want) {
			t.Errorf("%s: %v %q, want FAIL saying %q", name, pass, why, tc.want)
		}
	}
}

// The progress line's admissions a second are the shoppers admitted over
// the last second of the sale's clock, not the last instant's.
func TestAdmissionRate(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	at := func(ms int, n int64) admittedAt { return admittedAt{t0.Add(time.Duration(ms) * time.Millisecond), n} }
	if r := admissionRate([]admittedAt{at(0, 0)}); r != 0 {
		t.Fatalf("one sample: %v", r)
	}
	// 250 a second, in bursts every 250 ms: the rate over the last second.
	seen := []admittedAt{at(0, 0), at(500, 125), at(1000, 250), at(1500, 375)}
	if r := admissionRate(seen); r != 250 {
		t.Fatalf("rate %v, want 250", r)
	}
	// In process, half a second of wall time is many of the sale's.
	if r := admissionRate([]admittedAt{at(0, 0), at(18000, 4500)}); r != 250 {
		t.Fatalf("over a long span: %v, want 250", r)
	}
}

// Time axes tick on round moments relative to the open.
func TestTimeTicks(t *testing.T) {
	got := []string{}
	for _, x := range timeTicks(-3, 8.5, 6) {
		got = append(got, tickText(x))
	}
	if strings.Join(got, " ") != "−2s 0 +2s +4s +6s +8s" {
		t.Errorf("ticks %v", got)
	}
	got = got[:0]
	for _, x := range timeTicks(0, 330, 6) {
		got = append(got, tickText(x))
	}
	if strings.Join(got, " ") != "0 +1m +2m +3m +4m +5m" {
		t.Errorf("ticks %v", got)
	}
	if tickText(90) != "+1m30s" || tickText(0.5) != "+0.5s" || tickText(45) != "+45s" || tickText(-120) != "−2m" {
		t.Errorf("%s %s %s %s", tickText(90), tickText(0.5), tickText(45), tickText(-120))
	}
	if ticks := niceTicks(1000, 4); ticks[len(ticks)-1] != 1000 || len(ticks) != 3 {
		t.Errorf("value ticks %v", ticks)
	}
}
