// Package console is the operator's console: a web page (static HTML, CSS
// and JavaScript as ES modules, no build step, nothing fetched from
// elsewhere), embedded in the binary and served at /admin/ with its files
// under /admin/assets/. It shows the sales, one sale live (the feed of GET
// /admin/sales/{sku}/live, read with fetch() so that it can carry the
// admin token), charts it draws itself, and the operator's actions.
//
// The page holds no data: every figure comes from the operator routes,
// each request carrying the admin token the operator signs in with (kept
// in sessionStorage, sent as Authorization: Bearer, never a cookie, so no
// other site can make the browser use it). Serving the page itself
// therefore needs no token; the server still serves it only to loopback
// clients when it has no admin token, as it does the routes.
//
// The files, in static/:
//
//	index.html   the views (sign in, the sales, one sale), one at a time
//	console.css  phone-first layout, the waiting room's design tokens
//	console.js   the controller: views, rendering, actions, announcements
//	api.js       the operator routes, answers decided on `code`
//	feed.js      the event stream over fetch(), reconnecting with Last-Event-ID
//	chart.js     SVG line charts with real ticks, and sparklines
//	format.js    numbers, times and axis ticks
//
// Overselling is neither prevented nor caused here; the console is a client
// of the operator routes (a rebuild it asks for is package control's).
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows the console only its own scripts, styles
// and API: nothing inline, nothing from elsewhere, never framed (a framed
// console could be clicked through).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console at /admin/ and its files under
// /admin/assets/. Safe for concurrent use.
func Handler() http.Handler {
	assets, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/admin/assets", http.FileServer(http.FS(assets)))
	index, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if strings.HasPrefix(r.URL.Path, "/admin/assets/") {
			if r.URL.Path == "/admin/assets/" || strings.HasSuffix(r.URL.Path, "/index.html") {
				http.NotFound(w, r) // no listing; the page has one address
				return
			}
			// The files change with the binary: a short cache keeps a new
			// release from meeting an old script for long.
			h.Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		_, _ = w.Write(index)
	})
}
