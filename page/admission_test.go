package page_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/challenge"
)

// The proof of work against the real server: a sale with challengeBits,
// the engine's own waiting room, difficulty and salts. A recorder between
// the page and the engine keeps every exchange, so a test can say what the
// page was asked and what it sent, and can hold a page's admission request
// while the sale changes under it, so that the engine's answer is the one
// it gives to a page that solved too late.

// exchange is one request the page made and the engine's answer.
type exchange struct {
	start, done time.Time
	method      string
	path        string
	auth        string // the Authorization header
	token       string // the ticket: the status's query, the admission's body
	body        map[string]string
	status      int
	answer      map[string]any
}

func (e exchange) code() string {
	if m, ok := e.answer["error"].(map[string]any); ok {
		s, _ := m["code"].(string)
		return s
	}
	return ""
}

// challenge is the challenge a status answer carries: its salt and bits.
func (e exchange) challenge() (string, int) {
	c, ok := e.answer["challenge"].(map[string]any)
	if !ok {
		return "", 0
	}
	salt, _ := c["salt"].(string)
	bits, _ := c["difficultyBits"].(float64)
	return salt, int(bits)
}

// recorder watches the page's requests to the engine.
type recorder struct {
	t    *testing.T
	next http.Handler

	mu    sync.Mutex
	log   []exchange
	holds map[string]*held // a shopper's JWT -> the hold on its admission requests
}

// held is a hold on a shopper's admission requests: they wait until
// released.
type held struct {
	arrived chan struct{} // closed when the first one waits
	once    sync.Once
	release chan struct{}
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, holds: map[string]*held{}}
}

func (rec *recorder) wrap(next http.Handler) http.Handler {
	rec.next = next
	return rec
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/sale/") || strings.Contains(r.URL.Path, "/assets/") {
		rec.next.ServeHTTP(w, r)
		return
	}
	e := exchange{start: time.Now(), method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"),
		token: r.URL.Query().Get("token")}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/admission") {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		_ = json.Unmarshal(raw, &e.body)
		e.token = e.body["token"]
		rec.mu.Lock()
		h := rec.holds[strings.TrimPrefix(e.auth, "Bearer ")]
		rec.mu.Unlock()
		if h != nil {
			h.once.Do(func() { close(h.arrived) })
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
	}
	cw := &capture{ResponseWriter: w, status: http.StatusOK}
	rec.next.ServeHTTP(cw, r)
	e.done, e.status = time.Now(), cw.status
	_ = json.Unmarshal(cw.body.Bytes(), &e.answer)
	rec.mu.Lock()
	rec.log = append(rec.log, e)
	rec.mu.Unlock()
}

// capture keeps a copy of an answer.
type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(status int) {
	c.status = status
	c.ResponseWriter.WriteHeader(status)
}

func (c *capture) Write(b []byte) (int, error) {
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

// hold makes the admission requests of the shopper with the JWT wait
// until unhold.
func (rec *recorder) hold(jwt string) *held {
	h := &held{arrived: make(chan struct{}), release: make(chan struct{})}
	rec.mu.Lock()
	rec.holds[jwt] = h
	rec.mu.Unlock()
	return h
}

// waitHeld waits, with a deadline, for a page's admission request to
// arrive at the hold.
func (rec *recorder) waitHeld(h *held, tb *tab) {
	rec.t.Helper()
	select {
	case <-h.arrived:
	case <-time.After(30 * time.Second):
		rec.t.Fatalf("no admission request from %s; the page shows %q", tb.name, tb.view())
	}
}

// unhold lets the held requests (and any later ones) through.
func (rec *recorder) unhold(jwt string) {
	rec.mu.Lock()
	h := rec.holds[jwt]
	delete(rec.holds, jwt)
	rec.mu.Unlock()
	if h != nil {
		close(h.release)
	}
}

// exchanges returns the exchanges of the shopper with the JWT: its ticket
// requests (by the JWT), and its status polls and admission requests (by
// the tickets it was given).
func (rec *recorder) exchanges(jwt string) []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	tickets := map[string]bool{}
	var out []exchange
	for _, e := range rec.log {
		if e.auth == "Bearer "+jwt && strings.HasSuffix(e.path, "/ticket") {
			if tok, ok := e.answer["token"].(string); ok {
				tickets[tok] = true
			}
		}
		if e.auth == "Bearer "+jwt || (e.token != "" && tickets[e.token]) {
			out = append(out, e)
		}
	}
	return out
}

// of filters exchanges to those of one route (a suffix of the path) and
// method.
func of(log []exchange, method, route string) []exchange {
	var out []exchange
	for _, e := range log {
		if e.method == method && strings.HasSuffix(e.path, route) {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits, with a deadline, until cond holds for the shopper's
// exchanges.
func (rec *recorder) waitFor(jwt, what string, cond func([]exchange) bool) []exchange {
	rec.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		log := rec.exchanges(jwt)
		if cond(log) {
			return log
		}
		if ctx.Err() != nil {
			rec.t.Fatalf("waited in vain for %s; the exchanges: %s", what, describe(log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describe(log []exchange) string {
	var b strings.Builder
	for _, e := range log {
		salt, bits := e.challenge()
		b.WriteString("\n  " + e.method + " " + e.path + " " + http.StatusText(e.status) + " " + e.code())
		if salt != "" {
			b.WriteString(" challenge " + salt + " bits " + strconv.Itoa(bits))
		}
		if e.body != nil {
			b.WriteString(" salt " + e.body["salt"] + " nonce " + e.body["nonce"])
		}
	}
	return b.String()
}

const (
	oldAccount   = 2 * 365 * 24 * time.Hour // −2 bits
	youngAccount = 24 * time.Hour           // +4 bits
)

// TestChallengeWithTheRealServer: against the engine, a sale with
// challengeBits 8 asks a two-year-old account for 6 bits and a day-old one
// for 12; each page solves its challenge in its worker, trades the
// solution at POST /sale/{sku}/admission for an admission, and the old
// account's page reserves and pays with it.
func TestChallengeWithTheRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	rec := newRecorder(t)
	s := newServer(t, rec.wrap)
	b := newBrowser(t, newScreenshots(t, "pow-real"))
	s.createSale("pow", 0, map[string]any{"name": "Proof-of-work sale", "initialStock": 5, "challengeBits": 8})

	// Olga's account is two years old. Her admission request waits at the
	// recorder, so that the page is seen in the challenge state.
	olgaJWT := s.jwtAged("olga", oldAccount)
	h := rec.hold(olgaJWT)
	olga := b.open("olga", s.srv.URL+"/sale/pow/#jwt="+olgaJWT)
	rec.waitHeld(h, olga)
	olga.waitView("challenge")
	olga.waitTrue(`(e => e.offsetWidth === e.parentElement.clientWidth)(document.getElementById('pow-progress'))`,
		"the progress bar to fill")
	olga.shot("challenge-solved-checking")
	rec.unhold(olgaJWT)
	olga.waitView("admitted")
	olga.shot("admitted-after-challenge")
	oldBits := checkSolved(t, "olga", rec.exchanges(olgaJWT))
	if oldBits != 6 {
		t.Errorf("a two-year-old account was asked %d bits, want 6 (8 less 2)", oldBits)
	}

	olga.click("reserve-go")
	olga.waitView("reserved")
	if res := of(rec.exchanges(olgaJWT), "POST", "/reserve"); len(res) != 1 || res[0].status != http.StatusCreated {
		t.Errorf("reserve with the earned admission: %s", describe(res))
	}
	olga.click("pay-go")
	olga.waitView("confirmed")
	olga.shot("confirmed-after-challenge")
	orders := s.must(200, "GET", "/admin/orders?sku=pow", "", nil, nil)["orders"].([]any)
	if len(orders) != 1 || orders[0].(map[string]any)["orderId"] != olga.text("order-id") {
		t.Errorf("orders %v, want olga's %s", orders, olga.text("order-id"))
	}

	// Yuri's account is a day old: the same sale asks him more.
	yuriJWT := s.jwtAged("yuri", youngAccount)
	yuri := b.open("yuri", s.srv.URL+"/sale/pow/#jwt="+yuriJWT)
	yuri.waitView("admitted")
	youngBits := checkSolved(t, "yuri", rec.exchanges(yuriJWT))
	if youngBits != 12 || youngBits <= oldBits {
		t.Errorf("a day-old account was asked %d bits (a two-year-old one %d), want 12 (8 and 4)", youngBits, oldBits)
	}
	yuri.shot("admitted-young-account")
}

// checkSolved checks a page's way through the challenge: its status poll
// answered a challenge, it sent that salt with a nonce that solves it, and
// the engine answered an admission. It returns the bits asked.
func checkSolved(t *testing.T, who string, log []exchange) int {
	t.Helper()
	var salt string
	var bits int
	for _, st := range of(log, "GET", "/status") {
		if s, b := st.challenge(); s != "" {
			salt, bits = s, b
		}
	}
	adm := of(log, "POST", "/admission")
	if salt == "" || len(adm) != 1 {
		t.Fatalf("%s: want a challenge and one admission request: %s", who, describe(log))
	}
	a := adm[0]
	if a.body["salt"] != salt || challenge.LeadingZeroBits(salt, a.body["nonce"]) < bits {
		t.Errorf("%s sent salt %q nonce %q for the challenge %q of %d bits", who, a.body["salt"], a.body["nonce"], salt, bits)
	}
	if tok, _ := a.answer["admissionToken"].(string); a.status != http.StatusOK || tok == "" {
		t.Errorf("%s's admission: %d %v", who, a.status, a.answer)
	}
	return bits
}

// TestChallengeFailedThenFresh: a page reloaded after its admission is
// admitted again at once, with no second proof of work (the shopper solved
// this minute's salt; the engine never hands out a spent salt); a salt that
// expired while the page solved it is answered challenge_failed, and the
// page goes back to polling, at the pace the waiting room asks, and is
// admitted with the next fresh salt.
func TestChallengeFailedThenFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	rec := newRecorder(t)
	s := newServer(t, rec.wrap)
	b := newBrowser(t, newScreenshots(t, "pow-retry"))
	s.createSale("pow", 0, map[string]any{"name": "Proof-of-work sale", "initialStock": 5, "challengeBits": 8})

	jwt := s.jwtAged("olga", oldAccount)
	olga := b.open("olga", s.srv.URL+"/sale/pow/#jwt="+jwt)
	olga.waitView("admitted")
	first := of(rec.exchanges(jwt), "POST", "/admission")
	if len(first) != 1 || first[0].status != http.StatusOK {
		t.Fatalf("the first admission: %s", describe(first))
	}
	spent := first[0].body["salt"]

	// A reload forgets the admission; the status admits her again.
	polled := len(of(rec.exchanges(jwt), "GET", "/status"))
	olga.do(chromedp.Reload())
	log := rec.waitFor(jwt, "a status answered admitted after the reload", func(log []exchange) bool {
		polls := of(log, "GET", "/status")
		return len(polls) > polled && polls[len(polls)-1].answer["state"] == "admitted"
	})
	if adm := of(log, "POST", "/admission"); len(adm) != 1 {
		t.Fatalf("after the reload, want no second proof of work: %s", describe(adm))
	}
	olga.waitView("admitted")
	olga.shot("admitted-again-after-a-reload")

	// A minute on, a reload is handed a fresh salt, which the page solves.
	// The test holds its admission request, and moves the clock past the
	// salt's expiry before the engine sees it.
	s.clock.Advance(time.Minute)
	h := rec.hold(jwt)
	olga.do(chromedp.Reload())
	rec.waitHeld(h, olga)
	s.clock.Advance(2 * time.Minute)
	rec.unhold(jwt)
	failedAt := 0
	log = rec.waitFor(jwt, "an admission after the expired salt", func(log []exchange) bool {
		adm := of(log, "POST", "/admission")
		for i, e := range log {
			if e.method == "POST" && e.code() == "challenge_failed" {
				failedAt = i
			}
		}
		return len(adm) >= 3 && adm[len(adm)-1].status == http.StatusOK
	})
	olga.waitView("admitted")
	olga.shot("admitted-after-a-failed-challenge")
	adm := of(log, "POST", "/admission")
	if len(adm) != 3 || adm[1].code() != "challenge_failed" || adm[1].body["salt"] == spent ||
		adm[2].body["salt"] == adm[1].body["salt"] || adm[2].body["salt"] == spent {
		t.Errorf("want the expired salt refused once, then a fresh one admitted: %s", describe(adm))
	}
	if polls := of(log[failedAt:], "GET", "/status"); len(polls) == 0 {
		t.Errorf("the page did not poll after challenge_failed: %s", describe(log[failedAt:]))
	} else if gap := polls[0].start.Sub(log[failedAt].done); gap < 950*time.Millisecond {
		t.Errorf("the page polled %v after challenge_failed, want at least a second", gap)
	}
}

// TestAdmissionRefusedByTheRealServer: a page that solved its challenge
// while the sale changed gets the engine's refusal at POST /admission, and
// does as the status then says: paused (and admitted after the resume),
// sold out (holds pending), waiting (held under the automation policy:
// not_admitted), closed. Each page's admission request is held at the
// recorder while the test changes the sale.
func TestAdmissionRefusedByTheRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	rec := newRecorder(t)
	s := newServer(t, rec.wrap)
	b := newBrowser(t, newScreenshots(t, "pow-refused"))

	// solveTooLate opens the sale's page as user, holds its admission
	// request while change runs, then lets the engine answer it; it
	// returns the page and the engine's answer.
	solveTooLate := func(sku, user string, change func()) (*tab, exchange) {
		t.Helper()
		jwt := s.jwtAged(user, oldAccount)
		h := rec.hold(jwt)
		tb := b.open(user, s.srv.URL+"/sale/"+sku+"/#jwt="+jwt)
		rec.waitHeld(h, tb)
		change()
		s.clock.Advance(time.Second) // the next snapshot shows the change
		rec.unhold(jwt)
		log := rec.waitFor(jwt, "the engine's answer to "+user+"'s admission", func(log []exchange) bool {
			return len(of(log, "POST", "/admission")) > 0
		})
		return tb, of(log, "POST", "/admission")[0]
	}
	want := func(a exchange, status int, code string) {
		t.Helper()
		if a.status != status || a.code() != code {
			t.Errorf("the engine answered %d %s, want %d %s", a.status, a.code(), status, code)
		}
	}

	// Paused while the page solved: it says so, and carries on after the
	// resume.
	s.createSale("paws", 0, map[string]any{"name": "Paused sale", "challengeBits": 8})
	pia, a := solveTooLate("paws", "pia", func() { s.must(200, "POST", "/admin/sales/paws/pause", "", nil, nil) })
	want(a, http.StatusServiceUnavailable, "sale_paused")
	pia.waitView("paused")
	pia.shot("paused-after-solving")
	s.must(200, "POST", "/admin/sales/paws/resume", "", nil, nil)
	s.clock.Advance(time.Second)
	pia.waitView("admitted")

	// Sold out while the page solved: the last unit is held by a shopper
	// who took it through the API.
	s.createSale("last", 0, map[string]any{"name": "Last unit", "initialStock": 1, "challengeBits": 8})
	sam, a := solveTooLate("last", "sam", func() { s.buyThroughTheChallenge("last", "zoe") })
	want(a, http.StatusConflict, "sold_out")
	sam.waitView("sold_out")
	if !sam.visible("soldout-pending") {
		t.Error("sold out with a hold pending must say that units may come back")
	}
	sam.shot("sold-out-after-solving")

	// Held under the automation policy while the page solved (the account
	// polled far faster than asked, elsewhere): not_admitted, and the page
	// shows the place that the status gives.
	s.createSale("held", 0, map[string]any{"name": "Held sale", "challengeBits": 8})
	hal, a := solveTooLate("held", "hal", func() {
		tok := s.ticket("held", "hal")
		for range 31 { // the room's limit is 30 polls in 10 s
			// With hal's sign-in: only the polls its owner sends can get
			// a shopper held (a copy of the ticket holds no one).
			s.must(200, "GET", "/sale/held/status", "hal", map[string]string{"X-Ticket": tok}, nil)
		}
	})
	want(a, http.StatusConflict, "not_admitted")
	hal.waitView("waiting")
	hal.shot("waiting-after-not-admitted")

	// Closed while the page solved.
	s.createSale("shut", 0, map[string]any{"name": "Closing sale", "challengeBits": 8,
		"closesAt": s.now().Add(time.Hour).Format(time.RFC3339)})
	cy, a := solveTooLate("shut", "cy", func() { s.clock.Advance(time.Hour) })
	want(a, http.StatusConflict, "closed")
	cy.waitView("closed")
	cy.shot("closed-after-solving")
}

// buyThroughTheChallenge reserves a unit for user through the API, solving
// the challenge in Go.
func (s *server) buyThroughTheChallenge(sku, user string) {
	s.t.Helper()
	tok := s.ticket(sku, user)
	st := s.must(200, "GET", "/sale/"+sku+"/status?token="+tok, "", nil, nil)
	c, ok := st["challenge"].(map[string]any)
	if !ok {
		s.t.Fatalf("%s's status: %v, want a challenge", user, st)
	}
	salt := c["salt"].(string)
	nonce := challenge.Solve(salt, int(c["difficultyBits"].(float64)))
	adm := s.must(200, "POST", "/sale/"+sku+"/admission", "", nil, map[string]string{"token": tok, "salt": salt, "nonce": nonce})
	s.must(201, "POST", "/sale/"+sku+"/reserve", user, map[string]string{
		"X-Admission-Token": adm["admissionToken"].(string), "Idempotency-Key": user + "-1"}, nil)
}
