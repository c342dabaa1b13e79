package window

import (
	"testing"
	"time"
)

func TestCounter(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	c := New(10 * time.Second)
	for i := 1; i <= 3; i++ {
		if n := c.Add("a", t0.Add(time.Duration(i)*time.Second)); n != i {
			t.Fatalf("count %d, want %d", n, i)
		}
	}
	if n := c.Add("b", t0.Add(2*time.Second)); n != 1 {
		t.Fatalf("another key counted %d", n)
	}
	if n := c.Add("a", t0.Add(12*time.Second)); n != 1 {
		t.Fatalf("a new window started at %d", n)
	}
}
