// Package page is the waiting room's web page: static HTML and JavaScript,
// embedded in the binary and served by the edge. Everything dynamic comes
// from the JSON routes it polls (ticket, status, reserve, confirm); the
// page itself is the same for every shopper, so a CDN can serve it.
package page

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Handler serves the page at /sale/{sku}/ and its assets under /assets/.
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
		if strings.HasPrefix(r.URL.Path, "/assets/") {
			w.Header().Set("Cache-Control", "public, max-age=300")
			http.StripPrefix("/assets", files).ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=60")
		_, _ = w.Write(index)
	})
}
