package httpapi

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flashsale/flashsale"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "LOCALHOST:8080": true, "localhost.:8080": true,
		"console.localhost:8080": true, "127.0.0.1": true, "127.0.0.1:8080": true, "127.8.9.1:80": true,
		"[::1]:8080": true, "[::1]": true, "[::ffff:127.0.0.1]:8080": true,
		"": false, "0.0.0.0:8080": false, "[::]:8080": false, "attacker.example:8080": false,
		"localhost.attacker.example": false, "127.0.0.1.nip.io:8080": false, "10.0.0.1:8080": false,
		"localhostx:8080": false, "[::2]:8080": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %t, want %t", host, got, want)
		}
	}
}

// TestLocalOperator: without an admin token, an operator request passes
// only from loopback, to a loopback Host, with no other origin's mark on
// it, and a body only as application/json.
func TestLocalOperator(t *testing.T) {
	type req struct {
		method, remote, host, body string
		headers                    map[string]string
	}
	const json = `{"sku":"x"}`
	cases := map[string]struct {
		r    req
		want flashsale.Code // "" passes
	}{
		"curl, no body":              {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", "", nil}, ""},
		"curl, JSON":                 {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", json, map[string]string{"Content-Type": "application/json"}}, ""},
		"JSON with a charset":        {req{"PATCH", "[::1]:5000", "localhost:8080", json, map[string]string{"Content-Type": "application/json; charset=utf-8"}}, ""},
		"the console, same origin":   {req{"POST", "127.0.0.1:5000", "localhost:8080", json, map[string]string{"Content-Type": "application/json", "Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin"}}, ""},
		"a page typed in the bar":    {req{"GET", "127.0.0.1:5000", "127.0.0.1:8080", "", map[string]string{"Sec-Fetch-Site": "none"}}, ""},
		"from another host":          {req{"GET", "192.0.2.7:5000", "127.0.0.1:8080", "", nil}, flashsale.CodeForbidden},
		"DNS rebinding":              {req{"GET", "127.0.0.1:5000", "attacker.example:8080", "", nil}, flashsale.CodeForbidden},
		"0.0.0.0":                    {req{"GET", "127.0.0.1:5000", "0.0.0.0:8080", "", nil}, flashsale.CodeForbidden},
		"no Host":                    {req{"GET", "127.0.0.1:5000", "", "", nil}, flashsale.CodeForbidden},
		"another origin":             {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", json, map[string]string{"Content-Type": "application/json", "Origin": "https://attacker.example"}}, flashsale.CodeForbidden},
		"another port of localhost":  {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", "", map[string]string{"Origin": "http://127.0.0.1:3000"}}, flashsale.CodeForbidden},
		"an opaque origin":           {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", "", map[string]string{"Origin": "null"}}, flashsale.CodeForbidden},
		"a cross-site GET":           {req{"GET", "127.0.0.1:5000", "127.0.0.1:8080", "", map[string]string{"Sec-Fetch-Site": "cross-site"}}, flashsale.CodeForbidden},
		"a same-site GET":            {req{"GET", "127.0.0.1:5000", "127.0.0.1:8080", "", map[string]string{"Sec-Fetch-Site": "same-site"}}, flashsale.CodeForbidden},
		"a form post":                {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", "sku=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, flashsale.CodeUnsupportedMediaType},
		"text/plain JSON":            {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", json, map[string]string{"Content-Type": "text/plain"}}, flashsale.CodeUnsupportedMediaType},
		"a body without a type":      {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", json, nil}, flashsale.CodeUnsupportedMediaType},
		"a JSON look-alike type":     {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", json, map[string]string{"Content-Type": "application/jsonx"}}, flashsale.CodeUnsupportedMediaType},
		"a multipart form":           {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", json, map[string]string{"Content-Type": "multipart/form-data; boundary=x"}}, flashsale.CodeUnsupportedMediaType},
		"foreign origin and a form":  {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", "sku=x", map[string]string{"Content-Type": "text/plain", "Origin": "https://attacker.example"}}, flashsale.CodeForbidden},
		"a body on GET, not JSON":    {req{"GET", "127.0.0.1:5000", "127.0.0.1:8080", "x", map[string]string{"Content-Type": "text/plain"}}, flashsale.CodeUnsupportedMediaType},
		"https origin, same host":    {req{"POST", "127.0.0.1:5000", "127.0.0.1:8443", "", map[string]string{"Origin": "https://127.0.0.1:8443"}}, ""},
		"origin of a loopback alias": {req{"POST", "127.0.0.1:5000", "127.0.0.1:8080", "", map[string]string{"Origin": "http://localhost:8080"}}, flashsale.CodeForbidden},
	}
	for name, c := range cases {
		var body *strings.Reader
		if c.r.body != "" {
			body = strings.NewReader(c.r.body)
		}
		var r = httptest.NewRequest(c.r.method, "/admin/sales", nil)
		if body != nil {
			r = httptest.NewRequest(c.r.method, "/admin/sales", body)
		}
		r.RemoteAddr, r.Host = c.r.remote, c.r.host
		for k, v := range c.r.headers {
			r.Header.Set(k, v)
		}
		err := localOperator(r)
		if got := flashsale.Code(""); err != nil {
			got = flashsale.ErrorCode(err)
			if got != c.want {
				t.Errorf("%s: %s, want %q", name, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s: passed, want %s", name, c.want)
		}
	}
	if StatusOf(flashsale.CodeUnsupportedMediaType) != 415 || StatusOf(flashsale.CodeForbidden) != 403 {
		t.Error("unsupported_media_type must be 415 and forbidden 403")
	}
}

// logRecords is a slog handler that keeps what is logged.
type logRecords struct {
	mu sync.Mutex
	r  []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.r = append(h.r, r)
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

func (h *logRecords) at(level slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.r {
		if r.Level == level {
			n++
		}
	}
	return n
}

// TestExpectedAnswersAreNotErrors: a crowd answered 503 overloaded or
// sale_paused, or any 4xx, writes no ERROR line (DEBUG only); a bug or a
// store that fails does, once a second per code however many requests
// meet it.
func TestExpectedAnswersAreNotErrors(t *testing.T) {
	h := &logRecords{}
	logger := slog.New(h)
	r := httptest.NewRequest("POST", "/sale/x/reserve", nil)
	for _, code := range []flashsale.Code{flashsale.CodeOverloaded, flashsale.CodeSalePaused, flashsale.CodeSoldOut,
		flashsale.CodeRateLimited, flashsale.CodeUnauthenticated, flashsale.CodeBadRequest} {
		for range 1000 {
			writeError(httptest.NewRecorder(), logger, r, flashsale.Errorf(code, "no"))
		}
	}
	if n := h.at(slog.LevelError) + h.at(slog.LevelWarn) + h.at(slog.LevelInfo); n != 0 {
		t.Fatalf("%d lines above DEBUG for expected answers", n)
	}
	if n := h.at(slog.LevelDebug); n != 6000 {
		t.Fatalf("%d DEBUG lines, want one per answer", n)
	}
	for range 1000 {
		writeError(httptest.NewRecorder(), logger, r, flashsale.Errorf(flashsale.CodeUnavailable, "the record did not answer"))
		writeError(httptest.NewRecorder(), logger, r, flashsale.Errorf(flashsale.CodeInternal, "a bug"))
	}
	// The loop may straddle a second: two lines of each code at most.
	if n := h.at(slog.LevelError); n < 2 || n > 4 {
		t.Fatalf("%d ERROR lines for 1000 internal and 1000 unavailable answers, want one a second per code", n)
	}
}
