package page_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
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
// page's own polls.
type server struct {
	t     *testing.T
	eng   *engine.Engine
	srv   *httptest.Server
	clock *testenv.Clock
}

// newServer starts a server; wrap, if given, goes around its handler (to
// watch or hold the page's requests).
func newServer(t *testing.T, wrap ...func(http.Handler) http.Handler) *server {
	t.Helper()
	clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	eng, err := engine.Open(context.Background(), engine.Config{
		DataDir: t.TempDir(), Now: clock.Now, Demo: true, Source: "browser-test",
		GateTimeout: 5 * time.Second, // a loaded machine must not turn into 503s
	})
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
	return &server{t: t, eng: eng, srv: srv, clock: clock}
}

func (s *server) jwt(user string) string {
	s.t.Helper()
	return s.jwtAged(user, 720*time.Hour)
}

// jwtAged is a shopper JWT whose account was created age ago (its
// acct_created claim).
func (s *server) jwtAged(user string, age time.Duration) string {
	s.t.Helper()
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, age, s.clock.Now(), 24*time.Hour)
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
		"opensAt": s.clock.Now().Add(in).Format(time.RFC3339)}
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

// TestWaitingRoomInTheBrowser drives the page as shoppers on phones would,
// against a real server, through every state a sale shows them, and saves
// a screenshot of each.
func TestWaitingRoomInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newServer(t)
	b := newBrowser(t, newScreenshots(t, "room"))

	// A paced fifo sale that opens in 30 seconds: three shoppers take
	// places first, so alice is fourth.
	s.createSale("sneakers", 30*time.Second, map[string]any{"name": "Limited sneakers", "initialStock": 5,
		"admissionPerSecond": 2, "holdSeconds": 120, "perUserLimit": 2})
	for _, u := range []string{"u1", "u2", "u3"} {
		s.ticket("sneakers", u)
	}
	alice := b.open("alice", s.page("sneakers", "alice"))
	alice.waitView("scheduled")
	if got := alice.text("open-countdown"); !regexp.MustCompile(`^0:(2\d|30)$`).MatchString(got) {
		t.Errorf("countdown to the open shows %q, want about 0:30", got)
	}
	if !strings.Contains(alice.text("sale-name"), "Limited sneakers") || alice.text("who-name") != "alice" {
		t.Errorf("sale %q, shopper %q", alice.text("sale-name"), alice.text("who-name"))
	}
	if strings.Contains(alice.eval(`location.href`), "jwt=") {
		t.Error("the JWT stays in the address bar")
	}
	alice.shot("scheduled-countdown")

	// The sale opens; nobody is admitted yet, so alice waits: four ahead
	// of her including herself, with honest odds.
	s.clock.Advance(30 * time.Second)
	alice.waitView("waiting")
	if got := alice.text("position"); got != "4" {
		t.Errorf("waiting at position %q, want 4", got)
	}
	if got := alice.text("units-left"); got != "5" {
		t.Errorf("units left %q, want 5", got)
	}
	if got := alice.text("chance"); got != "likely" {
		t.Errorf("chance %q, want likely", got)
	}
	alice.shot("waiting")

	// The pacer admits the queue up to her place.
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
	alice.shot("admitted")

	// She reserves two; the hold counts down from the sale's two minutes.
	alice.do(chromedp.SetValue(chromedp.CSS("#quantity"), "2"))
	alice.click("reserve-go")
	alice.waitView("reserved")
	if got := alice.text("hold-countdown"); !regexp.MustCompile(`^(2:00|1:[0-5]\d)$`).MatchString(got) {
		t.Errorf("hold countdown %q, want about 2:00", got)
	}
	if got := alice.text("reserved-quantity"); got != "2 units are" {
		t.Errorf("reserved %q", got)
	}
	alice.shot("reserved-hold-countdown")

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
	alice.shot("confirmed")

	// Sold out while a hold is pending: not final, keep the page open.
	s.createSale("tees", 0, map[string]any{"name": "Signed tees", "initialStock": 1})
	zedTicket := s.ticket("tees", "zed")
	adm := s.must(200, "GET", "/sale/tees/status?token="+zedTicket, "", nil, nil)["admissionToken"].(string)
	res := s.must(201, "POST", "/sale/tees/reserve", "zed", map[string]string{"X-Admission-Token": adm, "Idempotency-Key": "zed-1"}, nil)
	s.clock.Advance(time.Second)
	carol := b.open("carol", s.page("tees", "carol"))
	carol.waitView("sold_out")
	if !carol.visible("soldout-pending") || carol.visible("soldout-final") {
		t.Error("sold out with a hold pending must say that units may come back")
	}
	carol.shot("sold-out-holds-pending")

	// The hold is paid: nothing can come back, and carol's page says so.
	s.must(200, "POST", "/reservations/"+res["reservationId"].(string)+"/confirm", "zed", nil, map[string]any{"paymentRef": "p"})
	s.clock.Advance(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !carol.visible("soldout-final") {
		if ctx.Err() != nil {
			t.Fatalf("carol's page never said sold out is final; it shows %q", carol.view())
		}
		time.Sleep(100 * time.Millisecond)
	}
	carol.shot("sold-out-final")

	// A paused sale: dave waits (nobody is admitted), the operator pauses,
	// his page says so and carries on by itself after the resume.
	s.createSale("caps", 0, map[string]any{"name": "Team caps", "admissionPerSecond": 1,
		"closesAt": s.clock.Now().Add(time.Hour).Format(time.RFC3339)})
	s.ticket("caps", "v1")
	dave := b.open("dave", s.page("caps", "dave"))
	dave.waitView("waiting")
	s.must(200, "POST", "/admin/sales/caps/pause", "", nil, nil)
	dave.waitView("paused")
	dave.shot("paused")
	s.must(200, "POST", "/admin/sales/caps/resume", "", nil, nil)
	dave.waitView("waiting")

	// A lottery: frank signs in as a demo shopper, registers, and has a
	// place in the draw, with the seed's commitment published.
	s.createSale("lotto", 2*time.Minute, map[string]any{"name": "Concert tickets", "initialStock": 1,
		"fairness": "lottery", "registrationClosesAt": s.clock.Now().Add(time.Minute).Format(time.RFC3339)})
	frank := b.open("frank", s.page("lotto", ""))
	frank.waitView("signin")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	for !frank.visible("demo-go") {
		if ctx2.Err() != nil {
			t.Fatal("a --demo server's page does not offer the demo sign-in")
		}
		time.Sleep(100 * time.Millisecond)
	}
	frank.do(chromedp.SetValue(chromedp.CSS("#demo-name"), "frank"))
	frank.shot("sign-in")
	frank.click("demo-go")
	frank.waitView("register")
	frank.shot("lottery-register")
	frank.click("register-go")
	frank.waitView("scheduled")
	frank.eval(`document.getElementById('policy').open = true, ''`)
	commitment := s.must(200, "GET", "/sale/lotto", "", nil, nil)["seedCommitment"].(string)
	if got := frank.text("policy-seed"); got != commitment || len(got) != 64 {
		t.Errorf("the page shows the commitment %q, the sale %q", got, commitment)
	}
	frank.shot("lottery-registered")

	// Registration closes and the draw runs; gina, who never registered,
	// is told she is not selected, with the published draw a click away.
	s.clock.Advance(time.Minute + time.Second)
	if err := s.eng.Drawer.DrawDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Second)
	gina := b.open("gina", s.page("lotto", "gina"))
	gina.waitView("not_selected")
	ctx3, cancel3 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel3()
	for !gina.visible("notselected-draw") {
		if ctx3.Err() != nil {
			t.Fatal("not selected, but no link to the published draw")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if href := gina.eval(`document.getElementById('notselected-draw').href`); !strings.HasSuffix(href, "/sale/lotto/draw") {
		t.Errorf("draw link %q", href)
	}
	s.must(200, "GET", "/sale/lotto/draw", "", nil, nil)
	gina.shot("not-selected")

	// The caps sale closes while dave still waits.
	s.clock.Advance(time.Hour)
	dave.waitView("closed")
	dave.shot("closed")
}
