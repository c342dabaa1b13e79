package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/httpapi"
	recordcalls "github.com/flashsale/flashsale/internal/tally"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/restock"
)

// heldGate holds every reserve of the sales it is told to at the gate's
// door until the test lets them go: each held reserve keeps its slot of
// the purchase path, so the test fills the path exactly, without timing.
type heldGate struct {
	restock.Gate
	mu    sync.Mutex
	hold  map[string]bool // sale ID -> hold its reserves
	users map[string]int  // user -> gate calls on the purchase path
	// entered is told of each held reserve, by user; release lets them go.
	entered chan string
	release chan struct{}
}

func newHeldGate() *heldGate {
	return &heldGate{hold: map[string]bool{}, users: map[string]int{},
		entered: make(chan string, 64), release: make(chan struct{})}
}

func (g *heldGate) holdSale(id string) {
	g.mu.Lock()
	g.hold[id] = true
	g.mu.Unlock()
}

// calls returns how often the purchase path asked the gate about user.
func (g *heldGate) calls(user string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.users[user]
}

func (g *heldGate) Lookup(ctx context.Context, saleID, userID, key string) (flashsale.Hold, bool, error) {
	g.mu.Lock()
	g.users[userID]++
	g.mu.Unlock()
	return g.Gate.Lookup(ctx, saleID, userID, key)
}

func (g *heldGate) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	g.mu.Lock()
	g.users[r.UserID]++
	held := g.hold[r.SaleID]
	g.mu.Unlock()
	if held {
		g.entered <- r.UserID
		select {
		case <-g.release:
		case <-ctx.Done():
			return flashsale.GateOutcome{}, ctx.Err()
		}
	}
	return g.Gate.Reserve(ctx, r)
}

// isolated is a harness whose purchase path holds at most max requests in
// flight, share of them per sale, and sheds at once.
func isolated(t *testing.T, b backend, g *heldGate, max, share int) *harness {
	return newHarness(t, b, func(c *engine.Config) {
		c.MaxInFlight, c.SaleMaxInFlight, c.InFlightWait = max, share, -1
		// Long enough that a held reserve is never failed closed while
		// the test holds it.
		c.GateTimeout = time.Minute
		c.WrapGate = func(inner restock.Gate) restock.Gate { g.Gate = inner; return g }
	})
}

// reserveAsync sends a reserve and delivers its answer on the channel.
func (h *harness) reserveAsync(sku, user, admission, key string) <-chan response {
	out := make(chan response, 1)
	go func() { out <- h.reserve(sku, user, admission, key, nil) }()
	return out
}

// TestSaturatedPathShedsAndTheRepeatSucceeds: with every slot of the
// purchase path held, the next reserve is told 503 overloaded with
// Retry-After at once, having done nothing (no gate call, no hold, no
// remembered answer); once slots free, its repeat with the same key and
// admission succeeds.
func TestSaturatedPathShedsAndTheRepeatSucceeds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		g := newHeldGate()
		h := isolated(t, b, g, 2, 2)
		sale := h.createSale("phone", map[string]any{"initialStock": 10})
		adm := map[string]string{}
		for _, u := range []string{"alice", "bob", "carol"} {
			adm[u] = h.admit("phone", u)
		}
		g.holdSale(sale["saleId"].(string))

		alice := h.reserveAsync("phone", "alice", adm["alice"], "a1")
		bob := h.reserveAsync("phone", "bob", adm["bob"], "b1")
		<-g.entered
		<-g.entered // both slots are held at the gate's door

		// Answered while the two are still held: carol waited for no slot.
		r := h.reserve("phone", "carol", adm["carol"], "c1", nil)
		if r.status != http.StatusServiceUnavailable || r.code() != "overloaded" || r.header.Get("Retry-After") != "1" {
			t.Fatalf("reserve on a saturated path: %d %s (Retry-After %q), want 503 overloaded, Retry-After 1",
				r.status, r.body, r.header.Get("Retry-After"))
		}
		if n := g.calls("carol"); n != 0 {
			t.Fatalf("the shed reserve asked the gate %d times", n)
		}
		if _, err := h.eng.Store.ReservationByKey(context.Background(), sale["saleId"].(string), "carol", "c1"); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("the shed reserve left a reservation: %v", err)
		}
		if n := h.eng.InFlight.InFlight(); n != 2 {
			t.Fatalf("%d in flight, want the 2 held", n)
		}
		if rej := h.sale("phone").Rejections; rej["overloaded"] != 1 {
			t.Fatalf("rejections %v, want overloaded 1", rej)
		}
		if m := h.metrics(); !strings.Contains(m, `flashsale_rejections_total{code="overloaded",layer="capacity"} 1`) ||
			!strings.Contains(m, "flashsale_purchase_in_flight 2") {
			t.Fatalf("metrics do not show the shed and the slots held:\n%s", grepLines(m, "overloaded", "in_flight"))
		}

		close(g.release)
		for name, ch := range map[string]<-chan response{"alice": alice, "bob": bob} {
			if r := <-ch; r.status != http.StatusCreated {
				t.Fatalf("%s's held reserve: %d %s", name, r.status, r.body)
			}
		}
		again := h.reserve("phone", "carol", adm["carol"], "c1", nil)
		if again.status != http.StatusCreated {
			t.Fatalf("the repeat with the same key: %d %s", again.status, again.body)
		}
		if counter, totals := h.exact("phone"); counter != 7 || totals.Pending != 3 {
			t.Fatalf("counter %d pending %d, want 7 and 3", counter, totals.Pending)
		}
		if n := h.eng.InFlight.InFlight(); n != 0 {
			t.Fatalf("%d slots still taken after every answer", n)
		}
	})
}

// TestQuietSaleFindsSlots: a big sale that holds its whole share of the
// slots has its next reserve shed, while a quiet sale's reserve, on the
// same server at the same moment, succeeds.
func TestQuietSaleFindsSlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		g := newHeldGate()
		h := isolated(t, b, g, 4, 2)
		big := h.createSale("console", map[string]any{"initialStock": 100})
		h.createSale("teapot", map[string]any{"initialStock": 5})
		adm := map[string]string{}
		for _, u := range []string{"alice", "bob", "carol"} {
			adm[u] = h.admit("console", u)
		}
		dave := h.admit("teapot", "dave")
		g.holdSale(big["saleId"].(string))

		held := []<-chan response{
			h.reserveAsync("console", "alice", adm["alice"], "k"),
			h.reserveAsync("console", "bob", adm["bob"], "k"),
		}
		<-g.entered
		<-g.entered

		if r := h.reserve("console", "carol", adm["carol"], "k", nil); r.status != http.StatusServiceUnavailable || r.code() != "overloaded" {
			t.Fatalf("the big sale past its share: %d %s, want 503 overloaded", r.status, r.body)
		}
		if r := h.reserve("teapot", "dave", dave, "k", nil); r.status != http.StatusCreated {
			t.Fatalf("the quiet sale's reserve while the big one holds its share: %d %s", r.status, r.body)
		}
		if got := h.sale("teapot").Rejections; len(got) != 0 {
			t.Fatalf("the quiet sale was told no: %v", got)
		}

		close(g.release)
		for _, ch := range held {
			if r := <-ch; r.status != http.StatusCreated {
				t.Fatalf("held reserve: %d %s", r.status, r.body)
			}
		}
		if r := h.reserve("console", "carol", adm["carol"], "k", nil); r.status != http.StatusCreated {
			t.Fatalf("the big sale's repeat once its slots freed: %d %s", r.status, r.body)
		}
	})
}

// TestBadInputIsNeverShed: on a saturated path, a malformed reserve is
// still told 400 (its own fault), and an unauthenticated one 401; only
// well-formed requests are shed.
func TestBadInputIsNeverShed(t *testing.T) {
	g := newHeldGate()
	h := isolated(t, backends[0], g, 1, 1)
	sale := h.createSale("phone", nil)
	adm := h.admit("phone", "alice")
	g.holdSale(sale["saleId"].(string))
	held := h.reserveAsync("phone", "alice", adm, "k")
	<-g.entered

	if r := h.reserve("phone", "bob", "x", "", nil); r.status != http.StatusBadRequest {
		t.Fatalf("no Idempotency-Key on a saturated path: %d %s, want 400", r.status, r.body)
	}
	if r := h.do("POST", "/sale/phone/reserve", map[string]string{"Idempotency-Key": "k"}, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("no shopper token on a saturated path: %d %s, want 401", r.status, r.body)
	}
	auth := map[string]string{"Authorization": "Bearer " + h.jwt("alice")}
	if r := h.do("POST", "/reservations/res_x/confirm", auth, `{"paymentRef": 7}`); r.status != http.StatusBadRequest {
		t.Fatalf("a malformed confirm on a saturated path: %d %s, want 400", r.status, r.body)
	}
	close(g.release)
	if r := <-held; r.status != http.StatusCreated {
		t.Fatalf("held reserve: %d %s", r.status, r.body)
	}
}

// TestBackgroundPoolWorksWhileThePurchasePoolIsExhausted: on PostgreSQL,
// with every connection of the purchase path's pool stuck (confirms
// waiting on a row lock held elsewhere), the sweeper still expires holds,
// the invariant watcher still checks, and the operator still sees the
// sale: they have a pool of their own.
func TestBackgroundPoolWorksWhileThePurchasePoolIsExhausted(t *testing.T) {
	h := newHarness(t, backend{name: "memory+postgres", postgres: true}, func(c *engine.Config) {
		c.DatabaseMaxConns, c.BackgroundMaxConns = 2, 2
	})
	ctx := context.Background()
	h.createSale("long", map[string]any{"holdSeconds": 600})
	h.createSale("short", map[string]any{"holdSeconds": 1})
	r := h.reserve("long", "alice", h.admit("long", "alice"), "k", nil)
	if r.status != http.StatusCreated {
		t.Fatalf("reserve: %d %s", r.status, r.body)
	}
	held := r.json(t)["reservationId"].(string)
	if r := h.reserve("short", "bob", h.admit("short", "bob"), "k", nil); r.status != http.StatusCreated {
		t.Fatalf("reserve: %d %s", r.status, r.body)
	}

	// Another client locks alice's row; her confirms then wait on it, each
	// holding a connection of the purchase pool, until it is full.
	locker, err := pgx.Connect(ctx, h.eng.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM reservations WHERE reservation_id = $1 FOR UPDATE`, held); err != nil {
		t.Fatal(err)
	}
	// The engine counts the record's calls around the store itself.
	// The engine counts the record's calls around the store itself.
	purchasePool := h.eng.Store.(*recordcalls.Store).Store.(*postgres.Store).Pool()
	confirms := make(chan error, 2)
	orders := make(chan string, 2)
	for i := 0; i < 2; i++ {
		go func() {
			o, err := h.eng.Purchase.Confirm(ctx, "alice", held, fmt.Sprintf("pay-%d", i))
			if err == nil {
				orders <- o.ID
			}
			confirms <- err
		}()
	}
	waitFor(t, "the purchase pool to be exhausted", func() bool {
		return purchasePool.Stat().AcquiredConns() == purchasePool.Stat().MaxConns()
	})

	// The purchase path cannot reach the record now...
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = h.eng.Store.Reservation(short, held)
	cancel()
	if err == nil {
		t.Fatal("the purchase path read the record through an exhausted pool")
	}
	// ...and the background work still can, well within a bound that
	// the stuck confirms (RecordTimeout 30s) would outlast.
	bg, cancelBg := context.WithTimeout(ctx, 10*time.Second)
	defer cancelBg()
	h.clock.Advance(2 * time.Second)
	units, err := h.eng.Sweeper.SweepOnce(bg)
	if err != nil || units != 1 {
		t.Fatalf("sweep while the purchase pool is exhausted: %d units, %v; want bob's 1", units, err)
	}
	if err := h.eng.Watcher.CheckAll(bg); err != nil {
		t.Fatalf("invariant check while the purchase pool is exhausted: %v", err)
	}
	// (The test's own read of the sale goes through the background pool
	// too: the harness's saleOf uses the purchase path's, which is stuck.)
	shortSale, err := h.eng.Background.SaleBySKU(bg, "short")
	if err != nil {
		t.Fatal(err)
	}
	if res, ok := h.eng.Watcher.Last(shortSale.ID); !ok || !res.OK {
		t.Fatalf("invariant of the short sale: %+v, %v", res, ok)
	}
	if v := h.sale("short"); v.Expired != 1 || v.Counter == nil || *v.Counter != 10 {
		t.Fatalf("operator view while the purchase pool is exhausted: %+v", v)
	}
	if n := purchasePool.Stat().AcquiredConns(); n != 2 {
		t.Fatalf("the purchase pool has %d connections in use, want its 2 stuck confirms throughout", n)
	}

	// Let the confirms go: one makes the order, the other repeats it.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := <-confirms; err != nil {
			t.Fatalf("confirm after the lock went: %v", err)
		}
	}
	if a, b := <-orders, <-orders; a != b {
		t.Fatalf("two confirms made two orders: %s and %s", a, b)
	}
}

// waitFor waits, at most 10s, until cond holds: a state the test reaches
// through other goroutines, polled, not a sleep standing in for it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// metrics returns the Prometheus text of /metrics.
func (h *harness) metrics() string {
	h.t.Helper()
	resp, err := h.srv.Client().Get(h.srv.URL + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// grepLines returns the lines of text that contain any of words.
func grepLines(text string, words ...string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// heldConfirms holds every confirm at the record's door until the test
// lets them go.
type heldConfirms struct {
	flashsale.Store
	entered chan string
	release chan struct{}
}

func (s *heldConfirms) ConfirmReservation(ctx context.Context, id, userID, paymentRef string, now time.Time) (*flashsale.Reservation, *flashsale.Order, error) {
	s.entered <- userID
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return s.Store.ConfirmReservation(ctx, id, userID, paymentRef, now)
}

// TestReservationRoutesShareOneBudget: confirm, cancel and reading a
// reservation name no sale, so they share one budget of a sale's size:
// with it full, another shopper's next is shed with 503 overloaded, while
// reserves still find slots; once it frees, the repeat succeeds. The
// shopper whose confirm holds the slot has one turn: a copy of that
// confirm shares its answer, another of its requests waits for the turn
// and is told 429.
func TestReservationRoutesShareOneBudget(t *testing.T) {
	st := &heldConfirms{entered: make(chan string, 8), release: make(chan struct{})}
	h := newHarness(t, backends[0], func(c *engine.Config) {
		c.MaxInFlight, c.SaleMaxInFlight, c.InFlightWait = 2, 1, -1
		c.WrapStore = func(inner flashsale.Store) flashsale.Store { st.Store = inner; return st }
	})
	h.createSale("phone", nil)
	reservation := func(user string) string {
		r := h.reserve("phone", user, h.admit("phone", user), "k", nil)
		if r.status != http.StatusCreated {
			t.Fatalf("reserve: %d %s", r.status, r.body)
		}
		return r.json(t)["reservationId"].(string)
	}
	id, bobID := reservation("alice"), reservation("bob")
	auth := map[string]string{"Authorization": "Bearer " + h.jwt("alice")}
	bob := map[string]string{"Authorization": "Bearer " + h.jwt("bob")}
	confirm := func() response { return h.do("POST", "/reservations/"+id+"/confirm", auth, `{"paymentRef": "p"}`) }

	first, copied := make(chan response, 1), make(chan response, 1)
	go func() { first <- confirm() }()
	<-st.entered // the reservation routes' one slot is held
	go func() { copied <- confirm() }()

	for name, r := range map[string]response{
		"confirm": h.do("POST", "/reservations/"+bobID+"/confirm", bob, `{"paymentRef": "p"}`),
		"cancel":  h.do("DELETE", "/reservations/"+bobID, bob, nil),
		"get":     h.do("GET", "/reservations/"+bobID, bob, nil),
	} {
		if r.status != http.StatusServiceUnavailable || r.code() != "overloaded" || r.header.Get("Retry-After") != "1" {
			t.Fatalf("%s with the reservation routes' budget full: %d %s, want 503 overloaded", name, r.status, r.body)
		}
	}
	if r := h.do("GET", "/reservations/"+id, auth, nil); r.status != http.StatusTooManyRequests || r.code() != "rate_limited" ||
		r.header.Get("Retry-After") != "1" {
		t.Fatalf("alice's read while her confirm is in flight: %d %s, want 429 rate_limited", r.status, r.body)
	}
	if r := h.reserve("phone", "carol", h.admit("phone", "carol"), "k", nil); r.status != http.StatusCreated {
		t.Fatalf("a reserve while confirms hold their budget: %d %s", r.status, r.body)
	}

	close(st.release)
	r := <-first
	if r.status != http.StatusOK {
		t.Fatalf("the held confirm: %d %s", r.status, r.body)
	}
	if c := <-copied; c.status != http.StatusOK || c.json(t)["orderId"] != r.json(t)["orderId"] {
		t.Fatalf("the copy sent meanwhile: %d %s, want the same order as %s", c.status, c.body, r.body)
	}
	again := confirm()
	if again.status != http.StatusOK || again.json(t)["orderId"] != r.json(t)["orderId"] {
		t.Fatalf("the repeat: %d %s, want the same order as %s", again.status, again.body, r.body)
	}
	if r := h.do("POST", "/reservations/"+bobID+"/confirm", bob, `{"paymentRef": "p"}`); r.status != http.StatusOK {
		t.Fatalf("bob's repeat once the slot is free: %d %s", r.status, r.body)
	}
}

// TestConfirmWaitsItsTurn: with the reservation routes' budget full, a
// winner's confirm is not shed after the reserves' short wait: it waits,
// parked, and is served once the slot frees. Its wait is at least
// DefaultReservationWait, longer if InFlightWait is, none if that is none.
func TestConfirmWaitsItsTurn(t *testing.T) {
	for _, tc := range []struct{ inFlight, want time.Duration }{
		{0, engine.DefaultReservationWait}, {2 * time.Second, 2 * time.Second}, {-1, -1},
	} {
		h := newHarness(t, backends[0], func(c *engine.Config) { c.InFlightWait = tc.inFlight })
		cfg := h.eng.InFlight.Config()
		if got := cfg.Patient[httpapi.ReservationRoutes].Wait; got != tc.want {
			t.Errorf("InFlightWait %v: the reservation routes wait %v, want %v", tc.inFlight, got, tc.want)
		}
		if tc.inFlight == 0 && cfg.Wait != engine.DefaultInFlightWait {
			t.Errorf("the reserves wait %v, want %v", cfg.Wait, engine.DefaultInFlightWait)
		}
		// A line about a quarter of a second deep at the rush's pace, not
		// one as long as the slots.
		if got, share := cfg.Patient[httpapi.ReservationRoutes].MaxWaiting, h.eng.InFlight.Share(httpapi.ReservationRoutes); got != 16*share {
			t.Errorf("up to %d reservation requests may wait, want 16 per slot of theirs (%d)", got, 16*share)
		}
	}

	st := &heldConfirms{entered: make(chan string, 8), release: make(chan struct{})}
	h := newHarness(t, backends[0], func(c *engine.Config) {
		c.MaxInFlight, c.SaleMaxInFlight = 2, 1 // the reservation routes get one slot
		c.WrapStore = func(inner flashsale.Store) flashsale.Store { st.Store = inner; return st }
	})
	h.createSale("phone", nil)
	confirms := make(map[string]chan response)
	for _, user := range []string{"alice", "bob"} {
		r := h.reserve("phone", user, h.admit("phone", user), "k", nil)
		if r.status != http.StatusCreated {
			t.Fatalf("reserve: %d %s", r.status, r.body)
		}
		id := r.json(t)["reservationId"].(string)
		auth := map[string]string{"Authorization": "Bearer " + h.jwt(user)}
		done := make(chan response, 1)
		confirms[user] = done
		go func() { done <- h.do("POST", "/reservations/"+id+"/confirm", auth, `{"paymentRef": "p"}`) }()
		if user == "alice" {
			<-st.entered // alice's confirm holds the one slot
		}
	}
	// bob's confirm waits for it, parked.
	for deadline := time.Now().Add(10 * time.Second); h.eng.InFlight.Waiting() != 1; {
		select {
		case r := <-confirms["bob"]:
			t.Fatalf("bob's confirm answered %d %s while the slot was held, want it to wait", r.status, r.body)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("bob's confirm never waited for the slot")
		}
		runtime.Gosched()
	}
	close(st.release)
	for user, done := range confirms {
		if r := <-done; r.status != http.StatusOK {
			t.Errorf("%s's confirm: %d %s", user, r.status, r.body)
		}
	}
}

// TestQueueAndGateTalkToRedisApart: on Redis the waiting room's queue and
// the stock gate each have connections of their own, named for them, so
// that a rush of first tickets (one queue call each) never stands in
// front of a reserve's reply on a shared connection.
func TestQueueAndGateTalkToRedisApart(t *testing.T) {
	h := newHarness(t, backend{name: "redis+sqlite", redis: true}, func(*engine.Config) {})
	h.createSale("apart", nil)
	if r := h.reserve("apart", "alice", h.admit("apart", "alice"), "k", nil); r.status != http.StatusCreated {
		t.Fatalf("reserve: %d %s", r.status, r.body)
	}
	list, err := h.redis.Do(context.Background(), h.redis.B().ClientList().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	// One line a connection, "id=7 addr=… name=flashsale-gate-… cmd=evalsha
	// …", cmd its last command. A connection whose last command is one
	// the client sends on connecting (or to keep the connection alive)
	// may have done none of the work.
	idle := map[string]bool{"NULL": true, "hello": true, "ping": true, "client|setname": true, "client|setinfo": true,
		"cluster|slots": true}
	worked := map[string][]string{}
	for _, line := range strings.Split(list, "\n") {
		var name, cmd string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "name="); ok {
				name = v
			} else if v, ok := strings.CutPrefix(f, "cmd="); ok {
				cmd = v
			}
		}
		if !idle[cmd] {
			worked[name] = append(worked[name], cmd)
		}
	}
	for _, role := range []string{"gate", "queue"} {
		if name := "flashsale-" + role + "-" + h.prefix; len(worked[name]) == 0 {
			t.Errorf("no Redis connection named %s did any work; last commands by name: %v", name, worked)
		}
	}
}

// TestPurchaseSharesLeaveRoomForAnotherSale: with the purchase path's
// default sizes, one sale's reserves at their share and every shopper's
// confirms at theirs still leave slots for another sale's reserves.
func TestPurchaseSharesLeaveRoomForAnotherSale(t *testing.T) {
	for _, tc := range []struct{ max, share int }{{0, 0}, {8, 0}, {4, 0}, {32, 12}} {
		h := newHarness(t, backends[0], func(c *engine.Config) {
			c.MaxInFlight, c.SaleMaxInFlight, c.InFlightWait = tc.max, tc.share, -1
		})
		b := h.eng.InFlight
		ctx := context.Background()
		for range b.Share("big") {
			if _, ok := b.Acquire(ctx, "big"); !ok {
				t.Fatalf("%+v: the big sale's share was shed", tc)
			}
		}
		for range b.Share(httpapi.ReservationRoutes) {
			if _, ok := b.Acquire(ctx, httpapi.ReservationRoutes); !ok {
				t.Fatalf("%+v: the confirms' share was shed", tc)
			}
		}
		if _, ok := b.Acquire(ctx, "quiet"); !ok {
			cfg := b.Config()
			t.Fatalf("%+v: no slot left for a quiet sale (max %d, sale %d, reservation routes %d)",
				tc, cfg.Max, cfg.PerKey, b.Share(httpapi.ReservationRoutes))
		}
	}
}

// roomBound is a harness whose waiting room holds at most share requests
// of a sale in progress, waiting for a slot at most wait.
func roomBound(t *testing.T, b backend, share int, wait time.Duration) *harness {
	return newHarness(t, b, func(c *engine.Config) { c.RoomSaleInFlight, c.RoomInFlightWait = share, wait })
}

// TestBigSaleCrowdLeavesTheRoomToAnother: while one sale's waiting-room
// requests hold all of its share (a crowd's tickets and polls in
// progress), its next request is shed 503 overloaded with Retry-After,
// having done nothing, and another sale's ticket and status are answered
// at the same moment.
func TestBigSaleCrowdLeavesTheRoomToAnother(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := roomBound(t, b, 2, -1)
		h.createSale("console", nil)
		h.createSale("teapot", nil)
		room := h.eng.RoomInFlight
		if room.Share("console") != 2 {
			t.Fatalf("a sale's share %d, want 2", room.Share("console"))
		}
		var crowd []func()
		for range 2 {
			release, ok := room.Acquire(context.Background(), "console")
			if !ok {
				t.Fatal("the crowd's slots were shed")
			}
			crowd = append(crowd, release)
		}

		auth := map[string]string{"Authorization": "Bearer " + h.jwt("alice")}
		r := h.do("GET", "/sale/console/ticket", auth, nil)
		if r.status != http.StatusServiceUnavailable || r.code() != "overloaded" || r.header.Get("Retry-After") != "1" {
			t.Fatalf("a ticket past the sale's share: %d %s (Retry-After %q), want 503 overloaded, Retry-After 1",
				r.status, r.body, r.header.Get("Retry-After"))
		}
		if r := h.do("GET", "/sale/console/status?token=x", nil, nil); r.status != http.StatusServiceUnavailable || r.code() != "overloaded" {
			t.Fatalf("a poll past the sale's share: %d %s, want 503 overloaded", r.status, r.body)
		}
		// What the route needs but lacks is told at once, never shed.
		if r := h.do("GET", "/sale/console/ticket", nil, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("a ticket without a JWT past the sale's share: %d %s, want 401", r.status, r.body)
		}
		if r := h.do("GET", "/sale/console/status", nil, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("a poll without a token past the sale's share: %d %s, want 401", r.status, r.body)
		}
		if r := h.do("POST", "/sale/console/register", nil, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("a registration without a JWT past the sale's share: %d %s, want 401", r.status, r.body)
		}
		if r := h.do("POST", "/sale/console/admission", nil, `{"token": "x"}`); r.status != http.StatusBadRequest {
			t.Fatalf("an admission without its nonce past the sale's share: %d %s, want 400", r.status, r.body)
		}
		if w := h.sale("console").Waiting; w != 0 {
			t.Fatalf("the shed ticket took a place: %v", w)
		}
		// The other sale, at the same moment.
		h.admit("teapot", "bob")
		if got := h.sale("teapot").Rejections; len(got) != 0 {
			t.Fatalf("the other sale was told no: %v", got)
		}
		if got := h.sale("console").Rejections; got["overloaded"] != 2 {
			t.Fatalf("the big sale's rejections %v, want overloaded 2", got)
		}
		if m := h.metrics(); !strings.Contains(m, "flashsale_room_in_flight 2") ||
			!strings.Contains(m, "flashsale_room_sale_in_flight_limit 2") {
			t.Fatalf("metrics do not show the room's slots:\n%s", grepLines(m, "room_"))
		}

		crowd[0]()
		h.admit("console", "alice")
		crowd[1]()
		if n := room.InFlight(); n != 0 {
			t.Fatalf("%d room slots taken after every answer", n)
		}
	})
}

// TestRoomRequestWaitsParkedForItsTurn: a waiting-room request past its
// sale's share waits, and is answered once a slot frees, not shed.
func TestRoomRequestWaitsParkedForItsTurn(t *testing.T) {
	h := roomBound(t, backends[0], 1, time.Hour)
	h.createSale("console", nil)
	room := h.eng.RoomInFlight
	release, ok := room.Acquire(context.Background(), "console")
	if !ok {
		t.Fatal("the crowd's slot was shed")
	}
	answered := make(chan response, 1)
	go func() {
		answered <- h.do("GET", "/sale/console/ticket", map[string]string{"Authorization": "Bearer " + h.jwt("alice")}, nil)
	}()
	for room.Waiting() == 0 {
		select {
		case r := <-answered:
			t.Fatalf("answered %d %s without a slot", r.status, r.body)
		default:
			runtime.Gosched()
		}
	}
	if m := h.metrics(); !strings.Contains(m, "flashsale_room_waiting 1") {
		t.Fatalf("metrics do not show the parked request:\n%s", grepLines(m, "room_"))
	}
	release()
	if r := <-answered; r.status != http.StatusOK {
		t.Fatalf("the parked ticket: %d %s, want 200", r.status, r.body)
	}
}

// TestRoomUnbounded: RoomSaleInFlight below zero bounds nothing; zero
// gives each sale four slots a processor.
func TestRoomUnbounded(t *testing.T) {
	if h := roomBound(t, backends[0], -1, 0); h.eng.RoomInFlight != nil {
		t.Fatal("a room bound with RoomSaleInFlight -1")
	}
	h := roomBound(t, backends[0], 0, 0)
	if got, want := h.eng.RoomInFlight.Share("any"), 4*runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("default share %d, want %d", got, want)
	}
	h.createSale("console", nil)
	h.admit("console", "alice")
}
