// Package sdk serves the JavaScript SDK: ES modules in js/, no build step
// and no dependencies, that a shop's storefront imports to put the
// waiting room and the stock gate in its own pages (docs/integrate.md).
// The server's own waiting-room page (package page) is built on it.
//
// The files, in js/, served at /sdk/<name>:
//
//	flashsale.js    the entry: WaitingRoom, an EventTarget that takes the
//	                place, polls, solves, is admitted, reserves and
//	                follows the hold; it re-exports the parts below
//	api.js          the contract's routes, answers decided on `code`
//	timing.js       polling after Retry-After, jittered upwards, and backoff
//	challenge.js    the proof-of-work step's decisions: answers, salts
//	pow.js          the proof-of-work search
//	pow-worker.js   runs it in a Web Worker, off the page's main thread
//	sha256.js       SHA-256 (FIPS 180-4), for the proof of work
//
// Their unit tests (js/test/*.test.js) run under Node's test runner:
// `node --test sdk/js/test/*.test.js`, and `go test ./sdk`.
package sdk

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

//go:embed js/*.js
var files embed.FS

// Prefix is where the SDK is served.
const Prefix = "/sdk/"

// file is one module, read once: its bytes and their ETag.
type file struct {
	body []byte
	etag string
}

type handler struct{ files map[string]file }

// Handler returns the handler of GET/HEAD /sdk/<file>. Safe for
// concurrent use.
func Handler() http.Handler {
	h := handler{files: map[string]file{}}
	names, err := fs.Glob(files, "js/*.js")
	if err != nil || len(names) == 0 {
		panic("sdk: no modules embedded") // fixed at build time
	}
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		h.files[path.Base(name)] = file{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	return h
}

// maxAge is how long a browser or CDN keeps a module before asking
// again: the paths carry no version, so an upgrade of the server reaches
// every page within it; asking again costs a 304 (the ETag).
const maxAge = 5 * time.Minute

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	// A storefront on another origin imports the modules (module scripts
	// are fetched with CORS) and builds its worker on them. They are the
	// same public files for everyone and carry no credentials, so any
	// origin may read them, and a CDN may keep one copy for all; the API
	// itself answers only the origins of --cors-origins.
	hd.Set("Access-Control-Allow-Origin", "*")
	hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	f, found := h.files[name]
	if !ok || !found {
		hd.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"No such file of the SDK."}}` + "\n"))
		return
	}
	hd.Set("Content-Type", "text/javascript; charset=utf-8")
	hd.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(maxAge/time.Second)))
	hd.Set("ETag", f.etag)
	// ServeContent answers If-None-Match with a 304, HEAD and ranges.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}
