package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/restock"
)

// The attacks of issue 21 on the purchase path and the waiting room, each
// a test that fails without its defence: the payment instrument a shopper
// writes into the body, one account's burst, and a copy of someone else's
// ticket.

// TestInstrumentComesFromTheStore: the per-instrument limits count the
// instrument the shopper's JWT vouches for (pmf), never the body's alone.
// Sending a victim's fingerprint blocks no one; leaving the field out
// escapes nothing; a body that contradicts the JWT is refused.
func TestInstrumentComesFromTheStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("card", map[string]any{"initialStock": 10})

		// Mallory writes the victim's card into her body: it counts for
		// nothing, so the victim, whose sign-in vouches for it, still buys.
		if r := h.reserve("card", "mallory", h.admit("card", "mallory"), "m", `{"paymentFingerprint":"card-victim"}`); r.status != 201 {
			t.Fatalf("mallory: %d %s", r.status, r.body)
		}
		if r := h.reserveAs("card", h.jwtCard("victim", "card-victim"), h.admit("card", "victim"), "v", `{"paymentFingerprint":"card-victim"}`); r.status != 201 {
			t.Fatalf("the victim, after mallory sent its card: %d %s, want 201", r.status, r.body)
		}
		// Two accounts on one card leave the field out: the JWT's claim
		// still counts, and the second is refused.
		if r := h.reserveAs("card", h.jwtCard("mule-1", "card-farm"), h.admit("card", "mule-1"), "k", nil); r.status != 201 {
			t.Fatalf("mule-1: %d %s", r.status, r.body)
		}
		if r := h.reserveAs("card", h.jwtCard("mule-2", "card-farm"), h.admit("card", "mule-2"), "k", nil); r.status != 409 || r.code() != "limit_reached" {
			t.Fatalf("mule-2 on the same card without a body: %d %s, want 409 limit_reached", r.status, r.body)
		}
		// A body that differs from the JWT's instrument is refused before
		// anything is spent; the same value is fine.
		adm := h.admit("card", "carol")
		if r := h.reserveAs("card", h.jwtCard("carol", "card-carol"), adm, "c1", `{"paymentFingerprint":"card-farm"}`); r.status != 400 || r.code() != "bad_request" {
			t.Fatalf("a body contradicting the JWT: %d %s, want 400", r.status, r.body)
		}
		if r := h.reserveAs("card", h.jwtCard("carol", "card-carol"), adm, "c2", `{"paymentFingerprint":"card-carol"}`); r.status != 201 {
			t.Fatalf("a body agreeing with the JWT: %d %s", r.status, r.body)
		}
		if counter, totals := h.exact("card"); counter != 6 || totals.Pending != 4 {
			t.Fatalf("counter %d pending %d, want 6 and 4", counter, totals.Pending)
		}
	})
}

// TestInstrumentBudgetCannotBeDrained: the per-instrument budget is spent
// only by requests whose JWT vouches for the instrument: accounts writing
// a victim's card into their bodies spend their own budgets, not its.
func TestInstrumentBudgetCannotBeDrained(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("tee", map[string]any{"initialStock": 1})
		h.reserve("tee", "taker", h.admit("tee", "taker"), "k", nil) // the one unit is held: sold out, not final
		for i := range 8 {
			u := fmt.Sprintf("drainer-%d", i)
			if r := h.reserve("tee", u, h.admitPaused("tee", u), "k", `{"paymentFingerprint":"card-victim"}`); r.code() != "sold_out" {
				t.Fatalf("%s: %d %s", u, r.status, r.body)
			}
		}
		if r := h.reserveAs("tee", h.jwtCard("victim", "card-victim"), h.admitPaused("tee", "victim"), "k", nil); r.code() != "sold_out" {
			t.Fatalf("the victim after eight drainers: %d %s, want sold_out (its card's budget untouched)", r.status, r.body)
		}
	})
}

// TestTrustedClientInstrument: a server told to trust the client's
// instrument (--trust-client-instrument, the demo's) counts the body's
// fingerprint where the JWT carries none.
func TestTrustedClientInstrument(t *testing.T) {
	for name, trust := range map[string]func(*engine.Config){
		"trust-client-instrument": func(c *engine.Config) { c.TrustClientInstrument = true },
		"demo":                    func(c *engine.Config) { c.Demo = true },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, backends[0], trust)
			h.createSale("demo", map[string]any{"initialStock": 10})
			if r := h.reserve("demo", "ann", h.admit("demo", "ann"), "k", `{"paymentFingerprint":"card-1"}`); r.status != 201 {
				t.Fatalf("ann: %d %s", r.status, r.body)
			}
			if r := h.reserve("demo", "ben", h.admit("demo", "ben"), "k", `{"paymentFingerprint":"card-1"}`); r.code() != "limit_reached" {
				t.Fatalf("ben on ann's card, trusted: %d %s, want limit_reached", r.status, r.body)
			}
		})
	}
}

// TestSaleRequiresInstrument: a sale with requireInstrument publishes it
// and refuses a reserve whose JWT vouches for no instrument (403
// not_eligible, a trusted body aside); the operator can change it.
func TestSaleRequiresInstrument(t *testing.T) {
	for _, b := range []backend{backends[0], backends[2]} {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, b)
			created := h.createSale("vip", map[string]any{"initialStock": 5, "requireInstrument": true})
			if created["requireInstrument"] != true {
				t.Fatalf("created: %v", created)
			}
			if p := h.do("GET", "/sale/vip", nil, nil).json(t)["policy"].(map[string]any); p["requireInstrument"] != true {
				t.Fatalf("published policy: %v", p)
			}
			adm := h.admit("vip", "ann")
			if r := h.reserve("vip", "ann", adm, "k1", `{"paymentFingerprint":"card-ann"}`); r.status != 403 || r.code() != "not_eligible" {
				t.Fatalf("no instrument in the JWT: %d %s, want 403 not_eligible", r.status, r.body)
			}
			if r := h.reserveAs("vip", h.jwtCard("ann", "card-ann"), adm, "k2", nil); r.status != 201 {
				t.Fatalf("with the JWT's instrument: %d %s", r.status, r.body)
			}
			v := h.sale("vip")
			r := h.do("PATCH", "/admin/sales/vip", map[string]string{"If-Match": fmt.Sprint(v.Version)}, map[string]any{"requireInstrument": false})
			if r.status != 200 || r.json(t)["requireInstrument"] != false {
				t.Fatalf("patch: %d %s", r.status, r.body)
			}
			if r := h.reserve("vip", "ben", h.admit("vip", "ben"), "k", nil); r.status != 201 {
				t.Fatalf("once no longer required: %d %s", r.status, r.body)
			}
			if h.saleOf("vip").RequireInstrument {
				t.Fatal("the record still requires an instrument")
			}
		})
	}
}

// TestOneAccountCannotTakeTheSlots: one account firing a hundred reserves
// at once, with the purchase path at its default sizes, gets exactly one
// 201 and otherwise 403, 409 or 429, never 503; another account
// reserving at the same moment is not shed.
func TestOneAccountCannotTakeTheSlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, func(c *engine.Config) { c.MaxInFlight = 0 }) // the production default sizes
		h.createSale("drop", map[string]any{"initialStock": 50})
		greedy, other := h.admit("drop", "greedy"), h.admit("drop", "other")
		codes := burst(t, 100, func(i int) response {
			return h.reserve("drop", "greedy", greedy, fmt.Sprint("k-", i), nil)
		}, func() {
			if r := h.reserve("drop", "other", other, "k", nil); r.status != 201 {
				t.Errorf("another account during the burst: %d %s, want 201", r.status, r.body)
			}
		})
		if codes[201] != 1 {
			t.Fatalf("the burst won %d times, want 1: %v", codes[201], codes)
		}
		if counter, totals := h.exact("drop"); counter != 48 || totals.Pending != 2 {
			t.Fatalf("counter %d pending %d, want 48 and 2", counter, totals.Pending)
		}
	})
}

// burst fires n requests at once, and during them, once, also; it fails t
// on any answer but 201, 403, 409 and 429, and returns the statuses.
func burst(t *testing.T, n int, fire func(i int) response, also func()) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			r := fire(i)
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			switch r.status {
			case 201, 403, 409:
			case 429:
				if r.header.Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After: %s", r.body)
				}
			default:
				t.Errorf("request %d of the burst: %d %s", i, r.status, r.body)
			}
		})
	}
	close(gate)
	also()
	wg.Wait()
	return codes
}

// reservesInFlight counts one user's gate reserves in flight, on one
// server (mine) and over all (all).
type reservesInFlight struct {
	restock.Gate
	user string
	mine peakCount
	all  *peakCount
}

type peakCount struct{ now, peak atomic.Int64 }

func (p *peakCount) enter() {
	n := p.now.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			return
		}
	}
}

func (g *reservesInFlight) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	if r.UserID == g.user {
		g.mine.enter()
		g.all.enter()
		defer g.mine.now.Add(-1)
		defer g.all.now.Add(-1)
	}
	return g.Gate.Reserve(ctx, r)
}

// TestAccountTurnIsPerServer: the account's one turn is each server's own.
// With two servers behind a load balancer sharing Redis and PostgreSQL, an
// account's burst spread over both has at most one reserve in flight on
// each (two in all), still wins exactly once (the gate's per-user check is
// global) and is never answered 503; another account is not shed.
func TestAccountTurnIsPerServer(t *testing.T) {
	all := &peakCount{}
	var servers []*reservesInFlight
	var mu sync.Mutex
	wrap := func(c *engine.Config) {
		// The production sizes; no reserve budget, so that every request
		// given a turn reaches the gate.
		c.MaxInFlight, c.ReserveBurst = 0, -1
		c.WrapGate = func(g restock.Gate) restock.Gate {
			w := &reservesInFlight{Gate: g, user: "greedy", all: all}
			mu.Lock()
			servers = append(servers, w)
			mu.Unlock()
			return w
		}
	}
	h := newHarness(t, backends[1], wrap)
	cfg := h.eng.Config
	cfg.Source, cfg.DataDir, cfg.TokenKeys = "second-server", t.TempDir(), tokenKeysOf(t, h)
	second, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(second.Handler)
	t.Cleanup(func() { srv2.Close(); second.Close() })

	h.createSale("fleet", map[string]any{"initialStock": 50})
	greedy, other := h.admit("fleet", "greedy"), h.admit("fleet", "other")
	hdr := func(user, adm, key string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + h.jwt(user), "X-Admission-Token": adm, "Idempotency-Key": key}
	}
	codes := burst(t, 100, func(i int) response {
		if i%2 == 0 {
			return h.do("POST", "/sale/fleet/reserve", hdr("greedy", greedy, fmt.Sprint("k-", i)), nil)
		}
		return doAt(t, srv2, "POST", "/sale/fleet/reserve", hdr("greedy", greedy, fmt.Sprint("k-", i)))
	}, func() {
		if r := doAt(t, srv2, "POST", "/sale/fleet/reserve", hdr("other", other, "k")); r.status != 201 {
			t.Errorf("another account during the burst: %d %s, want 201", r.status, r.body)
		}
	})
	if codes[201] != 1 {
		t.Fatalf("the burst over two servers won %d times, want 1: %v", codes[201], codes)
	}
	if len(servers) != 2 {
		t.Fatalf("%d gates wrapped, want one per server", len(servers))
	}
	for i, s := range servers {
		if p := s.mine.peak.Load(); p > 1 {
			t.Errorf("server %d had %d of the account's reserves in flight at once, want at most 1", i, p)
		}
	}
	t.Logf("peaks: all %d, servers %d %d", all.peak.Load(), servers[0].mine.peak.Load(), servers[1].mine.peak.Load())
	if p := all.peak.Load(); p > 2 {
		t.Errorf("%d of the account's reserves in flight over two servers, want at most 2", p)
	}
}

// doAt sends a request to srv, as harness.do does to the harness's own.
func doAt(t *testing.T, srv *httptest.Server, method, path string, headers map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body []byte
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// TestCopiedTicketIsNoWeapon: mallory holds a copy of alice's ticket (it
// traveled in a status URL). Polling it as fast as she likes, with no JWT
// or with her own, she cannot get alice held as automation, nor take her
// place: her fast polls are told 429, her own JWT is refused with alice's
// ticket, and the admission a copy collects is refused at reserve for
// anyone but alice. Alice, polling with her JWT (ticket in X-Ticket), is
// admitted and buys.
func TestCopiedTicketIsNoWeapon(t *testing.T) {
	for _, b := range []backend{backends[0], backends[1]} {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, b)
			h.createSale("tix", map[string]any{"initialStock": 5})
			tok, _ := h.ticketOf("tix", "alice")

			var stolen string
			limited := 0
			for i := range 60 { // inside one second, by both ways of sending a ticket
				path, hdr := "/sale/tix/status?token="+tok, map[string]string(nil)
				if i%2 == 1 {
					path, hdr = "/sale/tix/status", map[string]string{"X-Ticket": tok}
				}
				r := h.do("GET", path, hdr, nil)
				switch {
				case r.status == 200 && r.json(t)["state"] == "admitted":
					stolen = r.json(t)["admissionToken"].(string)
				case r.status == 429 && r.code() == "rate_limited" && r.header.Get("Retry-After") != "":
					limited++
				default:
					t.Fatalf("mallory's poll %d: %d %s", i, r.status, r.body)
				}
			}
			if limited == 0 || stolen == "" {
				t.Fatalf("%d of mallory's polls told 429, admission collected: %v", limited, stolen != "")
			}
			r := h.do("GET", "/sale/tix/status", map[string]string{"X-Ticket": tok, "Authorization": "Bearer " + h.jwt("mallory")}, nil)
			if r.status != 401 || r.code() != "invalid_token" {
				t.Fatalf("alice's ticket with mallory's JWT: %d %s, want 401 invalid_token", r.status, r.body)
			}
			if r := h.reserve("tix", "mallory", stolen, "k", nil); r.status != 403 || r.code() != "admission_invalid" {
				t.Fatalf("mallory reserving with alice's admission: %d %s, want 403 admission_invalid", r.status, r.body)
			}

			h.clock.Advance(200 * time.Millisecond) // a hold, had there been one, is in the next snapshot
			st := h.statusBy("tix", tok, "alice")
			if st["state"] != "admitted" {
				t.Fatalf("alice after mallory's polls: %v, want admitted (not held)", st)
			}
			if r := h.reserve("tix", "alice", st["admissionToken"].(string), "k", nil); r.status != 201 {
				t.Fatalf("alice reserves: %d %s", r.status, r.body)
			}
			if v := h.sale("tix"); v.HeldAsAutomation != 0 {
				t.Fatalf("held as automation: %v, want no one", v.HeldAsAutomation)
			}
		})
	}
}

// TestCopiedTicketFailsNoChallengeForItsOwner: wrong answers to the proof
// of work sent with a copy of alice's ticket (no JWT) are told
// challenge_failed, then 429, and never hold alice; her own answer, with
// her JWT, admits her.
func TestCopiedTicketFailsNoChallengeForItsOwner(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("pow", map[string]any{"initialStock": 5, "challengeBits": 8})
	tok, _ := h.ticketOf("pow", "alice")
	c := h.statusBy("pow", tok, "alice")["challenge"].(map[string]any)
	salt, bits := c["salt"].(string), int(c["difficultyBits"].(float64))
	wrong := "7"
	for challenge.LeadingZeroBits(salt, wrong) >= bits {
		wrong += "7"
	}
	codes := map[string]int{}
	for range 30 {
		r := h.do("POST", "/sale/pow/admission", nil, map[string]string{"token": tok, "salt": salt, "nonce": wrong})
		codes[r.code()]++
	}
	if codes["challenge_failed"] != 20 || codes["rate_limited"] != 10 {
		t.Fatalf("thirty wrong answers with a copy: %v, want 20 challenge_failed then 429s", codes)
	}
	h.clock.Advance(200 * time.Millisecond)
	if st := h.statusBy("pow", tok, "alice"); st["state"] != "challenge" {
		t.Fatalf("alice after the copy's wrong answers: %v, want her challenge (not held)", st)
	}
	r := h.do("POST", "/sale/pow/admission", map[string]string{"Authorization": "Bearer " + h.jwt("alice")},
		map[string]string{"token": tok, "salt": salt, "nonce": challenge.Solve(salt, bits)})
	if r.status != 200 {
		t.Fatalf("alice's own answer: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/sale/pow/admission", map[string]string{"Authorization": "Bearer " + h.jwt("mallory")},
		map[string]string{"token": tok, "salt": salt, "nonce": wrong}); r.status != 401 || r.code() != "invalid_token" {
		t.Fatalf("alice's ticket with mallory's JWT: %d %s, want 401 invalid_token", r.status, r.body)
	}
	if v := h.sale("pow"); v.HeldAsAutomation != 0 {
		t.Fatalf("held as automation: %v, want no one", v.HeldAsAutomation)
	}
}

// TestEdgeTakesTheTicketInAHeader: an edge answers a poll whose ticket is
// in X-Ticket, binds it to the shopper's JWT as the origin does, and tells
// a copy's fast polls 429 without holding anyone.
func TestEdgeTakesTheTicketInAHeader(t *testing.T) {
	h := newHarness(t, backends[1], func(c *engine.Config) { c.AdminToken = "edge-secret" })
	admin := map[string]string{"Authorization": "Bearer edge-secret"}
	if r := h.do("POST", "/admin/sales", admin, map[string]any{"sku": "kicks", "initialStock": 2,
		"opensAt": start.Format(time.RFC3339)}); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	edge, err := engine.Open(context.Background(), engine.Config{
		Role: "edge", RedisURL: testenv.RedisURL(), RedisPrefix: h.prefix, OriginURL: h.srv.URL,
		OriginToken: "edge-secret", EdgeID: "edge-1", TokenKeys: tokenKeysOf(t, h), Now: h.clock.Now,
		DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Close()
	esrv := httptest.NewServer(edge.Handler)
	defer esrv.Close()
	if err := edge.Edge.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := doAt(t, esrv, "GET", "/sale/kicks/ticket", map[string]string{"Authorization": "Bearer " + h.jwt("ann")})
	if r.status != 200 {
		t.Fatalf("ticket at the edge: %d %s", r.status, r.body)
	}
	tok := r.json(t)["token"].(string)
	if r := doAt(t, esrv, "GET", "/sale/kicks/status", map[string]string{"X-Ticket": tok, "Authorization": "Bearer " + h.jwt("ann")}); r.status != 200 || r.json(t)["state"] != "admitted" {
		t.Fatalf("ann's poll at the edge, ticket in X-Ticket: %d %s", r.status, r.body)
	}
	if r := doAt(t, esrv, "GET", "/sale/kicks/status", map[string]string{"X-Ticket": tok, "Authorization": "Bearer " + h.jwt("mallory")}); r.code() != "invalid_token" {
		t.Fatalf("ann's ticket with mallory's JWT at the edge: %d %s", r.status, r.body)
	}
	limited := 0
	for range 40 {
		if r := doAt(t, esrv, "GET", "/sale/kicks/status", map[string]string{"X-Ticket": tok}); r.status == 429 {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("forty polls of a copy at the edge in no time: none told 429")
	}
	h.clock.Advance(time.Second)
	if err := edge.Edge.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := doAt(t, esrv, "GET", "/sale/kicks/status", map[string]string{"X-Ticket": tok, "Authorization": "Bearer " + h.jwt("ann")}); r.json(t)["state"] != "admitted" {
		t.Fatalf("ann at the edge after the copy's polls: %d %s, want admitted (not held)", r.status, r.body)
	}
}
