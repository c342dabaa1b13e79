// Package page is the waiting room's web page: static HTML, CSS and
// JavaScript (ES modules, no build step), embedded in the binary and
// served by the edge. Everything dynamic comes from the JSON routes it
// polls (sale, ticket, status, register, admission, reserve, confirm); the
// page itself is the same for every shopper, so a CDN can serve it.
//
// The files, in static/:
//
//	index.html     the views, one shown at a time (body[data-view])
//	app.css        phone-first layout
//	app.js         the controller: sign-in, polling, reserve, pay
//	api.js         the contract's routes, answers decided on `code`
//	timing.js      jittered polling and backoff, never under a second
//	challenge.js   the proof-of-work step's decisions: answers, spent salts
//	pow.js         the proof-of-work search
//	pow-worker.js  runs it off the main thread
//	sha256.js      SHA-256 (FIPS 180-4), for the proof of work
package page

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows the page only its own scripts, styles,
// worker and API: nothing inline, nothing from elsewhere.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; worker-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page at /sale/{sku}/ and its assets under /assets/.
// Safe for concurrent use.
func Handler() http.Handler {
	assets, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServer(http.FS(assets))
	index, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if strings.HasPrefix(r.URL.Path, "/assets/") {
			h.Set("Cache-Control", "public, max-age=300")
			http.StripPrefix("/assets", files).ServeHTTP(w, r)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "public, max-age=60")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		// The shopper's JWT may arrive in the fragment (#jwt=…); fragments
		// are never sent as a referrer, and neither is anything else.
		h.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(index)
	})
}
