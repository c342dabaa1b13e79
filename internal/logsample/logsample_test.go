package logsample

import (
	"sync"
	"testing"
	"time"
)

func TestOneLineASecondPerKey(t *testing.T) {
	var s Sampler
	at := time.Unix(1_800_000_000, 0)
	if n, ok := s.Allow("a", at); !ok || n != 0 {
		t.Fatalf("first line: %d, %t", n, ok)
	}
	for range 5 {
		if _, ok := s.Allow("a", at.Add(500*time.Millisecond)); ok {
			t.Fatal("a second line in the same second")
		}
	}
	if _, ok := s.Allow("b", at); !ok {
		t.Fatal("another key shares the budget")
	}
	if n, ok := s.Allow("a", at.Add(time.Second)); !ok || n != 5 {
		t.Fatalf("next second: %d suppressed, %t; want 5, true", n, ok)
	}
}

// TestConcurrentCallersShareOneLine: of many goroutines logging in the
// same second, exactly one writes, and the next line counts the rest.
func TestConcurrentCallersShareOneLine(t *testing.T) {
	var s Sampler
	at := time.Unix(1_800_000_000, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 0
	for range 64 {
		wg.Go(func() {
			if _, ok := s.Allow("k", at); ok {
				mu.Lock()
				written++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if written != 1 {
		t.Fatalf("%d lines written in one second, want 1", written)
	}
	if n, ok := s.Allow("k", at.Add(time.Second)); !ok || n != 63 {
		t.Fatalf("next second: %d suppressed, %t; want 63, true", n, ok)
	}
}
