package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
)

// faultyStore fails the next reservation writes: before the write
// (nothing committed) or after it (committed, but the answer lost).
type faultyStore struct {
	flashsale.Store
	failBefore atomic.Int32
	failAfter  atomic.Int32
}

var errConnReset = errors.New("read tcp: connection reset by peer (fault drill)")

func (f *faultyStore) CreateReservation(ctx context.Context, r *flashsale.Reservation, also ...flashsale.Event) error {
	if f.failBefore.Add(-1) >= 0 {
		return errConnReset
	}
	err := f.Store.CreateReservation(ctx, r, also...)
	if err == nil && f.failAfter.Add(-1) >= 0 {
		return errConnReset
	}
	return err
}

// TestRecordWriteFailsAfterTheGate: when the record write fails after the
// gate said yes, the shopper is told to repeat the request, the units come
// back exactly once (a write that did commit is kept, not doubled), and the
// repeat with the same key and admission succeeds.
func TestRecordWriteFailsAfterTheGate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		fs := &faultyStore{}
		h := newHarness(t, b, func(c *engine.Config) {
			c.WrapStore = func(s flashsale.Store) flashsale.Store { fs.Store = s; return fs }
		})
		h.createSale("phone", map[string]any{"initialStock": 5})

		// Nothing committed: the hold is voided and its units return.
		adm := h.admit("phone", "alice")
		fs.failBefore.Store(1)
		r := h.reserve("phone", "alice", adm, "k", nil)
		if r.status != 503 || r.code() != "unavailable" || r.header.Get("Retry-After") == "" {
			t.Fatalf("write failed: %d %s", r.status, r.body)
		}
		if counter, totals := h.exact("phone"); counter != 5 || totals.Voided != 1 {
			t.Fatalf("after the failed write: counter %d voided %d", counter, totals.Voided)
		}
		again := h.reserve("phone", "alice", adm, "k", nil)
		if again.status != 201 {
			t.Fatalf("repeat with the same key and admission: %d %s", again.status, again.body)
		}

		// Committed, answer lost: the tombstone loses to the real row, no
		// unit moves, and the repeat replays the reservation.
		adm2 := h.admit("phone", "bob")
		fs.failAfter.Store(1)
		if r := h.reserve("phone", "bob", adm2, "k", nil); r.status != 503 || r.code() != "unavailable" {
			t.Fatalf("answer lost: %d %s", r.status, r.body)
		}
		replay := h.reserve("phone", "bob", adm2, "k", nil)
		if replay.status != 201 {
			t.Fatalf("repeat after a lost answer: %d %s", replay.status, replay.body)
		}
		counter, totals := h.exact("phone")
		if counter != 3 || totals.Pending != 2 || totals.Voided != 1 {
			t.Fatalf("counter %d totals %+v, want 3 left, 2 pending, 1 voided", counter, totals)
		}
		if v := h.sale("phone"); v.Voided != 1 || v.State != flashsale.SaleOpen {
			t.Fatalf("view %+v", v)
		}
	})
}
