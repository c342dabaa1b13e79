package engine_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/token"
)

// saleModel is what a sale should look like from outside, step by step:
// the units left, whether it is paused, and each shopper's latest
// reservation.
type saleModel struct {
	initial int
	stock   int
	paused  bool
	holds   map[string]*modelHold // by user
	// answers are the first answers to each (user, key), for replays.
	answers map[string]modelAnswer
}

type modelHold struct {
	id, key  string
	quantity int
	state    flashsale.ReservationState
	expires  time.Time
	orderID  string
}

type modelAnswer struct {
	user, key, admission string
	quantity             int
	status               int
	body                 string
}

func (m *saleModel) live(user string) bool {
	h := m.holds[user]
	return h != nil && h.state.Live()
}

// machine drives one sale of an engine through random interleavings of
// shopper and operator actions and checks every answer, and after every
// action the gate and the record, against the model.
type machine struct {
	h     *harness
	sku   string
	model saleModel
	users []string
	keys  atomic.Int64
}

const modelHoldSeconds = 10

var modelSales atomic.Int64

func newMachine(t *rapid.T, h *harness) *machine {
	m := &machine{h: h, sku: fmt.Sprintf("model-%d", modelSales.Add(1)),
		users: []string{"ann", "bob", "cy", "dee", "eve"}}
	initial := rapid.IntRange(1, 6).Draw(t, "initial")
	m.model = saleModel{initial: initial, stock: initial, holds: map[string]*modelHold{}, answers: map[string]modelAnswer{}}
	h.createSale(m.sku, map[string]any{"initialStock": initial, "perUserLimit": 2, "holdSeconds": modelHoldSeconds})
	return m
}

// admission mints a fresh admission for the sale's current epoch, as the
// waiting room would, so each reserve spends an admission of its own.
func (m *machine) admission(user string) string {
	sale := m.h.saleOf(m.sku)
	return m.h.eng.Tokens.SignAdmission(token.Admission{UserID: user, SaleID: sale.ID,
		ID: fmt.Sprintf("adm-%s-%d", user, m.keys.Add(1)), Expires: m.h.clock.Now().Add(time.Minute), Epoch: sale.Epoch})
}

func (m *machine) auth(user string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + m.h.jwt(user)}
}

func (m *machine) want(t *rapid.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.code() != code) {
		t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
}

func (m *machine) Reserve(t *rapid.T) {
	user := rapid.SampledFrom(m.users).Draw(t, "user")
	q := rapid.IntRange(1, 2).Draw(t, "quantity")
	key := fmt.Sprintf("k%d", m.keys.Add(1))
	adm := m.admission(user)
	r := m.h.reserve(m.sku, user, adm, key, map[string]any{"quantity": q})
	what := fmt.Sprintf("reserve %d by %s", q, user)
	md := &m.model
	switch {
	case md.paused:
		m.want(t, what, r, http.StatusServiceUnavailable, "sale_paused")
		return
	case md.stock < q:
		m.want(t, what, r, http.StatusConflict, "sold_out")
	case md.live(user):
		m.want(t, what, r, http.StatusConflict, "limit_reached")
	default:
		m.want(t, what, r, http.StatusCreated, "")
		md.stock -= q
		md.holds[user] = &modelHold{id: r.json(m.h.t)["reservationId"].(string), key: key, quantity: q,
			state: flashsale.ReservationPending, expires: m.h.clock.Now().Add(modelHoldSeconds * time.Second)}
	}
	md.answers[user+"\x00"+key] = modelAnswer{user: user, key: key, admission: adm, quantity: q, status: r.status, body: string(r.body)}
}

// Replay repeats an earlier reserve whose answer was final: the same
// status and body, whatever happened since, and nothing moves.
func (m *machine) Replay(t *rapid.T) {
	if len(m.model.answers) == 0 {
		t.Skip("nothing to replay")
	}
	keys := make([]string, 0, len(m.model.answers))
	for k := range m.model.answers {
		keys = append(keys, k)
	}
	a := m.model.answers[rapid.SampledFrom(sortedStrings(keys)).Draw(t, "answer")]
	r := m.h.reserve(m.sku, a.user, a.admission, a.key, map[string]any{"quantity": a.quantity})
	if r.status != a.status || string(r.body) != a.body {
		t.Fatalf("replay of %s's key %s: %d %s, first %d %s", a.user, a.key, r.status, r.body, a.status, a.body)
	}
}

func (m *machine) pickHold(t *rapid.T) (string, *modelHold) {
	users := make([]string, 0, len(m.model.holds))
	for u := range m.model.holds {
		users = append(users, u)
	}
	if len(users) == 0 {
		t.Skip("no reservation yet")
	}
	u := rapid.SampledFrom(sortedStrings(users)).Draw(t, "holder")
	return u, m.model.holds[u]
}

func (m *machine) Confirm(t *rapid.T) {
	user, h := m.pickHold(t)
	r := m.h.do("POST", "/reservations/"+h.id+"/confirm", m.auth(user), map[string]string{"paymentRef": "p-" + h.id})
	what := fmt.Sprintf("confirm %s's %s (%s)", user, h.id, h.state)
	switch {
	case h.state == flashsale.ReservationConfirmed:
		m.want(t, what, r, http.StatusOK, "")
		if got := r.json(m.h.t)["orderId"]; got != h.orderID {
			t.Fatalf("%s: order %v, first %v", what, got, h.orderID)
		}
	case h.state == flashsale.ReservationCancelled:
		m.want(t, what, r, http.StatusConflict, "reservation_cancelled")
	case h.state == flashsale.ReservationExpired || !m.h.clock.Now().Before(h.expires):
		m.want(t, what, r, http.StatusConflict, "reservation_expired")
	default:
		m.want(t, what, r, http.StatusOK, "")
		h.state, h.orderID = flashsale.ReservationConfirmed, r.json(m.h.t)["orderId"].(string)
	}
}

func (m *machine) Cancel(t *rapid.T) {
	user, h := m.pickHold(t)
	r := m.h.do("DELETE", "/reservations/"+h.id, m.auth(user), nil)
	what := fmt.Sprintf("cancel %s's %s (%s)", user, h.id, h.state)
	switch h.state {
	case flashsale.ReservationConfirmed:
		m.want(t, what, r, http.StatusConflict, "reservation_confirmed")
	case flashsale.ReservationExpired:
		m.want(t, what, r, http.StatusConflict, "reservation_expired")
	case flashsale.ReservationCancelled:
		m.want(t, what, r, http.StatusOK, "")
	default:
		// A pending hold may be cancelled even past its expiry, until a
		// sweeper takes it: one of the two returns the units, once.
		m.want(t, what, r, http.StatusOK, "")
		h.state = flashsale.ReservationCancelled
		m.model.stock += h.quantity
	}
}

// Expire moves the clock on and sweeps: every pending hold whose time is
// up comes back to stock, once.
func (m *machine) Expire(t *rapid.T) {
	d := time.Duration(rapid.IntRange(1, modelHoldSeconds+2).Draw(t, "seconds")) * time.Second
	m.h.clock.Advance(d)
	if _, err := m.h.eng.Sweeper.SweepOnce(context.Background()); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	now := m.h.clock.Now()
	for _, h := range m.model.holds {
		if h.state == flashsale.ReservationPending && !h.expires.After(now) {
			h.state = flashsale.ReservationExpired
			m.model.stock += h.quantity
		}
	}
}

func (m *machine) Pause(t *rapid.T) {
	m.want(t, "pause", m.h.do("POST", "/admin/sales/"+m.sku+"/pause", nil, nil), http.StatusOK, "")
	m.model.paused = true
}

func (m *machine) Resume(t *rapid.T) {
	m.want(t, "resume", m.h.do("POST", "/admin/sales/"+m.sku+"/resume", nil, nil), http.StatusOK, "")
	m.model.paused = false
}

// Rebuild recomputes the gate from the record: refused unless paused;
// the counter it sets is the model's stock.
func (m *machine) Rebuild(t *rapid.T) {
	r := m.h.do("POST", "/admin/sales/"+m.sku+"/rebuild", nil, nil)
	if !m.model.paused {
		m.want(t, "rebuild of an open sale", r, http.StatusConflict, "not_paused")
		return
	}
	m.want(t, "rebuild", r, http.StatusOK, "")
}

// Check runs after every action: the gate's counter is the model's stock,
// counter + confirmed + pending == initial, and the gate's own
// bookkeeping agrees with the record.
func (m *machine) Check(t *rapid.T) {
	ctx := context.Background()
	sale := m.h.saleOf(m.sku)
	snap, err := m.h.eng.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	totals, err := m.h.eng.Store.SaleTotals(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Counter != int64(m.model.stock) {
		t.Fatalf("counter %d, the model says %d (%+v)", snap.Counter, m.model.stock, snap)
	}
	if got := snap.Counter + totals.Confirmed + totals.Pending; got != int64(m.model.initial) {
		t.Fatalf("counter %d + confirmed %d + pending %d = %d, want initial %d", snap.Counter, totals.Confirmed, totals.Pending, got, m.model.initial)
	}
	if snap.Drift() != 0 || snap.Held() != totals.Confirmed+totals.Pending {
		t.Fatalf("gate %+v disagrees with the record %+v", snap, totals)
	}
	var confirmed, pending int64
	for _, h := range m.model.holds {
		switch h.state {
		case flashsale.ReservationConfirmed:
			confirmed += int64(h.quantity)
		case flashsale.ReservationPending:
			pending += int64(h.quantity)
		}
	}
	if totals.Confirmed != confirmed || totals.Pending != pending {
		t.Fatalf("record %+v, the model says %d confirmed and %d pending", totals, confirmed, pending)
	}
	if (sale.State == flashsale.SalePaused) != m.model.paused {
		t.Fatalf("sale state %s, the model says paused=%v", sale.State, m.model.paused)
	}
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// TestSaleModel: random interleavings of reserve (and its replays),
// confirm, cancel, expiry (the clock moved on, then a sweep), pause,
// resume and rebuild, on the embedded and the real backends, each answer
// and each state checked against a model of the sale. rapid shrinks a
// failing interleaving to a short one.
func TestSaleModel(t *testing.T) {
	// Each check is a sale of its own on a real backend: 40 per backend
	// keep CI moderate; -rapid.checks asks for more.
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set && os.Getenv("RAPID_CHECKS") == "" {
		if err := flag.Set("rapid.checks", "40"); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []backend{backends[0], backends[1]} {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, b)
			rapid.Check(t, func(rt *rapid.T) {
				m := newMachine(rt, h)
				rt.Repeat(rapid.StateMachineActions(m))
			})
		})
	}
}

// TestReplayAfterRebuild: a rebuild keeps the idempotency keys of live
// holds only; the key of a hold that ended before it still replays its
// first answer, paused sale or not, and never buys again.
func TestReplayAfterRebuild(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("lamp", map[string]any{"initialStock": 1})
		adm := h.admit("lamp", "ann")
		first := h.reserve("lamp", "ann", adm, "k", nil)
		if first.status != http.StatusCreated {
			t.Fatalf("reserve: %d %s", first.status, first.body)
		}
		id := first.json(t)["reservationId"].(string)
		if r := h.do("DELETE", "/reservations/"+id, map[string]string{"Authorization": "Bearer " + h.jwt("ann")}, nil); r.status != 200 {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		h.do("POST", "/admin/sales/lamp/pause", nil, nil)
		if r := h.do("POST", "/admin/sales/lamp/rebuild", nil, nil); r.status != 200 {
			t.Fatalf("rebuild: %d %s", r.status, r.body)
		}
		for _, state := range []string{"paused", "open"} {
			if state == "open" {
				h.do("POST", "/admin/sales/lamp/resume", nil, nil)
			}
			again := h.reserve("lamp", "ann", adm, "k", nil)
			if again.status != first.status || string(again.body) != string(first.body) {
				t.Fatalf("replay after the rebuild, sale %s: %d %s, want the first answer %d %s", state, again.status, again.body, first.status, first.body)
			}
		}
		if counter, totals := h.exact("lamp"); counter != 1 || totals.Pending != 0 {
			t.Fatalf("counter %d totals %+v: the replay bought again", counter, totals)
		}
	})
}
