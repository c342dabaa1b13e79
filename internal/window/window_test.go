package window

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCounter(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	c := New(10 * time.Second)
	for i := 1; i <= 3; i++ {
		if n := c.Add("sale", "a", t0.Add(time.Duration(i)*time.Second)); n != i {
			t.Fatalf("count %d, want %d", n, i)
		}
	}
	if n := c.Add("sale", "b", t0.Add(2*time.Second)); n != 1 {
		t.Fatalf("another key counted %d", n)
	}
	// The pair is the key, not the concatenation.
	if n := c.Add("salea", "", t0.Add(2*time.Second)); n != 1 {
		t.Fatalf("(salea, \"\") counted with (sale, a): %d", n)
	}
	if n := c.Add("sale", "a", t0.Add(12*time.Second)); n != 1 {
		t.Fatalf("a new window started at %d", n)
	}
}

// Concurrent counts of one key all land.
func TestCounterConcurrent(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	c := New(time.Hour)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Add("sale", "hot", t0)
			}
		}()
	}
	wg.Wait()
	if n := c.Add("sale", "hot", t0); n != 8001 {
		t.Fatalf("count %d, want 8001", n)
	}
}

// A key that comes back when asked is never early; one that comes back in
// less than half the wait asked is, each time; the window forgets.
func TestPace(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	p := NewPace(time.Minute)
	at := t0
	for i := 1; i <= 5; i++ { // a person, asked 10 s, comes back after 10 to 13 s
		if n, early, _ := p.Observe("sale", "person", at, 10*time.Second); n != i || early != 0 {
			t.Fatalf("person, poll %d: %d events, %d early", i, n, early)
		}
		at = at.Add(10*time.Second + time.Duration(i)*500*time.Millisecond)
	}
	at = t0
	for i := 1; i <= 6; i++ { // a bot, asked 10 s, comes back each second
		_, early, was := p.Observe("sale", "bot", at, 10*time.Second)
		if early != i-1 || was != (i > 1) {
			t.Fatalf("bot, poll %d: %d early, want %d", i, early, i-1)
		}
		at = at.Add(time.Second)
	}
	// Asked nothing (a final answer): the next event is not early.
	p.Observe("sale", "done", t0, 0)
	if _, early, _ := p.Observe("sale", "done", t0.Add(time.Millisecond), time.Second); early != 0 {
		t.Fatalf("after a final answer: %d early", early)
	}
	if n, early, _ := p.Observe("sale", "bot", t0.Add(2*time.Minute), time.Second); n != 1 || early != 0 {
		t.Fatalf("a new window: %d events, %d early", n, early)
	}
}

// TestPaceManyKeys: every key of a crowd keeps its own count as the table
// grows, and a new window starts every key again.
func TestPaceManyKeys(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	p := NewPace(time.Minute)
	const n = 50_000
	for round := 1; round <= 2; round++ {
		for i := range n {
			if got, _, _ := p.Observe("sale", strconv.Itoa(i), t0, time.Second); got != round {
				t.Fatalf("key %d, round %d: count %d", i, round, got)
			}
		}
	}
	if got, _, _ := p.Observe("sale", "7", t0.Add(time.Minute), time.Second); got != 1 {
		t.Fatalf("a new window: count %d, want 1", got)
	}
}

// TestPaceTableProbes: keys that start at the same slot each find their
// own by probing past the others, and the table never fills.
func TestPaceTableProbes(t *testing.T) {
	var tab paceTable
	const same = 7 << 32 // every key below starts its probe at one slot
	for round := uint64(1); round <= 3; round++ {
		for x := range uint64(200) {
			s, seen := tab.entry(same | x)
			last, asked, count, early := s.unpack()
			if seen != (round > 1) || count != round-1 {
				t.Fatalf("key %d, round %d: seen %v, count %d", x, round, seen, count)
			}
			s.pack(last, asked, count+1, early)
		}
	}
	if tab.used != 200 || tab.used*4 > len(tab.slots)*3 {
		t.Fatalf("%d used of %d slots", tab.used, len(tab.slots))
	}
	tab.clear()
	if _, seen := tab.entry(same | 3); seen || tab.used != 1 {
		t.Fatalf("after clear: seen %v, %d used", seen, tab.used)
	}
}

// BenchmarkPaceCrowd observes polls of a crowd of two million shoppers,
// each key cold in memory as in a real sale's status traffic.
func BenchmarkPaceCrowd(b *testing.B) {
	const crowd = 2_000_000
	users := make([]string, crowd)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	p := NewPace(time.Hour)
	now := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	for _, u := range users {
		p.Observe("sale", u, now, time.Second)
	}
	var worker atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Each worker strides through the crowd from its own start.
		i := int(worker.Add(1)) * 7919
		for pb.Next() {
			i = (i + 104729) % crowd
			p.Observe("sale", users[i], now, time.Second)
		}
	})
}

// TestPaceSlotPacking: each field of a slot keeps its value beside the
// others at their widest, and the counts stop at their ceilings.
func TestPaceSlotPacking(t *testing.T) {
	var s paceSlot
	for _, c := range [][4]uint64{{0, 0, 0, 0}, {1<<lastBits - 1, maxAsked, maxCount, maxEarly}, {12345, 1, maxCount, 0}, {0, maxAsked, 0, maxEarly}} {
		s.pack(c[0], c[1], c[2], c[3])
		if l, a, n, e := s.unpack(); [4]uint64{l, a, n, e} != c {
			t.Fatalf("packed %v, unpacked %v", c, [4]uint64{l, a, n, e})
		}
	}
	p := NewPace(time.Minute)
	t0 := time.Unix(1_780_000_000, 0)
	var n, early int
	for i := range 2000 {
		n, early, _ = p.Observe("sale", "hammer", t0.Add(time.Duration(i)*time.Microsecond), time.Hour)
	}
	if n != maxCount || early != maxEarly {
		t.Fatalf("2000 early events: count %d, early %d; want the ceilings %d, %d", n, early, maxCount, maxEarly)
	}
	// A wait past the widest is kept as the widest: still early at half of it.
	p.Observe("sale", "slow", t0, time.Hour)
	if _, _, was := p.Observe("sale", "slow", t0.Add(32*time.Second), time.Second); !was {
		t.Fatal("back after 32 s, asked an hour: not early")
	}
}
