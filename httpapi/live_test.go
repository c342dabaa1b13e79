package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// A subscriber that falls liveBuffer events behind is let go, and the
// producer never waits for it.
func TestLiveSlowSubscriberIsLetGo(t *testing.T) {
	sub := &liveSub{ch: make(chan *liveFrame, liveBuffer), gone: make(chan struct{})}
	for i := range liveBuffer {
		send(sub, &liveFrame{id: int64(i)})
	}
	select {
	case <-sub.gone:
		t.Fatal("let go with its buffer only just full")
	default:
	}
	send(sub, &liveFrame{id: liveBuffer}) // returns at once: the buffer is full
	select {
	case <-sub.gone:
	default:
		t.Fatal("a subscriber a buffer behind was kept")
	}
}

// Rates are the counts' growth over the seconds between two samples; a
// count that went back (the gate rebuilt: a new epoch) counts nothing.
func TestLiveRates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	from := liveSample{at: t0, admitted: 10, won: 5, epoch: 1, reserves: 7,
		rejections: map[string]int64{"sold_out": 2, "rate_limited": 4}}
	to := liveSample{at: t0.Add(2 * time.Second), admitted: 30, won: 9, epoch: 1, reserves: 17,
		rejections: map[string]int64{"sold_out": 12, "rate_limited": 4, "not_eligible": 1}}
	r := rates(&from, &to)
	if r.Seconds != 2 || r.Admissions != 10 || r.Wins != 2 || r.Reserves != 5 ||
		r.Rejections["sold_out"] != 5 || r.Rejections["not_eligible"] != 0.5 || len(r.Rejections) != 2 {
		t.Fatalf("rates: %+v", r)
	}
	to.epoch, to.won = 2, 1
	if r := rates(&from, &to); r.Wins != 0 {
		t.Fatalf("wins across a rebuild: %v, want 0", r.Wins)
	}
	if r := rates(&to, &to); r.Seconds != 0 || r.Admissions != 0 {
		t.Fatalf("rates over no time: %+v", r)
	}
}

func TestLiveRingAndSpark(t *testing.T) {
	var ring []int
	for i := range 10 {
		ring = appendRing(ring, i, 4)
	}
	if len(ring) != 4 || ring[0] != 6 || ring[3] != 9 {
		t.Fatalf("ring %v, want the last four", ring)
	}
	var pts []livePoint
	for i := range 121 {
		n := int64(i)
		pts = append(pts, livePoint{UnitsLeft: &n})
	}
	sp := spark(pts, 60)
	if len(sp) != 60 || *sp[0] != 0 || *sp[59] != 120 {
		t.Fatalf("spark of 121 points: %d points from %d to %d; want 60 from the first to the last", len(sp), *sp[0], *sp[59])
	}
	if sp := spark(pts[:3], 60); len(sp) != 3 {
		t.Fatalf("spark of 3 points: %d", len(sp))
	}
}

// auditGate answers Audit with fixed entries.
type auditGate struct {
	flashsale.GateAdmin
	entries []flashsale.AuditEntry
}

func (g auditGate) Audit(context.Context, string, int) ([]flashsale.AuditEntry, error) {
	return g.entries, nil
}

// The moment a sale sold out, when the feed first sees it sold out, is
// the gate log's entry that took the last unit: the oldest of the newest
// run at zero.
func TestSoldOutFromAudit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	g := auditGate{entries: []flashsale.AuditEntry{ // newest first
		{At: at(9), Counter: 0, Op: "pause"},
		{At: at(8), Counter: 0, Op: "reserve"}, // took the last unit again
		{At: at(7), Counter: 1, Op: "restock"},
		{At: at(5), Counter: 0, Op: "reserve"},
		{At: at(1), Counter: 1, Op: "load"},
	}}
	if got := soldOutFromAudit(context.Background(), g, "s"); !got.Equal(at(8)) {
		t.Fatalf("sold out at %v, want %v", got, at(8))
	}
	g.entries = g.entries[:2] // the log read does not reach back far enough
	if got := soldOutFromAudit(context.Background(), g, "s"); !got.IsZero() {
		t.Fatalf("sold out at %v, want unknown", got)
	}
}
