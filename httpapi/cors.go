package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/sdk"
)

// Cross-origin requests (CORS) let a shop's storefront, on its own origin,
// call the shopper routes from the browser with the JavaScript SDK.
//
// The design, and why:
//   - Only the origins of an allow-list (--cors-origins), each matched
//     exactly, and echoed back with "Vary: Origin": never "*" on the API,
//     so a page on any other site cannot read a shopper's answers.
//   - Never Access-Control-Allow-Credentials: shoppers authenticate with
//     a bearer JWT that the storefront puts in a header, not with cookies,
//     so the browser's ambient credentials are never needed, nor accepted.
//   - Only the shopper routes (/sale/…, /reservations/…): never /admin/,
//     /metrics, /healthz, /readyz or /demo/token. A preflight for them
//     finds no CORS answer, and the browser refuses the request.
//   - A preflight is answered before routing, at the cost of a map
//     lookup, and allowed to be cached for two hours (Chrome's ceiling),
//     so that a shopper's polls do not each pay for one.
//   - Retry-After is exposed to the storefront's script: the SDK polls by
//     it, and a browser hides every header not named so from a
//     cross-origin reader.
//
// The SDK's files (/sdk/) are served to every origin by package sdk: they
// are public and carry no credentials.

// corsHeaders are the request headers a storefront's script sends.
const corsHeaders = "Authorization, Content-Type, Idempotency-Key, X-Admission-Token, X-Ticket"

// corsMaxAge is how long, in seconds, a browser may keep a preflight's answer.
const corsMaxAge = "7200"

// ParseCORSOrigins reads --cors-origins: origins separated by commas, each
// scheme://host[:port] with scheme http or https, and nothing else (no
// path, query, user or wildcard). It returns them as browsers send them
// in Origin (lower case, no default port).
func ParseCORSOrigins(list string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		o, err := normalOrigin(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func normalOrigin(raw string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("CORS origin %q: %s; want scheme://host[:port], e.g. https://shop.example", raw, why)
	}
	if strings.Contains(raw, "*") {
		return bad("no wildcards: name each origin")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("the scheme must be http or https")
	}
	if u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return bad("an origin has a host and nothing after it")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// corsPolicy is the allow-list; the zero value allows no origin.
type corsPolicy struct{ origins map[string]bool }

func newCORSPolicy(origins []string) corsPolicy {
	p := corsPolicy{origins: map[string]bool{}}
	for _, o := range origins {
		if n, err := normalOrigin(o); err == nil {
			p.origins[n] = true
		}
	}
	return p
}

// shopperPath reports whether p is a shopper route's path, the only ones
// a storefront may call across origins.
func shopperPath(p string) bool {
	return strings.HasPrefix(p, "/sale/") || strings.HasPrefix(p, "/reservations/")
}

// apply answers a request from another origin: a preflight it answers
// itself (true: done), an actual request gets the headers that let the
// storefront read the answer (errors included, so the SDK sees their
// codes). Requests without Origin, and those of other paths, pass as they are.
func (s *Server) applyCORS(w http.ResponseWriter, r *http.Request) bool {
	p := s.cors
	origin := r.Header.Get("Origin")
	if origin == "" || !shopperPath(r.URL.Path) {
		return false
	}
	allowed := p.origins[origin]
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	hd := w.Header()
	// The answer depends on Origin: a cache must not hand one origin's to another.
	hd.Add("Vary", "Origin")
	if !preflight {
		if allowed {
			hd.Set("Access-Control-Allow-Origin", origin)
			hd.Set("Access-Control-Expose-Headers", "Retry-After")
		}
		// A refused origin's request is served as any other (a browser
		// shows its answer to no script), and one of this server's own
		// origin needs no CORS at all.
		return false
	}
	if !allowed {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeForbidden,
			"This origin may not call the API from a browser; the server names the ones that may (--cors-origins)."))
		return true
	}
	hd.Set("Access-Control-Allow-Origin", origin)
	hd.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	hd.Set("Access-Control-Allow-Headers", corsHeaders)
	hd.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// sdkHandler serves the JavaScript SDK's modules: one, read once, for
// every server of the process.
var sdkHandler = sdk.Handler()
