package engine_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// goTypeName matches what encoding/json and friends put in their messages
// and a person should never read: a Go type or package-qualified name.
var goTypeName = regexp.MustCompile(`\b(httpapi|flashsale|purchase|waitroom|control|identity|time|json)\.[A-Za-z]|Go (struct|value)|\*int|\bint64\b|UnmarshalJSON`)

// TestBadInputNeverReachesAStore: every route, on SQLite and PostgreSQL,
// answers a path, query, header or body string with NUL, control
// characters or invalid UTF-8 with 400 (404 for a sale or id that cannot
// exist), before any store is asked; no answer is a 5xx, and no message
// names a Go type. (PostgreSQL refuses NUL and invalid UTF-8 in text: such
// a SKU or id answered 500 on the routes that name a sale, a reservation,
// an order or an event.)
func TestBadInputNeverReachesAStore(t *testing.T) {
	for _, b := range []backend{backends[0], backends[2]} {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, b)
			h.createSale("sku", map[string]any{"initialStock": 10})
			resID, orderID := h.buy("sku", "alice")
			alice := "Bearer " + h.jwt("alice")
			shopper := map[string]string{"Authorization": alice, "Idempotency-Key": "k-bad", "If-Match": "1",
				"X-Admission-Token": h.admit("sku", "bob"), "Content-Type": "application/json"}

			calls := func() int64 { total, _ := h.eng.RecordCalls(); return total }
			send := func(method, target string, headers map[string]string, body string) response {
				t.Helper()
				before := calls()
				var r response
				if strings.ContainsAny(target, "\x00\x7f") || hasCtl(headers) {
					r = h.direct(method, target, headers, body) // no client sends these; a raw connection can
				} else {
					var rd any
					if body != "" {
						rd = body
					}
					r = h.do(method, target, headers, rd)
				}
				if r.status >= 500 {
					t.Errorf("%s %q: %d %s", method, target, r.status, r.body)
				}
				if msg := r.body; goTypeName.Match(msg) {
					t.Errorf("%s %q: a Go name in %s", method, target, msg)
				}
				if after := calls(); after != before && r.status >= 400 {
					t.Errorf("%s %q: %d %s after %d calls to the record, want none", method, target, r.status, r.body, after-before)
				}
				return r
			}
			want := func(r response, status int, code string, what string) {
				t.Helper()
				if r.status != status || r.code() != code {
					t.Errorf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
				}
			}

			// Every route that names something, with bad bytes in its name.
			routes := []struct{ method, path string }{
				{"GET", "/sale/V"}, {"GET", "/sale/V/ticket"}, {"GET", "/sale/V/status?token=x"}, {"POST", "/sale/V/register"},
				{"POST", "/sale/V/admission"}, {"GET", "/sale/V/draw"}, {"POST", "/sale/V/reserve"}, {"GET", "/sale/V/"},
				{"GET", "/reservations/V"}, {"POST", "/reservations/V/confirm"}, {"DELETE", "/reservations/V"},
				{"GET", "/admin/sales/V"}, {"PATCH", "/admin/sales/V"}, {"POST", "/admin/sales/V/pause"},
				{"POST", "/admin/sales/V/resume"}, {"POST", "/admin/sales/V/rebuild"}, {"GET", "/admin/sales/V/audit"},
				{"GET", "/admin/sales/V/automation"}, {"POST", "/admin/sales/V/automation/cancel"},
				{"GET", "/admin/sales/V/events"}, {"POST", "/admin/orders/V/ship"}, {"POST", "/admin/orders/V/cancel"},
				{"POST", "/admin/orders/V/refund"}, {"GET", "/admin/orders/V/history"}, {"POST", "/admin/outbox/V/replay"},
				{"GET", "/admin/orders?sku=V"}, {"GET", "/admin/edge/snapshots?sku=V"}, {"GET", "/sale/sku/status?token=V"},
				{"GET", "/admin/sales/sku/audit?limit=V"}, {"GET", "/admin/outbox/dead?limit=V"}, {"GET", "/healthz?x=V"},
			}
			for _, rt := range routes {
				for _, v := range []string{"%00", "a%00b", "%01", "%0A", "%7F", "%C2%85", "%FF", "%C3%28", "a\x00", "\x7f"} {
					r := send(rt.method, strings.Replace(rt.path, "V", v, 1), shopper, "{}")
					want(r, 400, "bad_request", rt.method+" "+rt.path+" with "+v)
				}
				if strings.Contains(rt.path, "?") && !strings.Contains(rt.path, "sku=V") {
					continue // a query value that is clean text is the route's own to judge
				}
				// Clean text that is no SKU or id: nothing to look up.
				for _, v := range []string{"a%20b", "%E2%80%AE", "%C3%A9", "a.b%2Fc", strings.Repeat("x", 129)} {
					r := send(rt.method, strings.Replace(rt.path, "V", v, 1), shopper, "{}")
					if strings.HasPrefix(rt.path, "/admin/edge/") && r.status == 200 {
						continue // the edges' snapshots of no sale: none
					}
					if r.status != 404 {
						t.Errorf("%s %s with %s: %d %s, want 404", rt.method, rt.path, v, r.status, r.body)
					}
				}
			}

			// Headers a route keeps, compares or logs.
			for _, hdr := range []string{"Idempotency-Key", "X-Admission-Token", "X-Ticket", "If-Match", "X-Operator", "X-Edge-ID"} {
				for _, v := range []string{"k\x00", "k\x01", "k\xff", "k\xc3\x28"} {
					headers := map[string]string{"Authorization": alice, "Idempotency-Key": "k-h", "If-Match": "1"}
					headers[hdr] = v
					for _, rt := range []struct{ method, path string }{{"POST", "/sale/sku/reserve"}, {"GET", "/sale/sku/status?token=x"},
						{"PATCH", "/admin/sales/sku"}, {"POST", "/admin/orders/" + orderID + "/ship"}, {"GET", "/admin/edge/snapshots"}} {
						want(send(rt.method, rt.path, headers, "{}"), 400, "bad_request", hdr+" "+strings.ToValidUTF8(v, "?")+" on "+rt.path)
					}
				}
			}

			// Body strings, on every route that takes one.
			bodies := []struct{ method, path, body string }{
				{"POST", "/admin/sales", `{"sku":"n1","name":"X","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`},
				{"PATCH", "/admin/sales/sku", `{"name":"X"}`},
				{"POST", "/admin/sales/sku/pause", `{"reason":"X"}`},
				{"POST", "/admin/orders/" + orderID + "/ship", `{"reason":"X"}`},
				{"POST", "/admin/orders/" + orderID + "/cancel", `{"reason":"X"}`},
				{"POST", "/admin/orders/" + orderID + "/refund", `{"reason":"X"}`},
				{"POST", "/reservations/" + resID + "/confirm", `{"paymentRef":"X"}`},
				{"POST", "/sale/sku/reserve", `{"paymentFingerprint":"X"}`},
				{"POST", "/sale/sku/admission", `{"token":"X","salt":"s","nonce":"1"}`},
				{"POST", "/sale/sku/register", `{"x":"X"}`},
			}
			for _, c := range bodies {
				for _, bad := range []string{`a\u0000b`, `\u0007`, `line\nbreak`, `\u001b[31m`, `\u007f`, `\u0085`, "\xff", "\xc3\x28"} {
					r := send(c.method, c.path, shopper, strings.Replace(c.body, "X", bad, 1))
					want(r, 400, "bad_request", c.method+" "+c.path+" with "+strings.ToValidUTF8(bad, "?"))
				}
			}

			// Sale names are printable text of at most 200 characters; . and
			// .. are no SKUs.
			for _, body := range []string{
				`{"sku":"n2","name":"` + strings.Repeat("é", 201) + `","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`,
				`{"sku":"n3","name":"bidi \u202e evil","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`,
				`{"sku":".","name":"dot","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`,
				`{"sku":"..","name":"dots","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`,
			} {
				want(send("POST", "/admin/sales", nil, body), 400, "bad_request", "create "+body[:20])
			}
			if r := h.do("POST", "/admin/sales", nil, `{"sku":"n4","name":"`+strings.Repeat("é", 200)+`","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`); r.status != 201 {
				t.Errorf("a name of 200 characters: %d %s", r.status, r.body)
			}

			// Malformed bodies are told what is wrong in a person's words.
			for _, c := range []struct{ method, path, body string }{
				{"POST", "/sale/sku/reserve", `[]`}, {"POST", "/sale/sku/reserve", `{"quantity":"one"}`},
				{"POST", "/sale/sku/reserve", `{"quantity":1.5}`}, {"POST", "/sale/sku/reserve", `"x"`},
				{"POST", "/admin/sales", `{"sku":"n5","initialStock":"5","opensAt":"2026-08-01T10:00:00Z"}`},
				{"POST", "/admin/sales", `{"sku":"n5","initialStock":5,"opensAt":5}`},
				{"POST", "/admin/sales", `{"sku":"n5","initialStock":5,"opensAt":"yesterday"}`},
				{"POST", "/admin/sales", `{"sku":"n5","initialStock":5,"opensAt":"2026-08-01T10:00:00Z","fairness":7}`},
				{"POST", "/admin/sales", `{"sku":"n5","initialStock":5,"opensAt":"2026-08-01T10:00:00Z","requireInstrument":"yes"}`},
				{"PATCH", "/admin/sales/sku", `{"closesAt":true}`}, {"PATCH", "/admin/sales/sku", `{"perUserLimit":[1]}`},
				{"POST", "/reservations/" + resID + "/confirm", `{"paymentRef":{}}`},
				{"POST", "/sale/sku/admission", `{"token":1,"salt":"s","nonce":"1"}`},
			} {
				want(send(c.method, c.path, shopper, c.body), 400, "bad_request", c.method+" "+c.path+" "+c.body)
			}
		})
	}
}

// hasCtl reports whether a header value has a control character, which
// Go's client refuses to send.
func hasCtl(headers map[string]string) bool {
	for _, v := range headers {
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] == 0x7f {
				return true
			}
		}
	}
	return false
}

// direct serves one request straight to the engine's handler, from
// loopback: what a raw connection could send that Go's client will not.
func (h *harness) direct(method, target string, headers map[string]string, body string) response {
	h.t.Helper()
	req := httptest.NewRequest(method, "http://flashsale.test/", strings.NewReader(body))
	u, err := req.URL.Parse(target)
	if err != nil {
		// Go's URL parser refuses raw control bytes; build the path by hand.
		path, query, _ := strings.Cut(target, "?")
		c := *req.URL
		u = &c
		u.Path, u.RawPath, u.RawQuery = path, "", query
	}
	req.URL = u
	req.RemoteAddr = "127.0.0.1:40000"
	for k, v := range headers {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	rec := httptest.NewRecorder()
	h.eng.Handler.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}
