package page_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/testenv"
)

// server is a real flash-sale server (the embedded default: in-process
// gate, SQLite) on the test's clock, with the demo sign-in. Its background
// services do not run: the test moves the sale along itself (warm, pace,
// draw) and advances the clock, so nothing waits on a timer but the
// page's own polls. The clock also runs on with real time, as the page's
// does: a frozen one would see every poll of an honest page arrive too
// early (no time has passed since the last) and hold it as automation.
type server struct {
	t     *testing.T
	eng   *engine.Engine
	srv   *httptest.Server
	clock *testenv.Clock
	now   func() time.Time
}

// newServer starts a server; wrap, if given, goes around its handler (to
// watch or hold the page's requests).
func newServer(t *testing.T, wrap ...func(http.Handler) http.Handler) *server {
	t.Helper()
	return newServerWith(t, nil, wrap...)
}

// newServerWith starts a server whose configuration tweak changes (nil:
// none): a shop's server is not a --demo one.
func newServerWith(t *testing.T, tweak func(*engine.Config), wrap ...func(http.Handler) http.Handler) *server {
	t.Helper()
	clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	start := time.Now()
	now := func() time.Time { return clock.Now().Add(time.Since(start)) }
	cfg := engine.Config{
		DataDir: t.TempDir(), Now: now, Demo: true, Source: "browser-test",
		GateTimeout: 5 * time.Second, // a loaded machine must not turn into 503s
		PageDir:     "testdata/shop", // the shop's logo
	}
	if tweak != nil {
		tweak(&cfg)
	}
	eng, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := eng.Handler
	for _, w := range wrap {
		h = w(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		eng.Close()
	})
	return &server{t: t, eng: eng, srv: srv, clock: clock, now: now}
}

func (s *server) jwt(user string) string {
	s.t.Helper()
	return s.jwtAged(user, 720*time.Hour)
}

// jwtAged is a shopper JWT whose account was created age ago (its
// acct_created claim).
func (s *server) jwtAged(user string, age time.Duration) string {
	s.t.Helper()
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, age, s.now(), 24*time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// call sends a request as a shopper (user != "") or an operator (the admin
// routes answer on loopback) and decodes the JSON answer.
func (s *server) call(method, path, user string, hdr map[string]string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+s.jwt(user))
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func (s *server) must(want int, method, path, user string, hdr map[string]string, body any) map[string]any {
	s.t.Helper()
	code, m := s.call(method, path, user, hdr, body)
	if code != want {
		s.t.Fatalf("%s %s: %d %v, want %d", method, path, code, m, want)
	}
	return m
}

// createSale creates a sale opening `in` from now on the server's clock.
func (s *server) createSale(sku string, in time.Duration, fields map[string]any) {
	s.t.Helper()
	body := map[string]any{"sku": sku, "name": "Test " + sku, "initialStock": 5,
		"opensAt": s.now().Add(in).Format(time.RFC3339)}
	for k, v := range fields {
		body[k] = v
	}
	s.must(201, "POST", "/admin/sales", "", nil, body)
	// Load the counter, as the warmer does before the open.
	if err := s.eng.Warmer.WarmOnce(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// ticket takes a place for user through the API.
func (s *server) ticket(sku, user string) string {
	s.t.Helper()
	return s.must(200, "GET", "/sale/"+sku+"/ticket", user, nil, nil)["token"].(string)
}

// page is the address of the sale's waiting room, signed in as user.
func (s *server) page(sku, user string) string {
	u := s.srv.URL + "/sale/" + sku + "/"
	if user != "" {
		u += "#jwt=" + s.jwt(user)
	}
	return u
}

// tick moves the clock on a second and lets the pacer admit: the next
// snapshot (they live 100ms of the server's clock) shows the new state.
func (s *server) tick() {
	s.t.Helper()
	s.clock.Advance(time.Second)
	if err := s.eng.Pacer.TickOnce(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

func (s *server) admittedUpTo(sku string) int64 {
	s.t.Helper()
	v := s.must(200, "GET", "/admin/sales/"+sku, "", nil, nil)
	n, _ := v["admittedUpTo"].(float64)
	return int64(n)
}

// failures records the requests a server answered with an error, so that
// a test can say a normal load makes none.
type failures struct {
	mu  sync.Mutex
	log []string
}

func (f *failures) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &capture{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(cw, r)
		if cw.status >= 400 || r.URL.Path == "/favicon.ico" {
			f.mu.Lock()
			f.log = append(f.log, fmt.Sprintf("%s %s: %d", r.Method, r.URL.Path, cw.status))
			f.mu.Unlock()
		}
	})
}

func (f *failures) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	f.log = nil
	return out
}

// kicks is a shop's display: its product, price, brand and links.
func kicks(s *server) map[string]any {
	return map[string]any{
		"title":       "KickLab Runner 2 — “Signal Red”",
		"description": "Hand-finished suede and a recycled sole.\nOne pair per shopper; ships within a week.",
		"imageUrl":    s.srv.URL + "/assets/demo/sneaker.svg",
		"priceText":   "€ 189",
		"shopUrl":     "https://kicklab.example.com/drops",
		"brandColor":  "#c8102e",
		"logoUrl":     s.srv.URL + "/assets/logo.svg",
	}
}

// TestWaitingRoomInTheBrowser drives the page as shoppers on phones would,
// against a real server, through every state a sale shows them, and sees
// each: screenshots at two widths, light and dark, in two languages, and
// axe-core's check (capture).
func TestWaitingRoomInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	var failed failures
	s := newServer(t, failed.wrap)
	b := newBrowser(t, newScreenshots(t, "room"))

	// A paced fifo sale, the shop's own, that opens in two minutes: three
	// shoppers take places first, so alice is fourth.
	s.createSale("sneakers", 2*time.Minute, map[string]any{"name": "Limited sneakers", "initialStock": 5,
		"admissionPerSecond": 2, "holdSeconds": 120, "perUserLimit": 2, "display": kicks(s)})
	for _, u := range []string{"u1", "u2", "u3"} {
		s.ticket("sneakers", u)
	}
	alice := b.open("alice", s.page("sneakers", "alice"))
	alice.waitView("scheduled")
	alice.waitTrue(`document.getElementById('scheduled-place').textContent === '4'`, "her place before the open")
	if got := alice.text("open-countdown"); !regexp.MustCompile(`^(2:00|1:[0-5]\d)$`).MatchString(got) {
		t.Errorf("countdown to the open shows %q, want about 2:00", got)
	}
	if got := alice.text("sale-name"); got != "KickLab Runner 2 — “Signal Red”" {
		t.Errorf("the product's title shows %q", got)
	}
	if got := alice.text("price"); got != "€ 189" {
		t.Errorf("the price shows %q", got)
	}
	if got := alice.text("who-text"); got != "Signed in as alice" {
		t.Errorf("the shopper shows %q", got)
	}
	if got := alice.eval(`getComputedStyle(document.querySelector('button, .button.primary') && document.documentElement).getPropertyValue('--brand').trim()`); got != "#c8102e" {
		t.Errorf("the brand colour is %q", got)
	}
	if strings.Contains(alice.eval(`location.href`), "jwt=") {
		t.Error("the JWT stays in the address bar")
	}
	if got := alice.eval(`document.title`); !strings.HasPrefix(got, "Opens in 1:") && !strings.HasPrefix(got, "Opens in 2:") {
		t.Errorf("the tab's title before the open: %q", got)
	}
	// A normal load fails no request (no probe, no missing icon).
	if f := failed.take(); len(f) > 0 {
		t.Errorf("a normal load of the page made failing requests: %v", f)
	}
	alice.capture("scheduled")

	// The sale opens; nobody is admitted yet, so alice waits: four ahead
	// of her including herself, with honest odds.
	s.clock.Advance(2 * time.Minute)
	if err := s.eng.Warmer.WarmOnce(context.Background()); err != nil { // the counter, as the warmer loads it
		t.Fatal(err)
	}
	alice.waitView("waiting")
	if got := alice.text("position"); got != "4" {
		t.Errorf("waiting at position %q, want 4", got)
	}
	if got := alice.text("units-left"); got != "5" {
		t.Errorf("units left %q, want 5", got)
	}
	if got := alice.text("chance"); got != "Good" {
		t.Errorf("chance %q, want Good", got)
	}
	alice.waitTrue(`document.getElementById('announce').textContent.startsWith('You are number 4 in line')`, "the live region to say her place")
	alice.capture("waiting")

	// She asks to be told when her turn comes.
	alice.click("alerts-go")
	alice.waitTrue(`!document.getElementById('alerts-note').hidden`, "the alerts to be on")

	// The pacer admits the queue up to her place: focus moves to the
	// action, the tab's title and the live region say so.
	for i := 0; s.admittedUpTo("sneakers") < 4; i++ {
		if i > 20 {
			t.Fatalf("the pacer admitted only up to %d", s.admittedUpTo("sneakers"))
		}
		s.tick()
	}
	alice.waitView("admitted")
	if !alice.visible("quantity") {
		t.Error("a sale with a limit of 2 offers no quantity")
	}
	alice.waitTrue(`document.activeElement && document.activeElement.id === 'reserve-go'`, "focus on Reserve")
	alice.waitTrue(`/^Your turn — [12]:\d\d left$/.test(document.title)`, "the title to say it is her turn")
	alice.waitTrue(`document.getElementById('alert').textContent.startsWith("It's your turn")`, "the alert to say it is her turn")
	alice.capture("admitted")

	// She reserves two; the hold counts down from the sale's two minutes.
	alice.do(chromedp.SetValue(chromedp.CSS("#quantity"), "2"))
	alice.click("reserve-go")
	alice.waitView("reserved")
	if got := alice.text("hold-countdown"); !regexp.MustCompile(`^(2:00|1:[0-5]\d)$`).MatchString(got) {
		t.Errorf("hold countdown %q, want about 2:00", got)
	}
	if got := alice.text("reserved-quantity"); got != "2 units are held for you." {
		t.Errorf("reserved %q", got)
	}
	alice.capture("reserved")

	alice.click("pay-go")
	alice.waitView("confirmed")
	orderID := alice.text("order-id")
	if !strings.HasPrefix(orderID, "ord_") {
		t.Errorf("order id %q", orderID)
	}
	orders := s.must(200, "GET", "/admin/orders?sku=sneakers", "", nil, nil)["orders"].([]any)
	if len(orders) != 1 || orders[0].(map[string]any)["orderId"] != orderID || orders[0].(map[string]any)["quantity"] != 2.0 {
		t.Errorf("orders %v, want alice's %s of 2", orders, orderID)
	}
	if href := alice.eval(`document.querySelector('section[data-view=confirmed] a.shop-link').href`); href != "https://kicklab.example.com/drops" {
		t.Errorf("the confirmed screen links back to %q", href)
	}
	alice.capture("confirmed")

	// Sold out while a hold is pending: not final, keep the page open.
	s.createSale("tees", 0, map[string]any{"name": "Signed tees", "initialStock": 1, "display": kicks(s)})
	zedTicket := s.ticket("tees", "zed")
	adm := s.must(200, "GET", "/sale/tees/status?token="+zedTicket, "", nil, nil)["admissionToken"].(string)
	res := s.must(201, "POST", "/sale/tees/reserve", "zed", map[string]string{"X-Admission-Token": adm, "Idempotency-Key": "zed-1"}, nil)
	s.clock.Advance(time.Second)
	carol := b.open("carol", s.page("tees", "carol"))
	carol.waitView("sold_out")
	if !carol.visible("soldout-pending") || carol.visible("soldout-final") {
		t.Error("sold out with a hold pending must say that units may come back")
	}
	carol.capture("sold-out-holds-pending")

	// The hold is paid: nothing can come back, and carol's page says so,
	// with the way back to the shop.
	s.must(200, "POST", "/reservations/"+res["reservationId"].(string)+"/confirm", "zed", nil, map[string]any{"paymentRef": "p"})
	s.clock.Advance(time.Second)
	carol.waitTrue(`!document.getElementById('soldout-final').hidden`, "sold out to be final")
	if !carol.visible("soldout-final") || carol.text("soldout-title") != "Sold out" {
		t.Error("the final sold-out screen is not shown")
	}
	carol.capture("sold-out-final")

	// A paused sale: dave waits (nobody is admitted), the operator pauses,
	// his page says so and carries on by itself after the resume.
	s.createSale("caps", 0, map[string]any{"name": "Team caps", "admissionPerSecond": 1,
		"closesAt": s.now().Add(time.Hour).Format(time.RFC3339)})
	s.ticket("caps", "v1")
	dave := b.open("dave", s.page("caps", "dave"))
	dave.waitView("waiting")
	s.must(200, "POST", "/admin/sales/caps/pause", "", nil, nil)
	dave.waitView("paused")
	dave.capture("paused")
	s.must(200, "POST", "/admin/sales/caps/resume", "", nil, nil)
	dave.waitView("waiting")

	// A lottery: frank signs in as a demo shopper, registers, and has a
	// place in the draw, with the seed's commitment published.
	s.createSale("lotto", 10*time.Minute, map[string]any{"name": "Concert tickets", "initialStock": 1,
		"fairness": "lottery", "registrationClosesAt": s.now().Add(5 * time.Minute).Format(time.RFC3339)})
	frank := b.open("frank", s.page("lotto", ""))
	frank.waitView("signin")
	if !frank.visible("demo-go") || !frank.visible("jwt-go") {
		t.Fatal("a --demo server's page does not offer the demo sign-in and the token")
	}
	frank.do(chromedp.SetValue(chromedp.CSS("#demo-name"), "frank"))
	frank.capture("sign-in-demo")
	frank.click("demo-go")
	frank.waitView("register")
	frank.capture("lottery-register")
	frank.click("register-go")
	frank.waitView("scheduled")
	frank.eval(`document.getElementById('policy').open = true, ''`)
	commitment := s.must(200, "GET", "/sale/lotto", "", nil, nil)["seedCommitment"].(string)
	if got := frank.text("policy-seed"); got != commitment || len(got) != 64 {
		t.Errorf("the page shows the commitment %q, the sale %q", got, commitment)
	}
	frank.capture("lottery-registered")

	// Registration closes and the draw runs; gina, who never registered,
	// is told she is not selected, with the published draw a click away.
	s.clock.Advance(5*time.Minute + time.Second)
	if err := s.eng.Drawer.DrawDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Second)
	gina := b.open("gina", s.page("lotto", "gina"))
	gina.waitView("not_selected")
	gina.waitTrue(`!document.getElementById('notselected-draw').hidden`, "the link to the published draw")
	if href := gina.eval(`document.getElementById('notselected-draw').href`); !strings.HasSuffix(href, "/sale/lotto/draw") {
		t.Errorf("draw link %q", href)
	}
	s.must(200, "GET", "/sale/lotto/draw", "", nil, nil)
	gina.capture("not-selected")

	// The caps sale closes while dave still waits.
	s.clock.Advance(time.Hour)
	dave.waitView("closed")
	dave.capture("closed")

	// An address that names no sale.
	nobody := b.open("nobody", s.srv.URL+"/sale/no-such-sale/")
	nobody.waitView("error")
	if got := nobody.text("error-text"); !strings.Contains(got, "There is no sale here") {
		t.Errorf("no sale: %q", got)
	}
	nobody.capture("error-no-sale")
}

// busy makes a server answer the waiting room's polls 503 while on.
type busy struct{ on atomic.Bool }

func (b *busy) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.on.Load() && strings.HasSuffix(r.URL.Path, "/status") {
			w.Header().Set("Retry-After", "2")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"come back shortly"}}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TestAShopsPageInTheBrowser: the page as a shop's shoppers see it, on a
// server that is not a --demo one: no developer hints, the shop's sign-in
// and checkout, and the states the main test does not reach (busy, the
// proof of work, a hold released, a hold run out), each seen (capture).
func TestAShopsPageInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	rec := newRecorder(t)
	var unavailable busy
	s := newServerWith(t, func(c *engine.Config) { c.Demo = false }, unavailable.wrap, rec.wrap)
	b := newBrowser(t, newScreenshots(t, "shop"))
	s.createSale("kicks", 0, map[string]any{"name": "Kicks", "initialStock": 5, "holdSeconds": 120, "display": kicks(s)})

	// Not signed in: the shop's sign-in, and not a word for developers.
	anon := b.open("anon", s.page("kicks", ""))
	anon.waitView("signin")
	if anon.eval(`String(!!(document.getElementById('token-signin') || document.getElementById('demo-signin')))`) != "false" ||
		anon.eval(`String(document.body.innerText.includes('go run'))`) != "false" {
		t.Error("a shop's page shows developer hints")
	}
	if !anon.visible("signin-shop") || anon.eval(`document.getElementById('signin-shop').href`) != "https://kicklab.example.com/drops" {
		t.Error("the sign-in does not send the shopper to the shop")
	}
	anon.capture("sign-in")

	// The waiting room is busy: come back shortly, and it carries on.
	unavailable.on.Store(true)
	ann := b.open("ann", s.page("kicks", "ann"))
	ann.waitView("unavailable")
	ann.capture("unavailable")
	unavailable.on.Store(false)
	ann.waitView("admitted")

	// Reserved at a shop: the checkout is the shop's, with the hold's id.
	ann.click("reserve-go")
	ann.waitView("reserved")
	if ann.eval(`String(!!document.getElementById('pay-go'))`) != "false" {
		t.Error("a shop's page offers the demo's payment")
	}
	if href := ann.eval(`document.getElementById('checkout-go').href`); !strings.HasPrefix(href, "https://kicklab.example.com/drops?reservation=res_") {
		t.Errorf("the checkout goes to %q", href)
	}
	ann.capture("reserved-checkout")

	// She releases it (two taps): the unit goes back.
	ann.click("cancel-go")
	if got := ann.text("cancel-go"); got != "Tap again to release it" {
		t.Errorf("the first tap says %q", got)
	}
	ann.click("cancel-go")
	ann.waitView("cancelled")
	ann.capture("cancelled")

	// A hold that runs out.
	s.createSale("brief", 0, map[string]any{"name": "Brief holds", "initialStock": 5, "holdSeconds": 2, "display": kicks(s)})
	bo := b.open("bo", s.page("brief", "bo"))
	bo.waitView("admitted")
	bo.click("reserve-go")
	bo.waitView("reserved")
	s.clock.Advance(3 * time.Second)
	bo.waitView("expired")
	bo.capture("expired")

	// The proof of work: its request waits at the recorder, so that the
	// page is seen solving.
	s.createSale("pow", 0, map[string]any{"name": "Checked sale", "initialStock": 5, "challengeBits": 8, "display": kicks(s)})
	cyJWT := s.jwtAged("cy", oldAccount)
	h := rec.hold(cyJWT)
	cy := b.open("cy", s.srv.URL+"/sale/pow/#jwt="+cyJWT)
	rec.waitHeld(h, cy)
	cy.waitView("challenge")
	cy.capture("challenge")
	rec.unhold(cyJWT)
	cy.waitView("admitted")
}

// TestWaitAtTheOpenInTheBrowser: a sale created an hour before its open
// and polled by its crowd all along; half a second after the open (and
// as long as the first poll takes), the shopper at place p of a sale
// admitting r a second is told a wait of the order of p/r, not the hours
// a rate measured while nothing could be admitted once promised.
func TestWaitAtTheOpenInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	const (
		rate  = 5
		ahead = 600
	)
	s := newServer(t)
	b := newBrowser(t, newScreenshots(t, "open"))
	opens := s.now().Add(time.Hour).Truncate(time.Second)
	s.createSale("drop", time.Hour, map[string]any{"initialStock": 1000, "admissionPerSecond": rate,
		"opensAt": opens.Format(time.RFC3339), "display": kicks(s)})
	toks := make([]string, ahead)
	for i := range toks {
		toks[i] = s.ticket("drop", fmt.Sprintf("u%d", i))
	}
	// The crowd polls through the hour, and every few seconds as the
	// open nears.
	for s.now().Before(opens.Add(-2 * time.Minute)) {
		s.must(200, "GET", "/sale/drop/status?token="+toks[0], "", nil, nil)
		s.clock.Advance(time.Minute)
	}
	for s.now().Before(opens.Add(-10 * time.Second)) {
		s.must(200, "GET", "/sale/drop/status?token="+toks[0], "", nil, nil)
		s.clock.Advance(2 * time.Second)
	}
	s.clock.Advance(opens.Add(-30 * time.Second).Sub(s.now()))
	zoe := b.open("zoe", s.page("drop", "zoe"))
	zoe.waitView("scheduled")
	zoe.waitTrue(fmt.Sprintf(`document.getElementById('scheduled-place').textContent === '%d'`, ahead+1), "her place before the open")
	if err := s.eng.Warmer.WarmOnce(context.Background()); err != nil { // the counter, loaded before the open
		t.Fatal(err)
	}

	// The sale opens; the pacer ticks twice (its loop's 250ms), and zoe's
	// page asks at once (a reload: its place is kept).
	s.clock.Advance(opens.Sub(s.now()))
	for range 2 {
		if err := s.eng.Pacer.TickOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.clock.Advance(250 * time.Millisecond)
	}
	zoe.do(chromedp.Reload())
	zoe.waitView("waiting")
	wait := zoe.text("wait")
	// p/r is 120 s; the page says minutes, rounded up, a quarter on the
	// safe side: about 2 or 3 minutes.
	if !regexp.MustCompile(`^about [23] minutes$`).MatchString(wait) {
		t.Errorf("place %d of a sale admitting %d a second is told %q, want about 2 or 3 minutes", ahead+1, rate, wait)
	}
	zoe.shot("waiting-at-the-open")
}
