package page_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/page"
)

func get(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Result().Header, string(b)
}

// TestPageDirOverrides: a shop's directory replaces the page's files of
// the same name (the template, the CSS, a catalogue) and adds its own;
// the others are the embedded ones; a template that does not render is
// refused at start, not served broken.
func TestPageDirOverrides(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("index.html", `<!doctype html><title></title><body data-demo="{{.Demo}}">shop's own</body>`)
	write("app.css", `:root { --brand: #123456; }`)
	write("i18n/de.json", `{"brand.default": "Mein Laden"}`)
	write("logo.png", "PNG")
	h, err := page.New(page.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if code, hdr, body := get(t, h, "/sale/kicks/"); code != 200 || !strings.Contains(body, "shop's own") ||
		!strings.Contains(body, `data-demo="false"`) || !strings.Contains(hdr.Get("Content-Security-Policy"), "img-src 'self' data: https:") {
		t.Fatalf("the page: %d %q %v", code, body, hdr)
	}
	for path, want := range map[string]string{
		"/assets/app.css":      "#123456",           // overridden
		"/assets/i18n/de.json": "Mein Laden",        // overridden
		"/assets/logo.png":     "PNG",               // added
		"/assets/i18n/fr.json": "Vente flash",       // embedded
		"/assets/app.js":       "/sdk/flashsale.js", // embedded, on the SDK
	} {
		if code, _, body := get(t, h, path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want it to hold %q", path, code, want)
		}
	}
	for _, path := range []string{"/assets/", "/assets/i18n/", "/assets/../page.go", "/assets/nope.js"} {
		if code, _, _ := get(t, h, path); code != 404 {
			t.Errorf("%s: %d, want 404 (no listings, nothing outside the page)", path, code)
		}
	}

	write("index.html", `{{.NoSuchField}}`)
	if _, err := page.New(page.Config{Dir: dir}); err == nil {
		t.Error("a template that does not render was accepted")
	}
	if _, err := page.New(page.Config{Dir: filepath.Join(dir, "missing")}); err == nil {
		t.Error("a page directory that does not exist was accepted")
	}
}

// TestDemoHintsOnlyOnADemo: the embedded page offers the demo sign-in,
// the pasted token and the demo's payment only where the server says it
// is a --demo one; a shop's shoppers get its sign-in and checkout.
func TestDemoHintsOnlyOnADemo(t *testing.T) {
	_, _, shop := get(t, page.Handler(), "/sale/kicks/")
	demo, err := page.New(page.Config{Demo: true, DemoSignIn: true})
	if err != nil {
		t.Fatal(err)
	}
	_, _, demoPage := get(t, demo, "/sale/kicks/")
	for _, id := range []string{`id="demo-go"`, `id="jwt-go"`, `id="pay-go"`, `data-i18n="signin.tokenCommand"`} {
		if strings.Contains(shop, id) {
			t.Errorf("a shop's page holds %s", id)
		}
		if !strings.Contains(demoPage, id) {
			t.Errorf("the demo's page misses %s", id)
		}
	}
	for _, id := range []string{`id="signin-shop"`, `id="checkout-go"`, `rel="icon"`} {
		if !strings.Contains(shop, id) {
			t.Errorf("a shop's page misses %s", id)
		}
	}
}
