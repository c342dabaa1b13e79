package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/testenv"
)

// backend is one combination of gate and record the scenarios run on.
type backend struct {
	name     string
	redis    bool
	postgres bool
}

var backends = []backend{
	{name: "memory+sqlite"},
	{name: "redis+postgres", redis: true, postgres: true},
	{name: "memory+postgres", postgres: true},
	{name: "redis+sqlite", redis: true},
}

// forEachBackend runs a scenario on every backend.
func forEachBackend(t *testing.T, scenario func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { scenario(t, b) })
	}
}

// start is the moment every test's clock starts at.
var start = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

type harness struct {
	t      *testing.T
	eng    *engine.Engine
	srv    *httptest.Server
	clock  *testenv.Clock
	redis  rueidis.Client // the test's own client of the engine's Redis, when it uses one
	prefix string
}

// newHarness assembles an engine on the backend, with the test's clock,
// behind an httptest server.
func newHarness(t *testing.T, b backend, tweak ...func(*engine.Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: testenv.NewClock(start)}
	cfg := engine.Config{
		DataDir: t.TempDir(),
		Now:     h.clock.Now,
		Source:  "test-server",
		// Generous, so that a machine loaded by parallel test packages
		// does not turn slow gate calls into 503s; the outage test sets
		// the production default back.
		GateTimeout:   5 * time.Second,
		RecordTimeout: 30 * time.Second,
		// The scenarios fire up to a thousand reserves at once to test
		// the counts, not the shedding: the bound on requests in flight
		// is set above them (isolation_test.go tests the default sizes'
		// mechanism with bounds small enough to reach).
		MaxInFlight: 4096,
	}
	if b.postgres {
		cfg.DatabaseURL = testenv.Postgres(t)
	}
	if b.redis {
		h.redis, h.prefix = testenv.Redis(t)
		cfg.RedisURL = testenv.RedisURL()
		cfg.RedisPrefix = h.prefix
	}
	for _, f := range tweak {
		f(&cfg)
	}
	eng, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	h.eng = eng
	h.srv = httptest.NewServer(eng.Handler)
	t.Cleanup(func() {
		h.srv.Close()
		eng.Close()
	})
	return h
}

// jwt returns a shopper token for user, signed with the development key,
// for an account 30 days old.
func (h *harness) jwt(user string) string {
	return h.jwtAged(user, 720*time.Hour)
}

// jwtCard returns a shopper token for user, 30 days old, whose pmf claim
// vouches for the payment instrument card, as the store's identity
// service would.
func (h *harness) jwtCard(user, card string) string {
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, 720*time.Hour, h.clock.Now(), 24*time.Hour,
		identity.MintInstrument("", card))
	if err != nil {
		h.t.Fatalf("mint: %v", err)
	}
	return tok
}

func (h *harness) jwtAged(user string, age time.Duration) string {
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, age, h.clock.Now(), 24*time.Hour)
	if err != nil {
		h.t.Fatalf("mint: %v", err)
	}
	return tok
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return m
}

// code is the error code of an error response.
func (r response) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (h *harness) do(method, path string, headers map[string]string, body any) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		// As every client of the contract does, and as the admin guard
		// requires of an operator request on a server without a token.
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// createSale creates a sale through the operator route; fields override
// the defaults (open now, 10 units).
func (h *harness) createSale(sku string, fields map[string]any) map[string]any {
	h.t.Helper()
	body := map[string]any{"sku": sku, "name": "Test " + sku, "initialStock": 10,
		"opensAt": h.clock.Now().Format(time.RFC3339Nano)}
	for k, v := range fields {
		body[k] = v
	}
	r := h.do("POST", "/admin/sales", nil, body)
	if r.status != http.StatusCreated {
		h.t.Fatalf("create sale: %d %s", r.status, r.body)
	}
	return r.json(h.t)
}

// api is the Go client of the harness's server as it is now (a restart
// replaces it), sending each request once: a test sees every answer, none
// repeated behind its back.
func (h *harness) api() *client.Client {
	h.t.Helper()
	c, err := client.New(h.srv.URL, client.WithHTTPClient(h.srv.Client()), client.WithClock(h.clock.Now),
		client.WithMaxAttempts(1))
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// sale returns the operator's view of the sale.
func (h *harness) sale(sku string) *client.SaleView {
	h.t.Helper()
	v, err := h.api().Admin("").Sale(context.Background(), sku)
	if err != nil {
		h.t.Fatalf("show sale: %v", err)
	}
	return v
}

// admit takes the shopper through the waiting room and returns the
// admission token.
func (h *harness) admit(sku, user string) string {
	h.t.Helper()
	ctx := context.Background()
	api := h.api()
	t, err := api.Shopper(h.jwt(user)).Ticket(ctx, sku)
	if err != nil {
		h.t.Fatalf("ticket for %s: %v", user, err)
	}
	st, err := api.Status(ctx, sku, t.Token)
	if err != nil || st.State != client.StateAdmitted {
		h.t.Fatalf("status for %s: %+v %v, want admitted", user, st, err)
	}
	return st.AdmissionToken
}

func (h *harness) reserve(sku, user, admission, key string, body any) response {
	h.t.Helper()
	return h.reserveAs(sku, h.jwt(user), admission, key, body)
}

// reserveAs reserves with the shopper JWT jwt (see jwtCard).
func (h *harness) reserveAs(sku, jwt, admission, key string, body any) response {
	h.t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + jwt, "Idempotency-Key": key}
	if admission != "" {
		hdr["X-Admission-Token"] = admission
	}
	return h.do("POST", "/sale/"+sku+"/reserve", hdr, body)
}

// saleOf returns the sale from the record.
func (h *harness) saleOf(sku string) *flashsale.Sale {
	h.t.Helper()
	s, err := h.eng.Store.SaleBySKU(context.Background(), sku)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// totals checks counter + confirmed + pending == initial from the gate and
// the record, with nothing in flight, and returns the figures.
func (h *harness) exact(sku string) (counter int64, totals flashsale.SaleTotals) {
	h.t.Helper()
	ctx := context.Background()
	sale := h.saleOf(sku)
	snap, err := h.eng.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	totals, err = h.eng.Store.SaleTotals(ctx, sale.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	if got := snap.Counter + totals.Confirmed + totals.Pending; got != int64(sale.InitialStock) {
		h.t.Fatalf("counter %d + confirmed %d + pending %d = %d, want initial %d",
			snap.Counter, totals.Confirmed, totals.Pending, got, sale.InitialStock)
	}
	if snap.Drift() != 0 {
		h.t.Fatalf("gate drift %d: %+v", snap.Drift(), snap)
	}
	if snap.Held() != totals.Confirmed+totals.Pending {
		h.t.Fatalf("gate holds %d units, record %d", snap.Held(), totals.Confirmed+totals.Pending)
	}
	return snap.Counter, totals
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}
