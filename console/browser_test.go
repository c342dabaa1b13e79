package console_test

import (
	"context"
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

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/internal/axe"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The browser tests drive the console in headless Chromium (Debian's
// chromium) through the DevTools protocol, as an operator would on a
// phone and on a desk, save a screenshot of each state, and run axe-core
// on each. Without Chromium or axe-core they skip (and fail under
// CI=true, whose .ci/run installs both).

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

// browser is one headless Chromium for a test.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots *screenshots
	axe   string
}

func newBrowser(t *testing.T, shots *screenshots) *browser {
	t.Helper()
	path := chromium(t)
	src, err := axe.Source()
	if err != nil {
		testenv.Unavailable(t, "axe-core", err)
	}
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
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("force-color-profile", "srgb"),
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
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	return &browser{t: t, ctx: ctx, shots: shots, axe: string(src)}
}

// tab is one operator's screen.
type tab struct {
	t    *testing.T
	name string
	ctx  context.Context
	b    *browser

	mu         sync.Mutex
	exceptions []string
}

// open opens url in a new tab of width × height CSS pixels at the scale
// (device pixels per CSS pixel), with a storage of its own.
func (b *browser) open(name, url string, width, height int64, scale float64, mobile bool) *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	tb := &tab{t: b.t, name: name, ctx: ctx, b: b}
	if err := chromedp.Do(ctx); err != nil {
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
			b.t.Errorf("%s's console threw: %s", name, e)
		}
	})
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(scale)}
	if mobile {
		opts = append(opts, chromedp.EmulateMobile)
	}
	tb.do(chromedp.EmulateViewport(width, height, opts...), chromedp.Navigate(url))
	return tb
}

func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s's console: %v (view %q)", tb.name, err, tb.view())
	}
}

func (tb *tab) eval(js string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		tb.t.Fatalf("%s's console: evaluate %s: %v", tb.name, js, err)
	}
	return v
}

func (tb *tab) view() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.view`))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return v
}

// waitTrue waits, with a deadline, until the expression is true in the page.
func (tb *tab) waitTrue(js, what string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 45*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		tb.shot("failed")
		tb.t.Fatalf("%s's console: waited in vain for %s: %v; view %q: %s", tb.name, what, err, tb.view(),
			tb.eval(`document.querySelector('section.view:not([hidden])')?.innerText.slice(0, 2000) || ''`))
	}
}

func (tb *tab) waitView(view string) {
	tb.t.Helper()
	tb.waitTrue(fmt.Sprintf(`document.body.dataset.view === %q`, view), "the view "+view)
}

// text is the visible text of the element with the id.
func (tb *tab) text(id string) string {
	tb.t.Helper()
	return strings.TrimSpace(tb.eval(fmt.Sprintf(`document.getElementById(%q).innerText`, id)))
}

func (tb *tab) click(id string) {
	tb.t.Helper()
	tb.do(chromedp.Click(chromedp.CSS("#" + id)))
}

// fill replaces the value of the input with the id, as typing would.
func (tb *tab) fill(id, value string) {
	tb.t.Helper()
	tb.eval(fmt.Sprintf(`(e => { e.focus(); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); return '' })(document.getElementById(%q))`, id))
	tb.do(chromedp.SendKeys(chromedp.CSS("#"+id), value))
}

// checkA11y runs axe-core on the page as it is and fails on any serious
// or critical violation.
func (tb *tab) checkA11y(state string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if tb.eval(`String(typeof axe)`) != "object" {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](tb.b.axe+";0")); err != nil {
			tb.t.Fatalf("load axe-core: %v", err)
		}
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](axe.Script, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("run axe-core on %s: %v", state, err)
	}
	vs, err := axe.Parse(out)
	if err != nil {
		tb.t.Fatal(err)
	}
	if bad := axe.Serious(vs); len(bad) > 0 {
		tb.t.Errorf("%s (%s): serious or critical accessibility violations:\n%s", state, tb.name, axe.Describe(bad))
	}
	if len(vs) > 0 {
		tb.t.Logf("%s (%s): lesser axe findings:\n%s", state, tb.name, axe.Describe(vs))
	}
}

// shot saves a screenshot of the whole page, after checking that it fits
// the screen's width (nothing to scroll sideways).
func (tb *tab) shot(name string) {
	tb.t.Helper()
	if w := tb.eval(`String(document.documentElement.scrollWidth - window.innerWidth)`); w != "0" && !strings.HasPrefix(name, "failed") {
		tb.t.Errorf("%s: the console is %s px wider than the screen", name, w)
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	tb.b.shots.save(tb.t, tb.name+"-"+name, png)
}

// screen saves a screenshot of what the screen shows (a modal dialog is
// drawn in the viewport, which a full-page screenshot stretches).
func (tb *tab) screen(name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	tb.b.shots.save(tb.t, tb.name+"-"+name, png)
}

// state checks and records one state of the console: a screenshot and
// axe-core's verdict.
func (tb *tab) state(name string) {
	tb.t.Helper()
	tb.shot(name)
	tb.checkA11y(name)
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
	file := fmt.Sprintf("%s-%02d-%s.png", s.prefix, s.n, unsafeName.ReplaceAllString(strings.ToLower(name), "-"))
	s.mu.Unlock()
	for _, d := range s.dirs {
		if err := os.WriteFile(filepath.Join(d, file), png, 0o644); err != nil {
			t.Errorf("save %s: %v", file, err)
		}
	}
}
