package rehearsal

import (
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// Every duration falls in a bucket whose upper bound is at least the
// duration and less than a quarter more, so quantiles are close and never
// flattering.
func TestBucketBounds(t *testing.T) {
	for _, d := range []time.Duration{1, 2, 7, 8, 9, 100, 1023, 1024, 1025, time.Microsecond, 37 * time.Millisecond, 3 * time.Second, time.Hour} {
		i := bucketOf(d)
		if up := upper(i); up < d || float64(up) > float64(d)*1.25+1 {
			t.Errorf("%v: bucket %d reaches up to %v", d, i, up)
		}
		if i > 0 && upper(i-1) >= d {
			t.Errorf("%v: the bucket below (%d) already reaches %v", d, i-1, upper(i-1))
		}
	}
}

func TestQuantile(t *testing.T) {
	var h hist
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.25 {
			t.Errorf("q%.2f = %v, want about %v", c.q, got, c.want)
		}
	}
	var empty hist
	if empty.quantile(0.99) != 0 {
		t.Error("an empty histogram has a quantile")
	}
}

// Tickets kept in chunks come back as they went in, across chunks, from
// many goroutines.
func TestTickets(t *testing.T) {
	tk := newTickets(1000)
	refs := make([]ticketRef, 2000)
	want := func(i int) string { return fmt.Sprintf("tkt.%0*d", 100+i%50, i) }
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(refs); i += 4 {
				refs[i] = tk.put(want(i))
			}
		}()
	}
	wg.Wait()
	for i, r := range refs {
		if got := tk.get(r); got != want(i) {
			t.Fatalf("ticket %d: %q", i, got)
		}
	}
	if tk.get(ticketRef{}) != "" || tk.put("") != (ticketRef{}) {
		t.Fatal("the empty ticket")
	}
}

// TestStatsWindows: a timeline window holds the answers since the last
// one, and the route's totals hold them all.
func TestStatsWindows(t *testing.T) {
	s := newStats()
	for range 3 {
		s.record(routeStatus, time.Millisecond, "", 0)
	}
	if w := s.swap(); w.lat[routeStatus].count() != 3 || w.lat[routeReserve].count() != 0 {
		t.Fatalf("first window: %d status, %d reserve", w.lat[routeStatus].count(), w.lat[routeReserve].count())
	}
	s.record(routeStatus, 2*time.Second, "", 0)
	s.record(routeReserve, time.Millisecond, "sold_out", 0)
	w := s.swap()
	if n := w.lat[routeStatus].count(); n != 1 {
		t.Fatalf("second window: %d status, want 1", n)
	}
	if p := w.lat[routeStatus].quantile(0.5); p < 2*time.Second {
		t.Fatalf("second window's status p50 %v: holds the first window's answers", p)
	}
	if n := s.lat[routeStatus].count(); n != 4 {
		t.Fatalf("status in all: %d, want 4", n)
	}
	if w := s.swap(); w.lat[routeStatus].count() != 0 {
		t.Fatal("an empty window has answers")
	}
}

// TestSuspectPolls: a poll answered with units long after the sampler saw
// the last is stale only if no units were seen, or came back, within the
// second before it was asked or while it was answered.
func TestSuspectPolls(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	units := []span{{at(0), at(100)}, {at(5000), at(5100)}} // a unit came back at 5 s
	var s suspectPolls
	s.add(at(3000), at(3050)) // nothing since 100 ms: stale
	s.add(at(5900), at(5950)) // within a second of the unit back at 5.1 s
	s.add(at(4950), at(5010)) // answered while the unit was back
	s.add(at(6200), at(6300)) // over a second after it: stale
	if n := s.stale(units); n != 2 {
		t.Fatalf("%d stale polls, want 2", n)
	}
}

// TestShopperIsSmall pins the crowd's per-shopper memory: two million
// shoppers are 64 MB at 32 bytes each, every byte more two megabytes.
func TestShopperIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(shopper{}); n > 32 {
		t.Fatalf("a shopper is %d bytes, want at most 32", n)
	}
}
