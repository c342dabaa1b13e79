package page_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/internal/axe"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The browser tests drive the page in headless Chromium (Debian's
// chromium) through the DevTools protocol, as a shopper on a phone would
// use it, and save a screenshot of each state. Without Chromium they skip
// (and fail under CI=true, whose .ci/run installs it).

// viewport is a phone's: the page must be usable at this width. Each
// state is also seen on a desktop's (see capture).
const (
	viewportWidth  = 390
	viewportHeight = 844
	desktopWidth   = 1280
	desktopHeight  = 860
)

// chromium returns the path of the browser.
func chromium(t *testing.T) string {
	t.Helper()
	var errs []error
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		path, err := exec.LookPath(name)
		if err == nil {
			return path
		}
		errs = append(errs, err)
	}
	testenv.Unavailable(t, "Chromium (apt-get install chromium)", errors.Join(errs...))
	return ""
}

// browser is one headless Chromium for a test; each shopper gets a tab in
// a browser context of its own (its own localStorage), as on separate
// phones.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots *screenshots
}

func newBrowser(t *testing.T, shots *screenshots) *browser {
	t.Helper()
	path := chromium(t)
	// Not t.TempDir: Chromium's helpers may still write there for a moment
	// after it stops, which would fail the test at cleanup.
	profile, err := os.MkdirTemp("", "flashsale-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		// No network but loopback here: without these Chromium keeps
		// trying (and failing) to reach its own services.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		// Tabs in the background keep their timers at full speed, so
		// several shoppers can wait at once.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
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
	// The first run on a context starts its target and lives as long as
	// that context, so it runs on ctx itself, not on a child with a
	// deadline; the allocator bounds the start.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	return &browser{t: t, ctx: ctx, shots: shots}
}

// tab is one shopper's phone.
type tab struct {
	t    *testing.T
	name string
	ctx  context.Context
	b    *browser

	mu         sync.Mutex
	exceptions []string
}

// open opens url in a new phone-sized tab with a storage of its own.
func (b *browser) open(name, url string) *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	tb := &tab{t: b.t, name: name, ctx: ctx, b: b}
	if err := chromedp.Do(ctx); err != nil { // the tab's target, for as long as ctx
		b.t.Fatalf("open a tab: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				tb.mu.Lock()
				tb.exceptions = append(tb.exceptions, m.Text)
				tb.mu.Unlock()
			}
		}
	}()
	b.t.Cleanup(func() {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, e := range tb.exceptions {
			b.t.Errorf("%s's page threw: %s", name, e)
		}
	})
	tb.do(phone(), chromedp.Navigate(url))
	return tb
}

func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s's page: %v (view %q)", tb.name, err, tb.view())
	}
}

func (tb *tab) eval(js string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		tb.t.Fatalf("%s's page: evaluate %s: %v", tb.name, js, err)
	}
	return v
}

// view is the view the page shows (body[data-view]).
func (tb *tab) view() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.view`))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return v
}

// waitView waits, with a deadline, until the page shows the view. The
// page polls at the server's Retry-After (at least a second, jittered), so
// a state change shows within a few seconds.
func (tb *tab) waitView(view string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	js := fmt.Sprintf(`document.body.dataset.view === %q`, view)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		tb.shot("failed-" + view)
		tb.t.Fatalf("%s's page did not show %q: %v; it shows %q: %s", tb.name, view, err, tb.view(),
			tb.eval(`document.querySelector('section.view:not([hidden])')?.innerText || ''`))
	}
}

// waitTrue waits, with a deadline, until the expression is true in the page.
func (tb *tab) waitTrue(js, what string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		tb.t.Fatalf("%s's page: waited in vain for %s: %v; it shows %q", tb.name, what, err, tb.view())
	}
}

// text is the visible text of the element with the id.
func (tb *tab) text(id string) string {
	tb.t.Helper()
	return strings.TrimSpace(tb.eval(fmt.Sprintf(`document.getElementById(%q).innerText`, id)))
}

func (tb *tab) visible(id string) bool {
	tb.t.Helper()
	return tb.eval(fmt.Sprintf(`String(!!document.getElementById(%q).checkVisibility())`, id)) == "true"
}

func (tb *tab) click(id string) {
	tb.t.Helper()
	tb.do(chromedp.Click(chromedp.CSS("#" + id)))
}

// shot saves a screenshot of the page, after checking that it fits the
// phone's width (nothing to scroll sideways).
func (tb *tab) shot(name string) {
	tb.t.Helper()
	if w := tb.eval(`String(document.documentElement.scrollWidth - window.innerWidth)`); w != "0" && !strings.HasPrefix(name, "failed") {
		tb.t.Errorf("%s: the page is %s px wider than the phone", name, w)
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	tb.b.shots.save(tb.t, name, png)
}

// screenshots keeps the screenshots under the test's temporary directory
// and, when FLASHSALE_SCREENSHOTS names a directory, there too.
type screenshots struct {
	prefix string

	mu   sync.Mutex
	dirs []string
	n    int
}

func newScreenshots(t *testing.T, prefix string) *screenshots {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "screenshots")
	s := &screenshots{prefix: prefix, dirs: []string{dir}}
	if extra := os.Getenv("FLASHSALE_SCREENSHOTS"); extra != "" {
		s.dirs = append(s.dirs, extra)
	}
	for _, d := range s.dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { t.Logf("screenshots: %s", strings.Join(s.dirs, ", ")) })
	return s
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

func (s *screenshots) save(t *testing.T, name string, png []byte) {
	s.mu.Lock()
	s.n++
	file := fmt.Sprintf("%s-%03d-%s.png", s.prefix, s.n, unsafeName.ReplaceAllString(strings.ToLower(name), "-"))
	s.mu.Unlock()
	for _, d := range s.dirs {
		if err := os.WriteFile(filepath.Join(d, file), png, 0o644); err != nil {
			t.Errorf("save %s: %v", file, err)
		}
	}
}

// phone sizes the tab as a phone (the default), desktop as a desktop.
func phone() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(viewportWidth, viewportHeight, chromedp.EmulateScale(2), chromedp.EmulateMobile)
}

func desktop() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(desktopWidth, desktopHeight, chromedp.EmulateScale(1))
}

// colorScheme makes the page see the system's light or dark preference.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// language switches the page's language with its own switcher, as a
// shopper would, and waits until the page speaks it.
func (tb *tab) language(lang string) {
	tb.t.Helper()
	tb.eval(fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event('change')); return '' })(document.getElementById('lang'))`, lang))
	tb.waitTrue(fmt.Sprintf(`document.documentElement.lang === %q`, lang), "the page in "+lang)
	time.Sleep(100 * time.Millisecond) // the images of the new layout, if any
}

// capture sees the state as shoppers do: a screenshot at a phone's and a
// desktop's width, light and dark, in English and German, and axe-core's
// check of it, light and dark, with no serious or critical violation.
// The page is left as it was found: English, a phone, light.
func (tb *tab) capture(name string) {
	tb.t.Helper()
	view := tb.view()
	for _, scheme := range []string{"light", "dark"} {
		tb.do(colorScheme(scheme))
		tb.axe(name + " (" + scheme + ")")
	}
	for _, lang := range []string{"en", "de"} {
		tb.language(lang)
		for _, size := range []struct {
			name string
			set  chromedp.Action[chromedp.Void]
		}{{"phone", phone()}, {"desktop", desktop()}} {
			tb.do(size.set)
			for _, scheme := range []string{"light", "dark"} {
				tb.do(colorScheme(scheme))
				tb.shot(fmt.Sprintf("%s-%s-%s-%s", name, size.name, lang, scheme))
			}
		}
	}
	tb.language("en")
	tb.do(phone(), colorScheme("light"))
	if now := tb.view(); now != view {
		tb.t.Logf("%s's page moved from %s to %s while it was captured", tb.name, view, now)
	}
}

var axeSource = sync.OnceValues(func() (string, error) {
	b, err := axe.Source()
	return string(b), err
})

// axe runs axe-core (the version internal/axe pins, installed there by
// npm) in the page, every rule, and fails the test on any serious or
// critical violation.
func (tb *tab) axe(what string) {
	tb.t.Helper()
	src, err := axeSource()
	if err != nil {
		testenv.Unavailable(tb.t, "axe-core (npm ci --prefix internal/axe)", err)
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.axe ? 'ok' : (function () {`+src+`
return 'ok' })()`)); err != nil {
		tb.t.Fatalf("load axe-core into %s's page: %v", tb.name, err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r =>
		JSON.stringify(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v =>
			({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary)}))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("axe-core in %s's page: %v", tb.name, err)
	}
	var violations []struct {
		ID, Impact, Help string
		Nodes            []string
	}
	if err := json.Unmarshal([]byte(out), &violations); err != nil {
		tb.t.Fatalf("axe-core's answer %q: %v", out, err)
	}
	for _, v := range violations {
		tb.t.Errorf("%s, %s: axe-core finds a %s violation, %s (%s): %s", tb.name, what, v.Impact, v.ID, v.Help,
			strings.Join(v.Nodes, "; "))
	}
}
