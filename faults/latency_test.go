package faults_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/restock"
)

// lateGate stands in front of the real gate and, while lose is set, lets
// one won reserve in three happen but delivers its answer too late: the
// gate has decremented, the caller's timeout has fired. That is the case a
// retry must not turn into a second decrement.
type lateGate struct {
	restock.Gate
	lose atomic.Bool
	n    atomic.Int64

	mu   sync.Mutex
	lost map[string]string // reservation id -> user
}

func (g *lateGate) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	out, err := g.Gate.Reserve(ctx, r)
	if err != nil || out.Verdict != flashsale.VerdictWon || !g.lose.Load() || g.n.Add(1)%3 != 0 {
		return out, err
	}
	g.mu.Lock()
	g.lost[r.ReservationID] = r.UserID
	g.mu.Unlock()
	<-ctx.Done() // the answer arrives after the caller gave up
	return flashsale.GateOutcome{}, ctx.Err()
}

// TestGateLatency: the gate's network slows to 100ms a round trip, then
// its answers come back too late (past the 500ms gate timeout, after the
// gate acted; and, for a moment, every answer 700ms late on the wire).
// Shoppers repeat their reserves under the same Idempotency-Key. No hold
// whose answer was lost is decremented twice: the retry finds it by its
// key, and once the record is sure it never took it, it is voided (its
// units back once) and the shopper's next try is a fresh attempt.
func TestGateLatency(t *testing.T) {
	needFaults(t)
	proxy := testenv.NewProxy(t, hostOf(testenv.RedisURL()))
	late := &lateGate{lost: map[string]string{}}
	r := newRig(t, rigConfig{redisURL: "redis://" + proxy.Addr() + "/0", start: true, tweak: func(c *engine.Config) {
		c.WrapGate = func(g restock.Gate) restock.Gate { late.Gate = g; return late }
	}})
	const sku = "camera"
	r.createSale(sku, stock, nil)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	// A slow gate may fail its probe now and then and pause the sale; the
	// operator on call resumes it.
	operator, stopOperator := context.WithCancel(ctx)
	defer stopOperator()
	r.operate(operator, sku)

	proxy.SetLatency(50*time.Millisecond, 50*time.Millisecond)
	l := r.startLoad(ctx, sku, shoppers, workers, mixed)
	r.untilWon(l, stock/4)

	began := time.Now()
	late.lose.Store(true)
	took := r.waitUntil("answers lost", 30*time.Second, func() bool { late.mu.Lock(); defer late.mu.Unlock(); return len(late.lost) >= 8 })
	late.lose.Store(false)
	slow := time.Now()
	proxy.SetLatency(0, 700*time.Millisecond)
	r.waitUntil("reserves on the slow wire", 10*time.Second, func() bool { return len(r.answersBetween(slow, time.Now())) >= 5 })
	proxy.SetLatency(0, 0) // the drill is over: let the sale finish quickly
	ended := time.Now()
	t.Logf("answers lost for %v, wire slow for %v; %d won so far", took, ended.Sub(slow), l.won.Load())

	outcomes := l.wait(t, within)
	stopOperator()
	r.settle(sku)

	// A request the gate did not answer in time is told 503 promptly: the
	// gate timeout (500ms) and the probe's wait (300ms), after a lookup
	// that itself took a slow round trip; never left hanging.
	var closed time.Duration
	for _, q := range r.answersBetween(began, ended) {
		if q.status == http.StatusServiceUnavailable && q.code == "sale_paused" {
			closed = max(closed, q.end.Sub(q.start))
		}
	}
	if closed == 0 || closed > 1500*time.Millisecond {
		t.Errorf("the longest 503 for a late gate took %v, want some, each under 1.5s", closed)
	}

	// Every lost answer's hold was taken once and given back once, and its
	// shopper holds at most one reservation: the retry did not decrement
	// twice.
	late.mu.Lock()
	lost := late.lost
	late.mu.Unlock()
	ids := make([]string, 0, len(lost))
	for id := range lost {
		ids = append(ids, id)
	}
	states, err := r.eng.Store.ReservationStates(context.Background(), r.sale(sku).ID, ids)
	if err != nil {
		t.Fatal(err)
	}
	for id, user := range lost {
		if states[id] != flashsale.ReservationVoided {
			t.Errorf("lost answer %s of %s is %q in the record, want voided", id, user, states[id])
		}
	}
	r.verify(sku, outcomes, row{fault: "3 gate +100ms RTT, then answers lost past its timeout", failClosed: closed})
}
