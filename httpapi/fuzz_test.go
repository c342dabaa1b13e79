package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/token"
)

// The fuzz targets feed the handlers what a client controls (bodies,
// headers, path and query values) and check what every answer must be:
// never a 5xx (no panic, no internal error; 503 only as sale_paused or
// unavailable), always JSON, and every error exactly the contract's shape
// {"error": {"code", "message"}} with the status its code maps to, no Go
// type name in its message and, for a 503 or 429, a Retry-After. Every
// input is served by an engine on SQLite and by one on PostgreSQL (which
// refuses NUL and invalid UTF-8 in text, where SQLite takes them), where
// PostgreSQL answers or CI requires it.
//
// Inputs may name placeholders that the target swaps for genuine values
// of this run (tokens are signed with this run's keys, the sale's id is
// new each run): "JWT" a valid shopper token for alice, "ADMISSION" her
// valid admission, "ADMIN" the admin token, "RES" her reservation's id,
// "VERSION" the sale's version. So the checked-in seeds (testdata/fuzz)
// start the fuzzer from requests that get past the checks, not only from
// noise.

var fuzzNow = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

const fuzzAdminToken = "fuzz-admin-token"

// fuzzServer is an engine with one open sale, "sku", and one reservation
// of alice's.
type fuzzServer struct {
	name        string
	handler     http.Handler
	jwt         string
	admission   string
	reservation string
	eng         *engine.Engine
}

// fuzzServers returns a fuzzServer on SQLite and, where PostgreSQL answers
// (always under CI), one on PostgreSQL.
func fuzzServers(f testing.TB) []*fuzzServer {
	f.Helper()
	servers := []*fuzzServer{newFuzzServer(f, "")}
	if testenv.InCI() || postgresAnswers() {
		servers = append(servers, newFuzzServer(f, testenv.Postgres(f)))
	} else {
		f.Logf("PostgreSQL does not answer at %s: fuzzing on SQLite alone", "TEST_DATABASE_URL")
	}
	return servers
}

// postgresAnswers reports whether the test PostgreSQL takes a connection.
func postgresAnswers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testenv.DatabaseURL())
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

// serveAll serves one request on every server and checks each answer.
func serveAll(t *testing.T, servers []*fuzzServer, what, method, target string, headers map[string]string, body []byte) {
	t.Helper()
	for _, s := range servers {
		check(t, s.name+": "+what, s.serve(t, method, target, headers, body))
	}
}

// newFuzzServer opens an engine on SQLite, or on PostgreSQL at databaseURL.
func newFuzzServer(f testing.TB, databaseURL string) *fuzzServer {
	f.Helper()
	eng, err := engine.Open(context.Background(), engine.Config{
		DataDir:     f.TempDir(),
		DatabaseURL: databaseURL,
		Now:         func() time.Time { return fuzzNow },
		AdminToken:  fuzzAdminToken,
		TokenKeys:   "fz:" + strings.Repeat("A", 43),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	s := &fuzzServer{name: "sqlite", handler: eng.Handler, eng: eng}
	if databaseURL != "" {
		s.name = "postgres"
	}
	if s.jwt, err = identity.MintHS256([]byte(identity.DevelopmentSecret), "alice", 720*time.Hour, fuzzNow, 24*time.Hour); err != nil {
		f.Fatal(err)
	}
	limit, hold := 3, 600
	sale, err := eng.Control.Create(context.Background(), &flashsale.Sale{SKU: "sku", Name: "Fuzz", InitialStock: 1000,
		OpensAt: fuzzNow.Add(-time.Minute), PerUserLimit: limit, HoldSeconds: hold})
	if err != nil {
		f.Fatal(err)
	}
	s.admission = eng.Tokens.SignAdmission(token.Admission{UserID: "alice", SaleID: sale.ID, ID: "adm-alice",
		Expires: fuzzNow.Add(time.Hour), Epoch: sale.Epoch})
	// Alice's reservation, for the reservation routes.
	rec := s.serve(f, "POST", "/sale/sku/reserve", map[string]string{"Authorization": "Bearer JWT",
		"X-Admission-Token": "ADMISSION", "Idempotency-Key": "seed"}, nil)
	var res struct{ ReservationID string }
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &res) != nil {
		f.Fatalf("seed reservation: %d %s", rec.Code, rec.Body)
	}
	s.reservation = res.ReservationID
	return s
}

// expand swaps the placeholders for this run's genuine values.
func (s *fuzzServer) expand(v string) string {
	if !strings.ContainsAny(v, "JARV") {
		return v
	}
	version := "1"
	if sale, err := s.eng.Store.SaleBySKU(context.Background(), "sku"); err == nil {
		version = strconv.FormatInt(sale.Version, 10)
	}
	return strings.NewReplacer("JWT", s.jwt, "ADMISSION", s.admission, "ADMIN", fuzzAdminToken,
		"RES", s.reservation, "VERSION", version).Replace(v)
}

// serve sends one request straight to the handler, from loopback.
func (s *fuzzServer) serve(t testing.TB, method, target string, headers map[string]string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	u, err := url.Parse("http://flashsale.test" + s.expand(target))
	if err != nil {
		t.Skipf("not a request a client can send: %v", err)
	}
	req := httptest.NewRequest(method, "http://flashsale.test/", bytes.NewReader(body))
	req.URL = u
	req.RemoteAddr = "127.0.0.1:40000"
	for k, v := range headers {
		req.Header[k] = []string{s.expand(v)}
	}
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	return rec
}

// check fails t unless the answer is one the contract allows.
func check(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s: %d %s", what, rec.Code, body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q, body %s", what, ct, body)
	}
	if !json.Valid(body) {
		t.Fatalf("%s: not JSON: %q", what, body)
	}
	if rec.Code < 400 {
		return
	}
	var shape map[string]map[string]any
	if err := json.Unmarshal(body, &shape); err != nil || len(shape) != 1 || len(shape["error"]) != 2 {
		t.Fatalf("%s: %d %s is not the contract's error shape", what, rec.Code, body)
	}
	code, _ := shape["error"]["code"].(string)
	msg, _ := shape["error"]["message"].(string)
	if code == "" || msg == "" {
		t.Fatalf("%s: %d %s: empty code or message", what, rec.Code, body)
	}
	if want := httpapi.StatusOf(flashsale.Code(code)); want != rec.Code {
		t.Fatalf("%s: %d with code %q, which maps to %d", what, rec.Code, code, want)
	}
	if goName.MatchString(msg) {
		t.Fatalf("%s: a Go name in the message %q", what, msg)
	}
	if rec.Code == http.StatusServiceUnavailable && code != "sale_paused" && code != "unavailable" {
		t.Fatalf("%s: 503 %s", what, body)
	}
	if (rec.Code == http.StatusServiceUnavailable || rec.Code == http.StatusTooManyRequests) && rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%s: %d without Retry-After", what, rec.Code)
	}
}

// goName matches what a message must never carry: a Go type or a
// package-qualified name, as encoding/json's own errors do.
var goName = regexp.MustCompile(`\b(httpapi|flashsale|purchase|waitroom|control|identity|time|json)\.[A-Za-z]|Go (struct|value)|UnmarshalJSON`)

// FuzzReserve: the reserve body and every header it reads (Authorization
// bearer, X-Admission-Token, Idempotency-Key).
func FuzzReserve(f *testing.F) {
	servers := fuzzServers(f)
	f.Add([]byte(`{"quantity":1}`), "Bearer JWT", "ADMISSION", "k1")
	f.Add([]byte(`{"quantity":2,"paymentFingerprint":"card-1"}`), "Bearer JWT", "ADMISSION", "k2")
	f.Add([]byte(``), "bearer JWT", "ADMISSION", "seed")
	f.Add([]byte(`{"quantity":0}`), "Bearer JWT", "", "k")
	f.Add([]byte(`{"quantity":1.5,"x":1}`), "Bearer", "adm_", "")
	f.Add([]byte(`{"paymentFingerprint":""} {}`), "Basic YWxpY2U6", "ADMISSION", "k\x00")
	f.Fuzz(func(t *testing.T, body []byte, authorization, admission, key string) {
		serveAll(t, servers, "reserve", "POST", "/sale/sku/reserve", map[string]string{"Authorization": authorization,
			"X-Admission-Token": admission, "Idempotency-Key": key, "Content-Type": "application/json"}, body)
	})
}

// FuzzReservation: confirm's body, and the reservation routes' id and
// Authorization.
func FuzzReservation(f *testing.F) {
	servers := fuzzServers(f)
	f.Add("POST", "RES", []byte(`{"paymentRef":"p-1"}`), "Bearer JWT")
	f.Add("GET", "RES", []byte(nil), "Bearer JWT")
	f.Add("DELETE", "res_unknown", []byte(nil), "Bearer JWT")
	f.Add("POST", "RES", []byte(`{"paymentRef":7}`), "Bearer JWT")
	f.Add("POST", "..%2f", []byte(`[`), "")
	f.Fuzz(func(t *testing.T, method, id string, body []byte, authorization string) {
		path := "/reservations/" + url.PathEscape(id)
		switch method {
		case "POST":
			path += "/confirm"
		case "GET", "DELETE":
		default:
			method = "GET"
		}
		serveAll(t, servers, method+" "+path, method, path, map[string]string{"Authorization": authorization}, body)
	})
}

// FuzzCreateSale: the create-sale body, behind the admin bearer token.
func FuzzCreateSale(f *testing.F) {
	servers := fuzzServers(f)
	f.Add([]byte(`{"sku":"a1","name":"A","initialStock":5,"opensAt":"2026-08-01T10:00:00Z"}`), "Bearer ADMIN")
	f.Add([]byte(`{"sku":"a2","name":"A","initialStock":5,"opensAt":"2026-08-01T10:00:00Z","fairness":"lottery","registrationClosesAt":"2026-08-01T11:00:00Z","shards":2}`), "Bearer ADMIN")
	f.Add([]byte(`{"sku":"a3","initialStock":-1,"opensAt":"yesterday","holdSeconds":0}`), "Bearer ADMIN")
	f.Add([]byte(`{"sku":"a4","initialStock":1e9,"opensAt":"2026-08-01T10:00:00Z","perUserLimit":101}`), "bearer  ADMIN ")
	f.Add([]byte(`{}`), "Bearer wrong")
	f.Fuzz(func(t *testing.T, body []byte, authorization string) {
		serveAll(t, servers, "create sale", "POST", "/admin/sales", map[string]string{"Authorization": authorization}, body)
	})
}

// FuzzPatchSale: the PATCH body and its If-Match header.
func FuzzPatchSale(f *testing.F) {
	servers := fuzzServers(f)
	f.Add([]byte(`{"name":"Renamed"}`), "VERSION")
	f.Add([]byte(`{"perUserLimit":2,"holdSeconds":60}`), `"VERSION"`)
	f.Add([]byte(`{"initialStock":5}`), `W/"VERSION"`)
	f.Add([]byte(`{"closesAt":"2030-01-01T00:00:00Z","challengeBits":300}`), "1")
	f.Add([]byte(`{"name":""}`), "")
	f.Add([]byte(`{"name":"x"}`), "-1")
	f.Fuzz(func(t *testing.T, body []byte, ifMatch string) {
		serveAll(t, servers, "patch sale", "PATCH", "/admin/sales/sku", map[string]string{"Authorization": "Bearer ADMIN", "If-Match": ifMatch}, body)
	})
}

// FuzzStatus: the waiting room's status poll, with the ticket token in
// the query or in X-Ticket, with or without a JWT, and the ticket route's
// Authorization.
func FuzzStatus(f *testing.F) {
	servers := fuzzServers(f)
	ticket := servers[0].serve(f, "GET", "/sale/sku/ticket", map[string]string{"Authorization": "Bearer JWT"}, nil)
	var tk struct{ Token string }
	_ = json.Unmarshal(ticket.Body.Bytes(), &tk)
	f.Add(tk.Token, "Bearer JWT")
	f.Add("tkt_", "Bearer")
	f.Add("", "Bearer JWT")
	f.Add("ADMISSION", "JWT")
	f.Fuzz(func(t *testing.T, tok, authorization string) {
		serveAll(t, servers, "status", "GET", "/sale/sku/status?token="+url.QueryEscape(tok), nil, nil)
		serveAll(t, servers, "status by header", "GET", "/sale/sku/status", map[string]string{"X-Ticket": tok, "Authorization": authorization}, nil)
		serveAll(t, servers, "ticket", "GET", "/sale/sku/ticket", map[string]string{"Authorization": authorization}, nil)
	})
}

// everyRoute is every JSON route of an origin, "P" standing for the path
// value the fuzzer chooses (a SKU or an id), with the credentials it takes.
var everyRoute = []struct{ method, path, auth string }{
	{"GET", "/sale/P", ""}, {"GET", "/sale/P/ticket", "Bearer JWT"}, {"GET", "/sale/P/status", "Bearer JWT"},
	{"POST", "/sale/P/register", "Bearer JWT"}, {"POST", "/sale/P/admission", "Bearer JWT"}, {"GET", "/sale/P/draw", ""},
	{"POST", "/sale/P/reserve", "Bearer JWT"},
	{"GET", "/reservations/P", "Bearer JWT"}, {"POST", "/reservations/P/confirm", "Bearer JWT"}, {"DELETE", "/reservations/P", "Bearer JWT"},
	{"POST", "/admin/sales", "Bearer ADMIN"}, {"GET", "/admin/sales", "Bearer ADMIN"}, {"GET", "/admin/sales/P", "Bearer ADMIN"},
	{"PATCH", "/admin/sales/P", "Bearer ADMIN"}, {"POST", "/admin/sales/P/pause", "Bearer ADMIN"},
	{"POST", "/admin/sales/P/resume", "Bearer ADMIN"}, {"POST", "/admin/sales/P/rebuild", "Bearer ADMIN"},
	{"GET", "/admin/sales/P/audit", "Bearer ADMIN"}, {"GET", "/admin/sales/P/automation", "Bearer ADMIN"},
	{"POST", "/admin/sales/P/automation/cancel", "Bearer ADMIN"}, {"GET", "/admin/sales/P/events", "Bearer ADMIN"},
	{"GET", "/admin/orders", "Bearer ADMIN"}, {"POST", "/admin/orders/P/ship", "Bearer ADMIN"},
	{"POST", "/admin/orders/P/cancel", "Bearer ADMIN"}, {"POST", "/admin/orders/P/refund", "Bearer ADMIN"},
	{"GET", "/admin/orders/P/history", "Bearer ADMIN"}, {"GET", "/admin/outbox", "Bearer ADMIN"},
	{"GET", "/admin/outbox/dead", "Bearer ADMIN"}, {"POST", "/admin/outbox/P/replay", "Bearer ADMIN"},
	{"GET", "/admin/edge/snapshots", "Bearer ADMIN"}, {"GET", "/healthz", ""}, {"GET", "/readyz", ""},
}

// FuzzEveryRoute: every JSON route, with the path value (SKU or id), the
// query, every header a route reads and the body the fuzzer's, on SQLite
// and PostgreSQL.
func FuzzEveryRoute(f *testing.F) {
	servers := fuzzServers(f)
	for i := range everyRoute {
		f.Add(uint8(i), "sku", "", "VERSION", []byte(`{}`))
	}
	f.Add(uint8(7), "RES", "", "k", []byte(``))
	f.Add(uint8(8), "RES", "", "k", []byte(`{"paymentRef":"a\u0000b"}`))
	f.Add(uint8(0), "a\x00b", "x=%00", "k\x00", []byte(``))
	f.Add(uint8(11), "", "", "", []byte(`{"sku":"..","name":"\u202e","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`))
	f.Add(uint8(13), "sku", "", "1", []byte(`{"name":"\u0007","requireInstrument":"yes"}`))
	f.Add(uint8(21), "", "sku=%FF", "", []byte(nil))
	f.Add(uint8(2), "sku", "token=%C3%28", "tkt_", []byte(nil))
	f.Fuzz(func(t *testing.T, route uint8, name, query, header string, body []byte) {
		rt := everyRoute[int(route)%len(everyRoute)]
		target := strings.Replace(rt.path, "P", url.PathEscape(name), 1)
		if query != "" {
			target += "?" + query
		}
		headers := map[string]string{"Authorization": rt.auth, "Idempotency-Key": header, "X-Admission-Token": header,
			"X-Ticket": header, "If-Match": header, "X-Operator": header, "Content-Type": "application/json"}
		serveAll(t, servers, rt.method+" "+rt.path, rt.method, target, headers, body)
	})
}

// TestFuzzSeedsReachTheHandlers checks that the placeholders expand to
// genuine values, so the seeds start the fuzzer from requests that get
// through, and that their answers pass check.
func TestFuzzSeedsReachTheHandlers(t *testing.T) {
	for _, s := range fuzzServers(t) {
		t.Run(s.name, func(t *testing.T) { testSeedsReach(t, s) })
	}
}

func testSeedsReach(t *testing.T, s *fuzzServer) {
	for _, c := range []struct {
		method, target string
		headers        map[string]string
		body           string
		want           int
	}{
		{"POST", "/sale/sku/reserve", map[string]string{"Authorization": "Bearer JWT", "X-Admission-Token": "ADMISSION", "Idempotency-Key": "seed"}, "", 201},
		{"GET", "/reservations/RES", map[string]string{"Authorization": "Bearer JWT"}, "", 200},
		{"POST", "/reservations/RES/confirm", map[string]string{"Authorization": "Bearer JWT"}, `{"paymentRef":"p"}`, 200},
		{"POST", "/admin/sales", map[string]string{"Authorization": "Bearer ADMIN"}, `{"sku":"n","name":"N","initialStock":1,"opensAt":"2026-08-01T10:00:00Z"}`, 201},
		{"PATCH", "/admin/sales/sku", map[string]string{"Authorization": "Bearer ADMIN", "If-Match": `"VERSION"`}, `{"name":"M"}`, 200},
		{"GET", "/sale/sku/ticket", map[string]string{"Authorization": "Bearer JWT"}, "", 200},
	} {
		rec := s.serve(t, c.method, c.target, c.headers, []byte(c.body))
		if rec.Code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.target, rec.Code, rec.Body, c.want)
		}
		check(t, c.method+" "+c.target, rec)
	}
}
