package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
)

// restart stops the harness's engine as serve does on SIGTERM (the HTTP
// server first, then the engine's Close) and opens a new one on the same
// data dir and record, behind a new server.
func (h *harness) restart() {
	h.t.Helper()
	cfg := h.eng.Config
	h.srv.Close()
	if err := h.eng.Close(); err != nil {
		h.t.Fatalf("close the engine: %v", err)
	}
	eng, err := engine.Open(context.Background(), cfg)
	if err != nil {
		h.t.Fatalf("open the engine again: %v", err)
	}
	h.t.Cleanup(func() { eng.Close() })
	h.eng, h.srv = eng, httptest.NewServer(eng.Handler)
}

// TestRestartIsANonEvent: on the embedded default (the in-process gate and
// queue; the record in SQLite, or PostgreSQL), a restart mid-sale leaves
// the sale open with its figures exact (counter + confirmed + pending ==
// initial, the gate holding what the record holds), its acknowledged
// reservations whole (a pending one is confirmed after it, an order's key
// replays), its turns taken, its shoppers' places (their tickets, and the
// place a shopper asking again gets) and admissions: an admission issued
// before the restart is refused as such, and the shopper's new one works. A
// sale an operator or the invariant watcher paused stays paused with its
// reason, and resumes without a rebuild; one that had failed closed
// because the gate lost it reopens. And again after a second restart.
func TestRestartIsANonEvent(t *testing.T) {
	for _, b := range []backend{{name: "memory+sqlite"}, {name: "memory+postgres", postgres: true}} {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, b)
			ctx := context.Background()
			auth := func(user string) map[string]string {
				return map[string]string{"Authorization": "Bearer " + h.jwt(user)}
			}
			h.createSale("tv", map[string]any{"initialStock": 10})
			h.createSale("lamp", map[string]any{"initialStock": 5, "admissionPerSecond": 1})
			h.createSale("chair", map[string]any{"initialStock": 5})
			h.createSale("desk", map[string]any{"initialStock": 5})
			h.createSale("rug", map[string]any{"initialStock": 5})
			h.createSale("later", map[string]any{"initialStock": 5,
				"opensAt": h.clock.Now().Add(time.Hour).Format(time.RFC3339)})

			// tv: an order, a pending hold, a cancelled one, an admission
			// not used yet.
			reserve := func(sku, user, adm, key string) string {
				t.Helper()
				r := h.reserve(sku, user, adm, key, nil)
				if r.status != http.StatusCreated {
					t.Fatalf("reserve %s for %s: %d %s", sku, user, r.status, r.body)
				}
				return r.json(t)["reservationId"].(string)
			}
			paid := reserve("tv", "buyer", h.admit("tv", "buyer"), "k")
			if r := h.do("POST", "/reservations/"+paid+"/confirm", auth("buyer"), map[string]string{"paymentRef": "pay-1"}); r.status != http.StatusOK {
				t.Fatalf("confirm: %d %s", r.status, r.body)
			}
			pending := reserve("tv", "holder", h.admit("tv", "holder"), "k")
			cancelled := reserve("tv", "canceller", h.admit("tv", "canceller"), "k")
			if r := h.do("DELETE", "/reservations/"+cancelled, auth("canceller"), nil); r.status != http.StatusOK {
				t.Fatalf("cancel: %d %s", r.status, r.body)
			}
			early := h.admit("tv", "early")
			reserve("chair", "c1", h.admit("chair", "c1"), "k")
			reserve("desk", "d1", h.admit("desk", "d1"), "k")
			reserve("rug", "r1", h.admit("rug", "r1"), "k")

			// lamp is paced: places 1 to 3, the first admitted.
			tickets := map[string]string{}
			ticket := func(user string) (string, int64) {
				t.Helper()
				r := h.do("GET", "/sale/lamp/ticket", auth(user), nil)
				if r.status != http.StatusOK {
					t.Fatalf("ticket for %s: %d %s", user, r.status, r.body)
				}
				j := r.json(t)
				return j["token"].(string), int64(j["position"].(float64))
			}
			for _, u := range []string{"la", "lb", "lc"} {
				tickets[u], _ = ticket(u)
			}
			if _, err := h.eng.Queue.Admit(ctx, h.saleOf("lamp").ID, 1); err != nil {
				t.Fatal(err)
			}

			// chair: paused by an operator; desk: by the invariant
			// watcher; rug: failed closed because the gate lost it.
			if r := h.do("POST", "/admin/sales/chair/pause", nil, map[string]string{"reason": "supplier recall"}); r.status != http.StatusOK {
				t.Fatalf("pause: %d %s", r.status, r.body)
			}
			const invariantReason = "the invariant failed: counter + confirmed + pending != initial"
			h.eng.Control.FailClosed(ctx, h.saleOf("desk").ID, invariantReason)
			h.eng.Control.FailClosed(ctx, h.saleOf("rug").ID, flashsale.PauseGateLost)

			before := map[string]*flashsale.Sale{}
			for _, sku := range []string{"tv", "lamp", "chair", "desk", "rug", "later"} {
				before[sku] = h.saleOf(sku)
			}
			holdsBefore := h.gateHolds("tv")

			for round := 1; round <= 2; round++ {
				h.restart()

				// tv: open, exact, its holds in the gate as before.
				if v := h.sale("tv"); v.State != flashsale.SaleOpen || v.Gate != "loaded" {
					t.Fatalf("round %d: tv after the restart: state %v, gate %v", round, v.State, v.Gate)
				}
				counter, totals := h.exact("tv")
				if counter != 8 || totals.Confirmed != 1 || totals.Pending != 1 || totals.Cancelled != 1 {
					t.Fatalf("round %d: tv counter %d, totals %+v; want 8 left, 1 confirmed, 1 pending, 1 cancelled", round, counter, totals)
				}
				if got := h.gateHolds("tv"); !slices.Equal(got, holdsBefore) {
					t.Fatalf("round %d: the gate holds %v; before the restart %v", round, got, holdsBefore)
				}
				if e := h.saleOf("tv").Epoch; e != before["tv"].Epoch+int64(round) {
					t.Fatalf("round %d: tv at epoch %d; want %d", round, e, before["tv"].Epoch+int64(round))
				}
				// The order's key replays it; turns taken stay taken.
				if r := h.reserve("tv", "buyer", h.admit("tv", "buyer"), "k", nil); r.status != http.StatusCreated || r.json(t)["reservationId"] != paid {
					t.Fatalf("round %d: the buyer's key: %d %s; want its reservation %s", round, r.status, r.body, paid)
				}
				for _, u := range []string{"buyer", "holder", "canceller"} {
					if r := h.reserve("tv", u, h.admit("tv", u), "another", nil); r.status != http.StatusForbidden || r.code() != "admission_used" {
						t.Fatalf("round %d: %s reserves again: %d %s; want 403 admission_used", round, u, r.status, r.body)
					}
				}

				// lamp: every shopper keeps its place, the first stays
				// admitted, a newcomer queues behind them.
				for i, u := range []string{"la", "lb", "lc"} {
					r := h.do("GET", "/sale/lamp/status?token="+tickets[u], nil, nil)
					if r.status != http.StatusOK {
						t.Fatalf("round %d: %s's ticket after the restart: %d %s", round, u, r.status, r.body)
					}
					st := r.json(t)
					if want := "waiting"; i == 0 {
						if st["state"] != "admitted" {
							t.Fatalf("round %d: la's status %v; want admitted", round, st)
						}
					} else if st["state"] != want || int64(st["position"].(float64)) != int64(i) {
						t.Fatalf("round %d: %s's status %v; want waiting at %d", round, u, st, i)
					}
					if _, pos := ticket(u); pos != int64(i) {
						t.Fatalf("round %d: %s asks for a ticket again: position %d; want %d", round, u, pos, i)
					}
				}
				if _, pos := ticket("newcomer"); pos != 3 {
					t.Fatalf("round %d: a newcomer's position %d; want 3, behind the three before it", round, pos)
				}

				// The pauses: kept with their reasons, or cured.
				for sku, reason := range map[string]string{"chair": "supplier recall", "desk": invariantReason} {
					if v := h.sale(sku); v.State != flashsale.SalePaused || v.PauseReason != reason || v.Gate != "loaded" {
						t.Fatalf("round %d: %s after the restart: state %v, reason %v, gate %v; want paused (%s), loaded",
							round, sku, v.State, v.PauseReason, v.Gate, reason)
					}
					h.exact(sku)
				}
				if v := h.sale("rug"); v.State != flashsale.SaleOpen || v.Gate != "loaded" {
					t.Fatalf("round %d: rug after the restart: state %v, gate %v; want open, loaded", round, v.State, v.Gate)
				}
				h.exact("rug")
				if v := h.sale("later"); v.State != flashsale.SaleScheduled {
					t.Fatalf("round %d: later after the restart: %v", round, v.State)
				}
			}

			// The admission from before the restarts is refused as one of
			// an older epoch; the shopper's new one works.
			if r := h.reserve("tv", "early", early, "k", nil); r.status != http.StatusForbidden || r.code() != "admission_expired" {
				t.Fatalf("an admission from before the restart: %d %s; want 403 admission_expired", r.status, r.body)
			}
			reserve("tv", "early", h.admit("tv", "early"), "k")
			if r := h.do("POST", "/reservations/"+pending+"/confirm", auth("holder"), map[string]string{"paymentRef": "pay-2"}); r.status != http.StatusOK {
				t.Fatalf("confirm the hold taken before the restarts: %d %s", r.status, r.body)
			}
			if counter, totals := h.exact("tv"); counter != 7 || totals.Confirmed != 2 || totals.Pending != 1 {
				t.Fatalf("tv counter %d, totals %+v; want 7 left, 2 confirmed, 1 pending", counter, totals)
			}
			// The operator resumes without a rebuild: the counter is whole.
			if r := h.do("POST", "/admin/sales/chair/resume", nil, nil); r.status != http.StatusOK {
				t.Fatalf("resume after the restart: %d %s", r.status, r.body)
			}
			reserve("chair", "c2", h.admit("chair", "c2"), "k")
			h.exact("chair")
			// The queue was read once: its file is gone until the next stop.
			if _, err := readFile(filepath.Join(h.eng.Config.DataDir, "queue")); err == nil {
				t.Fatal("the saved queue is still in the data dir after the start read it")
			}
		})
	}
}

// gateHolds returns the reservation ids the gate holds for the sale,
// sorted.
func (h *harness) gateHolds(sku string) []string {
	h.t.Helper()
	hs, err := h.eng.Gate.Holds(context.Background(), h.saleOf(sku).ID)
	if err != nil {
		h.t.Fatal(err)
	}
	ids := make([]string, len(hs))
	for i, hold := range hs {
		ids[i] = hold.ReservationID
	}
	slices.Sort(ids)
	return ids
}

// TestOneInProcessGatePerRecord: the in-process gate is the only counter
// of the stock, which is what lets it be rebuilt from the record at start.
// A second server keeping its own gate over the same PostgreSQL would
// count the same stock twice, so it is refused at start, with the flag to
// change; once the first stops, a server may take its place.
func TestOneInProcessGatePerRecord(t *testing.T) {
	dbURL := testenv.Postgres(t)
	open := func() (*engine.Engine, error) {
		return engine.Open(context.Background(), engine.Config{
			DataDir: t.TempDir(), DatabaseURL: dbURL, Source: "test-server",
		})
	}
	first, err := open()
	if err != nil {
		t.Fatalf("open the first server: %v", err)
	}
	second, err := open()
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second in-process gate over the same PostgreSQL was opened")
	}
	if !strings.Contains(err.Error(), "--redis-url") {
		t.Fatalf("the refusal %q does not say which flag to change", err)
	}
	first.Close()
	third, err := open()
	if err != nil {
		t.Fatalf("open a server after the first stopped: %v", err)
	}
	third.Close()
}
