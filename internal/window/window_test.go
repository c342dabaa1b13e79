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
