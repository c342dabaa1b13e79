package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/restock"
)

// faultyGate stands in front of a gate and, while down, fails every call
// the way an unreachable store does.
type faultyGate struct {
	restock.Gate
	down atomic.Bool
	// slow fails only reserves, as a gate too busy to answer in time
	// while it still answers a probe.
	slow atomic.Bool
}

var errDown = errors.New("dial tcp: connection refused (fault drill)")

func (f *faultyGate) err() error {
	if f.down.Load() {
		return errDown
	}
	return nil
}

func (f *faultyGate) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	if err := f.err(); err != nil {
		return flashsale.GateOutcome{}, err
	}
	if f.slow.Load() {
		return flashsale.GateOutcome{}, context.DeadlineExceeded
	}
	return f.Gate.Reserve(ctx, r)
}

func (f *faultyGate) Lookup(ctx context.Context, sale, user, key string) (flashsale.Hold, bool, error) {
	if err := f.err(); err != nil {
		return flashsale.Hold{}, false, err
	}
	return f.Gate.Lookup(ctx, sale, user, key)
}

func (f *faultyGate) Snapshot(ctx context.Context, sale string) (flashsale.GateSnapshot, error) {
	if err := f.err(); err != nil {
		return flashsale.GateSnapshot{}, err
	}
	return f.Gate.Snapshot(ctx, sale)
}

func (f *faultyGate) SetPaused(ctx context.Context, sale string, paused bool, source string) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Gate.SetPaused(ctx, sale, paused, source)
}

func (f *faultyGate) Rebuild(ctx context.Context, sale string, initial, epoch int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission, source string) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Gate.Rebuild(ctx, sale, initial, epoch, holds, spent, source)
}

func (f *faultyGate) Ping(ctx context.Context) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Gate.Ping(ctx)
}

// outage is a way to take the gate away and give it back empty, as a Redis
// restart without persistence does.
type outage struct {
	cut     func()
	restore func(t *testing.T, h *harness)
}

func newOutage(t *testing.T, b backend) (*outage, func(*engine.Config)) {
	if b.redis {
		proxy := testenv.NewProxy(t, strings.Split(testenv.RedisURL(), "/")[2])
		o := &outage{cut: proxy.Cut, restore: func(t *testing.T, h *harness) {
			testenv.DeleteKeys(h.redis, h.prefix) // nothing kept on disk
			proxy.Restore()
		}}
		return o, func(c *engine.Config) { c.RedisURL = "redis://" + proxy.Addr() + "/0" }
	}
	fg := &faultyGate{}
	o := &outage{cut: func() { fg.down.Store(true) }, restore: func(t *testing.T, h *harness) {
		fg.down.Store(false)
		if err := fg.Gate.Drop(context.Background(), h.saleOf("tv").ID); err != nil {
			t.Fatal(err)
		}
	}}
	return o, func(c *engine.Config) {
		c.WrapGate = func(g restock.Gate) restock.Gate { fg.Gate = g; return fg }
	}
}

// TestGateOutageFailsClosed: with the gate gone, reserve answers 503
// sale_paused within a second and the sale is paused with the reason; the
// gate comes back empty; resume is refused until a rebuild from the record;
// admissions from before the rebuild are refused; the totals end exact.
func TestGateOutageFailsClosed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		o, tweak := newOutage(t, b)
		h := newHarness(t, b, tweak, func(c *engine.Config) { c.GateTimeout = 0 }) // the default, 500ms
		h.createSale("tv", map[string]any{"initialStock": 20})
		for i := 0; i < 5; i++ {
			user := fmt.Sprintf("u%d", i)
			if r := h.reserve("tv", user, h.admit("tv", user), "k", nil); r.status != 201 {
				t.Fatalf("reserve: %d %s", r.status, r.body)
			}
		}
		early := h.admit("tv", "early-bird")

		o.cut()
		began := time.Now()
		r := h.reserve("tv", "late", h.admitPaused("tv", "late"), "k", nil)
		elapsed := time.Since(began)
		if r.status != 503 || r.code() != "sale_paused" || r.header.Get("Retry-After") == "" {
			t.Fatalf("reserve with the gate gone: %d %s", r.status, r.body)
		}
		if elapsed > time.Second {
			t.Fatalf("failing closed took %v, want under 1s", elapsed)
		}
		v := h.sale("tv")
		if v.State != flashsale.SalePaused || !strings.Contains(v.PauseReason, "unreachable") || v.Gate != "unreachable" {
			t.Fatalf("sale after the outage: state %v reason %v gate %v", v.State, v.PauseReason, v.Gate)
		}

		o.restore(t, h)
		if r := h.do("POST", "/admin/sales/tv/resume", nil, nil); r.status != 409 || r.code() != "rebuild_required" {
			t.Fatalf("resume with the counter lost: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/admin/sales/tv/rebuild", nil, nil); r.status != 200 || r.json(t)["counter"].(float64) != 15 {
			t.Fatalf("rebuild: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/admin/sales/tv/resume", nil, nil); r.status != 200 {
			t.Fatalf("resume: %d %s", r.status, r.body)
		}
		if r := h.reserve("tv", "early-bird", early, "k", nil); r.status != 403 || r.code() != "admission_expired" {
			t.Fatalf("admission from before the rebuild: %d %s", r.status, r.body)
		}
		// A holder cannot win twice: its turn was rebuilt spent (which the
		// gate checks before its rebuilt buyer).
		if r := h.reserve("tv", "u0", h.admit("tv", "u0"), "k2", nil); r.status != 403 || r.code() != "admission_used" {
			t.Fatalf("holder after rebuild: %d %s", r.status, r.body)
		}
		// Rebuilt keys still replay.
		if r := h.reserve("tv", "u1", "", "k", nil); r.status != 201 {
			t.Fatalf("replay after rebuild: %d %s", r.status, r.body)
		}
		for i := 0; i < 20; i++ {
			user := fmt.Sprintf("w%d", i)
			h.reserve("tv", user, h.admit("tv", user), "k", nil)
		}
		if counter, totals := h.exact("tv"); counter != 0 || totals.Pending != 20 {
			t.Fatalf("counter %d pending %d, want 0 and 20", counter, totals.Pending)
		}
	})
}

// TestNoFalsePauseUnderLoad: reserves, cancellations and expiries in flight
// while the watcher checks continuously never pause a healthy sale.
func TestNoFalsePauseUnderLoad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("ticket", map[string]any{"initialStock": 40, "holdSeconds": 1})
		ctx, stop := context.WithCancel(context.Background())
		var checks atomic.Int64
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // the watcher, as fast as it can
			defer wg.Done()
			for ctx.Err() == nil {
				if err := h.eng.Watcher.CheckAll(ctx); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
				checks.Add(1)
			}
		}()
		go func() { // the sweeper, with time moving
			defer wg.Done()
			for ctx.Err() == nil {
				h.clock.Advance(300 * time.Millisecond)
				if _, err := h.eng.Sweeper.SweepOnce(ctx); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			}
		}()
		var shoppers sync.WaitGroup
		for w := 0; w < 8; w++ {
			shoppers.Add(1)
			go func(w int) {
				defer shoppers.Done()
				for i := 0; i < 25; i++ {
					user := fmt.Sprintf("s%d-%d", w, i)
					r := h.reserve("ticket", user, h.admitOrEmpty("ticket", user), "k", nil)
					if r.status == 201 && i%3 == 0 {
						h.do("DELETE", "/reservations/"+r.json(t)["reservationId"].(string),
							map[string]string{"Authorization": "Bearer " + h.jwt(user)}, nil)
					}
				}
			}(w)
		}
		shoppers.Wait()
		stop()
		wg.Wait()
		if checks.Load() < 5 {
			t.Fatalf("only %d checks ran", checks.Load())
		}
		if v := h.sale("ticket"); v.State == flashsale.SalePaused {
			t.Fatalf("a healthy sale was paused: %v", v.PauseReason)
		}
		// Stopping the sweeper may cut it between its two steps (its claim
		// committed, its context cancelled before the gate heard); the
		// reconciler finishes such restocks, as it does in production. On
		// a loaded machine a reserve may also time out after the gate took
		// its unit and before the record did: an orphan, which the
		// reconciler voids once it is older than the grace, so the clock
		// moves past it first.
		h.clock.Advance(time.Hour)
		if _, err := h.eng.Sweeper.SweepOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n, err := h.eng.Sweeper.ReconcileAll(context.Background()); err != nil {
			t.Fatal(err)
		} else if n > 0 {
			t.Logf("reconciler returned %d units", n)
		}
		h.exact("ticket")
	})
}

// admitOrEmpty admits the shopper, or returns "" when the waiting room
// says sold out (the reserve then fails with admission_required).
func (h *harness) admitOrEmpty(sku, user string) string {
	r := h.do("GET", "/sale/"+sku+"/ticket", map[string]string{"Authorization": "Bearer " + h.jwt(user)}, nil)
	if r.status != 200 {
		return ""
	}
	st := h.do("GET", "/sale/"+sku+"/status?token="+r.json(h.t)["token"].(string), nil, nil).json(h.t)
	tok, _ := st["admissionToken"].(string)
	return tok
}

// TestSlowGateCallDoesNotPause: one gate call that times out is answered
// 503 (fail closed for that request), but a gate that still answers its
// probe is not an outage, so the sale stays open.
func TestSlowGateCallDoesNotPause(t *testing.T) {
	fg := &faultyGate{}
	h := newHarness(t, backends[0], func(c *engine.Config) {
		c.WrapGate = func(g restock.Gate) restock.Gate { fg.Gate = g; return fg }
	})
	h.createSale("tv", map[string]any{"initialStock": 5})
	adm := h.admit("tv", "alice")
	fg.slow.Store(true)
	if r := h.reserve("tv", "alice", adm, "k", nil); r.status != 503 || r.code() != "sale_paused" {
		t.Fatalf("reserve during a slow gate call: %d %s", r.status, r.body)
	}
	fg.slow.Store(false)
	if v := h.sale("tv"); v.State != flashsale.SaleOpen {
		t.Fatalf("a slow call paused the sale: %v", v.PauseReason)
	}
	if r := h.reserve("tv", "alice", adm, "k", nil); r.status != 201 {
		t.Fatalf("retry after the slow call: %d %s", r.status, r.body)
	}
}

// TestRedisPartitionFailsClosed: a Redis that stops answering without
// closing its connections (a partition) is told apart from a slow call by
// the probe: the request is answered 503 within a second, and the sale is
// paused as soon as the probe gives up.
func TestRedisPartitionFailsClosed(t *testing.T) {
	b := backends[1]
	proxy := testenv.NewProxy(t, strings.Split(testenv.RedisURL(), "/")[2])
	h := newHarness(t, b, func(c *engine.Config) {
		c.RedisURL = "redis://" + proxy.Addr() + "/0"
		c.GateTimeout = 0
	})
	h.createSale("tv", map[string]any{"initialStock": 5})
	adm := h.admit("tv", "alice")
	proxy.Blackhole()
	began := time.Now()
	r := h.reserve("tv", "alice", adm, "k", nil)
	if elapsed := time.Since(began); r.status != 503 || r.code() != "sale_paused" || elapsed > time.Second {
		t.Fatalf("reserve during a partition: %d %s after %v, want 503 sale_paused within 1s", r.status, r.body, elapsed)
	}
	// The probe's verdict lands in the record within ProbeTimeout.
	deadline := time.Now().Add(5 * time.Second)
	for h.saleOf("tv").State != flashsale.SalePaused {
		if time.Now().After(deadline) {
			t.Fatal("the sale was not paused after the probe failed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if reason := h.saleOf("tv").PauseReason; !strings.Contains(reason, "unreachable") {
		t.Fatalf("pause reason %q", reason)
	}
}
