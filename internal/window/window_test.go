package window

import (
	"sync"
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
