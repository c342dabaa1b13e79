package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/internal/testenv"
)

// storefrontPage is a shop's own page on its own origin, the SDK imported
// from the flash-sale server's: it takes a place, and reserves at its
// turn. What happens is left in window.log and window.result.
const storefrontPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A shop</title></head>
<body><main><h1>A shop</h1></main>
<script type="module">
import { WaitingRoom } from '%[1]s/sdk/flashsale.js';
window.log = [];
const room = new WaitingRoom({ sku: 'kicks', base: '%[1]s', jwt: '%[2]s' });
for (const type of ['position', 'challenge', 'turn', 'reserved', 'soldout', 'paused', 'closed', 'unavailable', 'error']) {
  room.addEventListener(type, (e) => window.log.push(type === 'challenge' ? 'challenge:' + e.detail.phase : type));
}
room.addEventListener('turn', async () => { window.result = JSON.stringify(await room.reserve(1)); });
room.boot();
</script></body></html>`

// chromium starts a headless Chromium for the test, or skips without one
// (and fails under CI, whose .ci/run installs it).
func chromium(t *testing.T) context.Context {
	t.Helper()
	var path string
	var errs []error
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		p, err := exec.LookPath(name)
		if err == nil {
			path = p
			break
		}
		errs = append(errs, err)
	}
	if path == "" {
		testenv.Unavailable(t, "Chromium (apt-get install chromium)", errors.Join(errs...))
	}
	profile, err := os.MkdirTemp("", "flashsale-sdk-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	return ctx
}

// storefront opens a shop's page in a tab of its own and waits until
// done (a JavaScript condition) holds; it returns window.log and
// window.result.
func storefront(t *testing.T, browser context.Context, url, done string) ([]string, string) {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if _, err := chromedp.Run(tab, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	logOf := func() []string {
		out, err := chromedp.Run(tab, chromedp.Evaluate[string](`JSON.stringify(window.log || [])`))
		if err != nil {
			t.Fatalf("read the log: %v", err)
		}
		var log []string
		_ = json.Unmarshal([]byte(out), &log)
		return log
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](`!!(`+done+`)`))
		if err != nil {
			t.Fatalf("evaluate %s: %v", done, err)
		}
		if ok {
			result, err := chromedp.Run(tab, chromedp.Evaluate[string](`window.result || ''`))
			if err != nil {
				t.Fatalf("read the result: %v", err)
			}
			return logOf(), result
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held; the storefront's events: %v", done, logOf())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestStorefrontInTheBrowser: a shop's page on another origin imports the
// SDK from the server and, through CORS, takes a place, solves the proof
// of work in a worker it builds from the server's script, is admitted and
// reserves; the reservation is the shopper's on the server. A page of an
// origin the server does not name loads the SDK but can call nothing.
func TestStorefrontInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	var shopPage, strangerPage string
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(shopPage))
	}))
	defer shop.Close()
	stranger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strangerPage))
	}))
	defer stranger.Close()
	s := newServer(t, shop.URL)
	s.createSale("kicks", map[string]any{"initialStock": 2, "challengeBits": 8})
	shopPage = fmt.Sprintf(storefrontPage, s.srv.URL, s.jwt("ann"))
	strangerPage = fmt.Sprintf(storefrontPage, s.srv.URL, s.jwt("eve"))
	browser := chromium(t)

	log, out := storefront(t, browser, shop.URL, "window.result")
	for _, want := range []string{"challenge:solved", "turn", "reserved"} {
		if !contains(log, want) {
			t.Errorf("the shop's events %v lack %s", log, want)
		}
	}
	var result struct {
		OK     bool
		Status int
		Key    string
		Body   struct{ ReservationID string }
	}
	if err := json.Unmarshal([]byte(out), &result); err != nil || !result.OK || result.Status != 201 || result.Body.ReservationID == "" {
		t.Fatalf("the shop's reserve: %s (%v)", out, err)
	}
	resp, body := s.do("GET", "/reservations/"+result.Body.ReservationID, map[string]string{"Authorization": "Bearer " + s.jwt("ann")}, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"pending"`) {
		t.Fatalf("ann's reservation on the server: %d %s", resp.StatusCode, body)
	}

	// A stranger's origin: the SDK loads (its files are public), but the
	// browser lets its page read no answer, and the room says it cannot
	// reach the server.
	log, _ = storefront(t, browser, stranger.URL, "(window.log || []).includes('unavailable')")
	if contains(log, "position") || contains(log, "turn") {
		t.Errorf("a page of an origin the server does not name got on: %v", log)
	}
}

func contains(log []string, want string) bool {
	for _, l := range log {
		if l == want {
			return true
		}
	}
	return false
}
