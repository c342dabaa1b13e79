// Package page is the waiting room's web page: an HTML template, CSS,
// message catalogues and JavaScript (ES modules, no build step), embedded
// in the binary and served by the edge. Everything about a sale comes
// from the JSON routes it polls (sale, ticket, status, register,
// admission, reserve, confirm); the page itself is the same for every
// shopper of a server, so a CDN can serve it.
//
// The files, in static/:
//
//	index.html      the views, one shown at a time (body[data-view]); a
//	                html/template whose data is Config's Demo flags
//	app.css         phone-first layout; its design tokens (colours,
//	                spacing, type) are custom properties at its top
//	i18n/*.json     the message catalogues: every word the page shows
//	app.js          the renderer: views, words, announcements, focus,
//	                title, the shop's display, languages; the waiting
//	                room's protocol (ticket, polling, proof of work,
//	                admission, reserve) is the SDK's, /sdk/flashsale.js
//	                (package sdk), which the page imports as a shop's
//	                storefront does
//	i18n.js         catalogues, plurals, numbers, times and durations
//	alerts.js       the opt-in notification and sound of the turn
//	favicon.svg     the tab's icon
//
// A shop overrides any of them without rebuilding: Config.Dir (serve
// --page-dir) names a directory whose files replace the embedded ones of
// the same name (docs/page.md).
//
// Overselling is neither prevented nor caused here; the page is a client of
// the API.
package page

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"os"
	"strings"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows the page only its own scripts, styles,
// worker and API: nothing inline, nothing from elsewhere, but images,
// which a shop's display may take from its own CDN.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; worker-src 'self'; style-src 'self'; " +
	"img-src 'self' data: https: http:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Config configures the page. The zero value serves the embedded page to
// shoppers of a real shop.
type Config struct {
	// Demo says the server runs with --demo: the page may show developer
	// hints (how to mint a shopper token and paste it). Never for a shop's
	// shoppers.
	Demo bool
	// DemoSignIn says GET /demo/token answers (--demo with the development
	// key): the page offers "Sign in as a demo shopper", without probing
	// for it.
	DemoSignIn bool
	// Dir, when set, is a directory whose files override the embedded
	// ones of the same path (index.html, app.css, i18n/de.json, a logo
	// ...); the others are served as embedded. The template is read at
	// New; the other files on each request.
	Dir string
}

// templateData is what index.html may use.
type templateData struct {
	Demo, DemoSignIn bool
}

// New returns the handler of the page at /sale/{sku}/ and its assets
// under /assets/. It fails if Dir is not a directory or its index.html is
// not a template that renders. Safe for concurrent use.
func New(cfg Config) (http.Handler, error) {
	embedded, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	var files fs.FS = embedded
	if cfg.Dir != "" {
		if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("page directory %q: not a directory", cfg.Dir)
		}
		files = overlay{top: os.DirFS(cfg.Dir), base: embedded}
	}
	src, err := fs.ReadFile(files, "index.html")
	if err != nil {
		return nil, fmt.Errorf("page template: %w", err)
	}
	tmpl, err := template.New("index.html").Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("page template: %w", err)
	}
	var index bytes.Buffer
	if err := tmpl.Execute(&index, templateData{Demo: cfg.Demo, DemoSignIn: cfg.DemoSignIn}); err != nil {
		return nil, fmt.Errorf("page template: %w", err)
	}
	return &handler{files: http.FileServer(http.FS(files)), index: index.Bytes()}, nil
}

// Handler returns New's handler for the zero Config: the embedded page,
// with no demo hints.
func Handler() http.Handler {
	h, err := New(Config{})
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return h
}

type handler struct {
	files http.Handler
	index []byte
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	if strings.HasPrefix(r.URL.Path, "/assets/") {
		if strings.HasSuffix(r.URL.Path, "/") {
			// No directory listings: the assets are named by the page.
			http.NotFound(w, r)
			return
		}
		hd.Set("Cache-Control", "public, max-age=300")
		http.StripPrefix("/assets", h.files).ServeHTTP(w, r)
		return
	}
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "public, max-age=60")
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	// The shopper's JWT may arrive in the fragment (#jwt=…); fragments
	// are never sent as a referrer, and neither is anything else.
	hd.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(h.index)
}

// overlay serves top's files, and base's where top has none.
type overlay struct{ top, base fs.FS }

func (o overlay) Open(name string) (fs.File, error) {
	f, err := o.top.Open(name)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return o.base.Open(name)
}
