package httpapi

import (
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/flashsale/flashsale"
)

// admin guards an operator route (and /metrics on the main listener).
// With an admin token configured, the request must carry it, and nothing
// else is asked: a browser never adds the token on its own, so a page of
// another site cannot use it. Without one, the route answers only what a
// web page in the operator's browser cannot send (see localOperator).
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	want := []byte(s.cfg.AdminToken)
	return func(w http.ResponseWriter, r *http.Request) {
		if len(want) == 0 {
			if err := localOperator(r); err != nil {
				writeError(w, s.cfg.Logger, r, err)
				return
			}
			h(w, r)
			return
		}
		got, ok := bearer(r)
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeUnauthenticated,
				"Operator routes need Authorization: Bearer <admin token>."))
			return
		}
		h(w, r)
	}
}

// localOperator decides a request to an operator route on a server with no
// admin token, where being on this host is the only credential. A web page
// of any site, open in the operator's browser, is on this host too, so
// the request must also be one no such page can make:
//
//   - it comes from a loopback address;
//   - its Host is a loopback name or address (localhost, *.localhost,
//     127.0.0.0/8, [::1]): a page that had its own name re-pointed at
//     127.0.0.1 (DNS rebinding) reads answers only from its own name, which
//     the browser sends as Host; 0.0.0.0, which some browsers still route
//     to this host, is refused too;
//   - it carries no Origin of another site (a same-origin page, the
//     operator console at /admin/, sends this server's own), and no
//     Sec-Fetch-Site saying a page of another site, or of a sibling, sent
//     it: a cross-site GET (an image, a link) carries no Origin, but the
//     browsers that send Sec-Fetch-Site say where it came from;
//   - a body, if it has one, is Content-Type: application/json, which a
//     page can send to another origin only after a CORS preflight this
//     server never grants; a form or a text/plain fetch is refused.
//
// It returns the refusal (403 forbidden, 415 unsupported_media_type), or
// nil. What it cannot stop, another process on this host, is what an
// admin token is for.
func localOperator(r *http.Request) error {
	if !loopback(r.RemoteAddr) {
		return flashsale.Errorf(flashsale.CodeForbidden,
			"No admin token is configured, so operator routes answer only on loopback.")
	}
	if !loopbackHost(r.Host) {
		return flashsale.Errorf(flashsale.CodeForbidden,
			"No admin token is configured, so operator routes answer only to a loopback Host (localhost, 127.0.0.1 or [::1]).")
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		return flashsale.Errorf(flashsale.CodeForbidden,
			"No admin token is configured, so operator routes refuse requests sent by a web page of another origin.")
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return flashsale.Errorf(flashsale.CodeForbidden,
			"No admin token is configured, so operator routes refuse requests sent by a web page of another origin.")
	}
	if r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
		return flashsale.Errorf(flashsale.CodeUnsupportedMediaType,
			"An operator request's body must be sent as Content-Type: application/json.")
	}
	return nil
}

// loopbackHost reports whether a Host header names this host's loopback:
// localhost or a name under .localhost (which browsers resolve to loopback
// themselves), or a loopback address, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// sameOrigin reports whether origin (an Origin header) is this server's
// own, as reached through host: the origin a page served from here has.
func sameOrigin(origin, host string) bool {
	return strings.EqualFold(origin, "http://"+host) || strings.EqualFold(origin, "https://"+host)
}

// isJSON reports whether a Content-Type is application/json (parameters,
// such as charset, allowed).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}

func loopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
