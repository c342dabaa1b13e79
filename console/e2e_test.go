package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
)

const adminToken = "console-test-token"

// server is a real flash-sale server (the embedded default) with an admin
// token, its background services running on the real clock: the console
// is watched as an operator would watch it, a second at a time.
type server struct {
	t   *testing.T
	eng *engine.Engine
	srv *httptest.Server
}

func newServer(t *testing.T) *server {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Config{
		DataDir: t.TempDir(), AdminToken: adminToken, Source: "console-test",
		GateTimeout: 5 * time.Second, MaxInFlight: 512,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(eng.Handler)
	ctx, stop := context.WithCancel(context.Background())
	eng.Start(ctx)
	t.Cleanup(func() {
		eng.CloseStreams()
		srv.Close()
		stop()
		eng.Stop()
		eng.Close()
	})
	return &server{t: t, eng: eng, srv: srv}
}

// call sends a request and decodes the JSON answer; admin requests carry
// the token.
func (s *server) call(method, path string, hdr map[string]string, body any) (int, map[string]any) {
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
	if strings.HasPrefix(path, "/admin/") {
		req.Header.Set("Authorization", "Bearer "+adminToken)
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

func (s *server) must(want int, method, path string, hdr map[string]string, body any) map[string]any {
	s.t.Helper()
	code, m := s.call(method, path, hdr, body)
	if code != want {
		s.t.Fatalf("%s %s: %d %v, want %d", method, path, code, m, want)
	}
	return m
}

// shoppers takes shoppers through the waiting room to a paid order, one
// every `every`, until stop is closed or the sale has no units left; each
// runs in its own goroutine, as real shoppers do.
type shoppers struct {
	s       *server
	sku     string
	started atomic.Int64
	bought  atomic.Int64
	wg      sync.WaitGroup
	stop    chan struct{}
	once    sync.Once
}

func (s *server) shoppers(sku string, every time.Duration) *shoppers {
	sh := &shoppers{s: s, sku: sku, stop: make(chan struct{})}
	sh.wg.Add(1)
	go func() {
		defer sh.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-sh.stop:
				return
			case <-t.C:
			}
			n := sh.started.Add(1)
			sh.wg.Add(1)
			go func() {
				defer sh.wg.Done()
				if sh.buy(fmt.Sprintf("shopper-%d", n)) {
					sh.bought.Add(1)
				}
			}()
		}
	}()
	s.t.Cleanup(sh.halt)
	return sh
}

func (sh *shoppers) halt() {
	sh.once.Do(func() { close(sh.stop) })
	sh.wg.Wait()
}

// buy is one shopper: a ticket, polls until admitted, a reserve, a
// payment. It reports whether it bought.
func (sh *shoppers) buy(user string) bool {
	jwt, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, 720*time.Hour, time.Now(), time.Hour)
	if err != nil {
		return false
	}
	auth := map[string]string{"Authorization": "Bearer " + jwt}
	retryAfter := time.Second
	do := func(method, path string, hdr map[string]string, body any) (int, map[string]any) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, sh.s.srv.URL+path, rd)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			retryAfter = time.Duration(n) * time.Second
		}
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	code, t := do("GET", "/sale/"+sh.sku+"/ticket", auth, nil)
	if code != http.StatusOK {
		return false
	}
	ticket, _ := t["token"].(string)
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-sh.stop:
			return false
		default:
		}
		_, st := do("GET", "/sale/"+sh.sku+"/status?token="+ticket, nil, nil)
		switch st["state"] {
		case "admitted":
			adm, _ := st["admissionToken"].(string)
			code, r := do("POST", "/sale/"+sh.sku+"/reserve", map[string]string{"Authorization": "Bearer " + jwt,
				"X-Admission-Token": adm, "Idempotency-Key": "k-" + user}, nil)
			if code != http.StatusCreated {
				return false
			}
			id, _ := r["reservationId"].(string)
			code, _ = do("POST", "/reservations/"+id+"/confirm", auth, map[string]string{"paymentRef": "pay-" + user})
			return code == http.StatusOK
		case "sold_out", "closed", "not_selected":
			return false
		}
		// Back when the room asks (Retry-After), as the page does: sooner
		// would mark the shopper as automation.
		time.Sleep(retryAfter)
	}
	return false
}

// chromedpClick clicks the first element the CSS selector matches.
func chromedpClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel))
}

// TestConsoleInTheBrowser drives the console as an operator on a phone:
// sign in, the sales, one sale selling out while shoppers buy, pause and
// resume, the rate changed (and changed meanwhile by someone else), an
// order shipped; a screenshot and axe-core at every state.
func TestConsoleInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newServer(t)
	b := newBrowser(t, newScreenshots(t, "console"))

	s.must(201, "POST", "/admin/sales", nil, map[string]any{"sku": "sneakers", "name": "Limited sneakers",
		"initialStock": 60, "opensAt": time.Now().UTC().Format(time.RFC3339), "admissionPerSecond": 8,
		"perUserLimit": 1, "holdSeconds": 300})
	if err := s.eng.Warmer.WarmOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.must(201, "POST", "/admin/sales/sneakers/invites", nil, map[string]any{"count": 5})

	// Sign in: the token is asked for, a wrong one refused.
	op := b.open("phone", s.srv.URL+"/admin/", 390, 844, 2, true)
	op.waitView("signin")
	op.state("signin")
	op.fill("token", "not-the-token")
	op.click("signin-form button")
	op.waitTrue(`document.getElementById('signin-error').innerText.includes('refused')`, "a wrong token refused")
	op.fill("token", adminToken)
	op.click("signin-form button")
	op.waitView("sales")
	op.waitTrue(`document.querySelector('#sales-list a[href="#/sale/sneakers"]') !== null`, "the sale listed")
	if got := op.eval(`sessionStorage.getItem('flashsale.adminToken')`); got != adminToken {
		t.Errorf("the token is kept as %q in sessionStorage", got)
	}
	if got := op.eval(`document.cookie`); got != "" {
		t.Errorf("the console set a cookie: %q", got)
	}
	op.waitTrue(`document.getElementById('conn').dataset.state === 'live'`, "the list's feed live")
	op.state("sales")

	// One sale, live, as shoppers buy it.
	op.do(chromedpClick(`#sales-list a[href="#/sale/sneakers"]`))
	op.waitView("sale")
	op.waitTrue(`document.getElementById('f-left').innerText === '60'`, "60 units left")
	op.waitTrue(`document.getElementById('health').innerText.includes('0 of 5 redeemed')`, "the invite codes counted")
	// What the console reads out, kept as it changes.
	op.eval(`window.said = []; for (const id of ['announce', 'alarm']) new MutationObserver(() => {
		const t = document.getElementById(id).innerText; if (t) window.said.push(t) }).observe(document.getElementById(id),
		{childList: true, characterData: true, subtree: true}); ''`)
	buyers := s.shoppers("sneakers", 300*time.Millisecond)
	op.waitTrue(`Number(document.getElementById('f-left').innerText) <= 50 && Number(document.getElementById('f-left').innerText) > 20`, "the sale selling")
	op.waitTrue(`document.querySelectorAll('#c-units path.line').length === 1`, "the units chart drawn")
	op.state("selling")

	// Pause: the dialog says what it does; the state is announced.
	op.click("a-pause")
	op.waitTrue(`document.getElementById('confirm').open`, "the pause dialog")
	if txt := op.text("confirm-text"); !strings.Contains(txt, "Nothing more is sold until you resume") {
		t.Errorf("the pause dialog says %q", txt)
	}
	op.fill("confirm-reason", "checking the payment provider")
	op.screen("pause-dialog")
	op.checkA11y("pause-dialog")
	op.click("confirm-ok")
	op.waitTrue(`document.getElementById('s-state').innerText === 'Paused'`, "the sale paused")
	op.waitTrue(`window.said.some(t => t.includes('is paused'))`, "the pause announced")
	if got := op.text("s-reason"); !strings.Contains(got, "Paused by an operator") || !strings.Contains(got, "checking the payment provider") {
		t.Errorf("the pause reason shows %q", got)
	}
	paused := s.must(200, "GET", "/admin/sales/sneakers", nil, nil)
	if paused["state"] != "paused" {
		t.Fatalf("the server says %v after the console paused", paused["state"])
	}
	op.state("paused")

	// Resume.
	op.click("a-resume")
	op.waitTrue(`document.getElementById('confirm').open`, "the resume dialog")
	op.click("confirm-ok")
	op.waitTrue(`document.getElementById('s-state').innerText !== 'Paused'`, "the sale resumed")

	// The rate: saved with If-Match; then changed by someone else behind
	// the console's back, and the console says so.
	op.fill("set-rate", "12")
	op.click("settings-form button[type=submit]")
	op.waitTrue(`document.getElementById('settings-result').innerText.includes('Saved')`, "the rate saved")
	now := s.must(200, "GET", "/admin/sales/sneakers", nil, nil)
	if now["admissionPerSecond"] != 12.0 {
		t.Fatalf("admissionPerSecond %v after the console saved 12", now["admissionPerSecond"])
	}
	op.fill("set-rate", "15")
	s.must(200, "PATCH", "/admin/sales/sneakers", map[string]string{"If-Match": strconv.Itoa(int(now["version"].(float64)))},
		map[string]any{"admissionPerSecond": 9})
	op.click("settings-form button[type=submit]")
	op.waitTrue(`document.getElementById('settings-result').innerText.includes('Changed meanwhile')`, "the conflict shown")
	if got := op.text("settings-result"); !strings.Contains(got, "9 admissions a second") {
		t.Errorf("the conflict shows %q; want the new figures", got)
	}
	op.state("changed-meanwhile")
	op.click("settings-form button[type=submit]") // the operator's value, over the new version
	op.waitTrue(`document.getElementById('settings-result').innerText.includes('Saved')`, "the rate saved over the change")
	if v := s.must(200, "GET", "/admin/sales/sneakers", nil, nil)["admissionPerSecond"]; v != 15.0 {
		t.Errorf("admissionPerSecond %v, want the operator's 15", v)
	}

	// Sold out.
	op.waitTrue(`document.getElementById('s-state').innerText === 'Sold out'`, "the sale sold out")
	op.waitTrue(`document.getElementById('f-soldout').innerText.startsWith('Sold out at')`, "the sold-out time")
	op.waitTrue(`window.said.some(t => t.includes('sold out'))`, "sold out announced")
	buyers.halt()
	op.state("sold-out")

	// An order shipped, from the orders list.
	op.click("orders-load")
	op.waitTrue(`document.querySelectorAll('#orders-rows li').length > 0`, "the orders listed")
	op.do(chromedpClick(`#orders-rows li:first-child button`))
	op.waitTrue(`document.getElementById('confirm').open`, "the ship dialog")
	op.click("confirm-ok")
	op.waitTrue(`document.getElementById('orders-result').innerText.includes('shipped')`, "the order shipped")
	op.state("orders")

	// What shoppers see: the contract's display, where this server takes
	// it (the field arrives with the waiting room's rework).
	if code, m := s.call("PATCH", "/admin/sales/sneakers", map[string]string{"If-Match": "999999"},
		map[string]any{"display": map[string]any{"title": "probe"}}); code == http.StatusBadRequest {
		t.Logf("this server does not take display yet (%v): the display editor is not exercised", m)
	} else {
		op.do(chromedpClick(`#display-box summary`))
		op.fill("d-title", "Limited sneakers, second drop")
		op.fill("d-color", "#aa3300")
		op.click("display-form button[type=submit]")
		op.waitTrue(`document.getElementById('display-result').innerText.includes('Saved')`, "the display saved")
		d, _ := s.must(200, "GET", "/admin/sales/sneakers", nil, nil)["display"].(map[string]any)
		if d["title"] != "Limited sneakers, second drop" || d["brandColor"] != "#aa3300" {
			t.Errorf("display after the console saved it: %v", d)
		}
		op.state("display")
	}

	// The same sale on a desk's screen, for the README.
	desk := b.open("desk", s.srv.URL+"/admin/#/sale/sneakers", 1280, 900, 1, false)
	desk.waitView("signin")
	desk.fill("token", adminToken)
	desk.click("signin-form button")
	desk.waitView("sale")
	desk.waitTrue(`document.getElementById('s-state').innerText === 'Sold out'`, "the desk's sale")
	desk.waitTrue(`document.getElementById('conn').dataset.state === 'live'`, "the desk's feed live")
	desk.state("sale")
}
