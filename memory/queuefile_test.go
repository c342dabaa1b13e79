package memory

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestQueueSavedAndLoaded: a queue saved by one process and loaded by the
// next keeps every shopper's place (asking again returns it, arrival and
// all), goes on giving places after the last one, takes back no admission
// and keeps the entrants and their seal, the counters, the spent salts and
// the suspects.
func TestQueueSavedAndLoaded(t *testing.T) {
	ctx := context.Background()
	at := time.UnixMilli(1_900_000_000_000).UTC()
	q := NewQueue()
	const n = 500
	for i := range n {
		if pos, _, err := q.Join(ctx, "fifo", fmt.Sprintf("u%d", i), at.Add(time.Duration(i)*time.Millisecond)); err != nil || pos != int64(i+1) {
			t.Fatalf("Join u%d = %d, %v", i, pos, err)
		}
	}
	if _, err := q.Admit(ctx, "fifo", 120); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Add(ctx, "fifo", "claims", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enter(ctx, "draw", "e1", at); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Seal(ctx, "draw"); err != nil {
		t.Fatal(err)
	}
	if ok, err := q.Spend(ctx, "fifo", "salt-1", time.Hour); err != nil || !ok {
		t.Fatalf("Spend = %v, %v", ok, err)
	}
	if err := q.Flag(ctx, "fifo", "u3", "polled too fast"); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	if err := q.Save(&buf); err != nil {
		t.Fatal(err)
	}
	l, err := LoadQueue(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		pos, arrival, err := l.Join(ctx, "fifo", fmt.Sprintf("u%d", i), at.Add(time.Hour))
		if err != nil || pos != int64(i+1) || !arrival.Equal(at.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("u%d after the load: place %d at %v, %v; want %d at %v", i, pos, arrival, err, i+1, at.Add(time.Duration(i)*time.Millisecond))
		}
	}
	if pos, _, _ := l.Join(ctx, "fifo", "newcomer", at); pos != n+1 {
		t.Fatalf("a newcomer after the load gets place %d; want %d", pos, n+1)
	}
	if got, _ := l.Admitted(ctx, "fifo"); got != 120 {
		t.Fatalf("Admitted = %d; want 120", got)
	}
	if got, _ := l.Counter(ctx, "fifo", "claims"); got != 7 {
		t.Fatalf("claims = %d; want 7", got)
	}
	if _, ok, _ := l.Entered(ctx, "draw", "e1"); !ok {
		t.Fatal("the entrant is forgotten")
	}
	if _, err := l.Enter(ctx, "draw", "e2", at); !errors.Is(err, flashsale.ErrSealed) {
		t.Fatalf("Enter after the seal = %v; want ErrSealed", err)
	}
	if ok, _ := l.Spent(ctx, "fifo", "salt-1"); !ok {
		t.Fatal("the spent salt is forgotten")
	}
	if s, _ := l.Suspects(ctx, "fifo"); s["u3"] != "polled too fast" {
		t.Fatalf("Suspects = %v", s)
	}
	// The loaded queue is a queue like any other: a sale it never saw
	// starts empty, and places go on being given once.
	if pos, _, _ := l.Join(ctx, "other", "u1", at); pos != 1 {
		t.Fatalf("a new sale's first place = %d", pos)
	}
}

func TestLoadQueueRefusesOtherInput(t *testing.T) {
	if _, err := LoadQueue(bytes.NewReader([]byte("not a queue"))); err == nil {
		t.Fatal("LoadQueue of garbage = nil")
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&queueFile{Format: "something else"}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadQueue(&buf); !errors.Is(err, ErrQueueFormat) {
		t.Fatalf("LoadQueue of another format = %v; want ErrQueueFormat", err)
	}
	buf.Reset()
	if err := gob.NewEncoder(&buf).Encode(&queueFile{Format: queueFormat,
		Sales: []saleFile{{ID: "s", Places: []uint64{1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadQueue(&buf); !errors.Is(err, ErrQueueFormat) {
		t.Fatalf("LoadQueue of a torn place = %v; want ErrQueueFormat", err)
	}
}
