package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/testenv"
)

// backend is one combination of stock gate and record a test runs on.
type backend struct {
	name            string
	redis, postgres bool
}

// backends: the embedded default, and the real components (skipped where
// PostgreSQL or Redis is absent, failed under CI=true).
var backends = []backend{
	{name: "memory+sqlite"},
	{name: "redis+postgres", redis: true, postgres: true},
}

func forEachBackend(t *testing.T, scenario func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { scenario(t, b) })
	}
}

// start is where every test's clock starts.
var start = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

// harness is an engine on a backend behind an httptest server, with the
// test's clock, and a client whose waits advance that clock instead of
// sleeping.
type harness struct {
	t     *testing.T
	eng   *engine.Engine
	srv   *httptest.Server
	clock *testenv.Clock
	c     *client.Client
	// wrap, when set before the first request, sees every request before
	// the engine does (fault injection).
	wrap func(w http.ResponseWriter, r *http.Request, next http.Handler)
	// onSleep, when set, runs after each wait has advanced the clock (a
	// pacer tick, say).
	onSleep func(d time.Duration)

	mu    sync.Mutex
	slept []time.Duration
}

func newHarness(t *testing.T, b backend, tweak ...func(*engine.Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: testenv.NewClock(start)}
	cfg := engine.Config{
		DataDir:       t.TempDir(),
		Now:           h.clock.Now,
		Source:        "client-test",
		GateTimeout:   5 * time.Second,
		RecordTimeout: 30 * time.Second,
		MaxInFlight:   4096,
		// The tests send the instrument in the reserve body, as a
		// storefront the server trusts would (--trust-client-instrument).
		TrustClientInstrument: true,
	}
	if b.postgres {
		cfg.DatabaseURL = testenv.Postgres(t)
	}
	if b.redis {
		_, cfg.RedisPrefix = testenv.Redis(t)
		cfg.RedisURL = testenv.RedisURL()
	}
	for _, f := range tweak {
		f(&cfg)
	}
	eng, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	h.eng = eng
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.wrap != nil {
			h.wrap(w, r, eng.Handler)
			return
		}
		eng.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		h.srv.Close()
		eng.Close()
	})
	h.c = h.newClient()
	return h
}

// newClient returns a client of the harness's server whose waits are
// recorded and advance the clock, with no jitter unless opts set one.
func (h *harness) newClient(opts ...client.Option) *client.Client {
	h.t.Helper()
	opts = append([]client.Option{
		client.WithHTTPClient(h.srv.Client()),
		client.WithClock(h.clock.Now),
		client.WithSleep(h.sleep),
		client.WithJitter(func(time.Duration) time.Duration { return 0 }),
	}, opts...)
	c, err := client.New(h.srv.URL, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) sleep(ctx context.Context, d time.Duration) error {
	h.mu.Lock()
	h.slept = append(h.slept, d)
	h.mu.Unlock()
	h.clock.Advance(d)
	if h.onSleep != nil {
		h.onSleep(d)
	}
	return ctx.Err()
}

// waits returns the waits so far and forgets them.
func (h *harness) waits() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.slept
	h.slept = nil
	return w
}

// jwt is a shopper token signed with the development key, for an account
// 30 days old.
func (h *harness) jwt(user string) string { return h.jwtAged(user, 720*time.Hour) }

func (h *harness) jwtAged(user string, age time.Duration) string {
	h.t.Helper()
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, age, h.clock.Now(), 24*time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

func (h *harness) shopper(user string) *client.Shopper { return h.c.Shopper(h.jwt(user)) }

func (h *harness) admin() *client.Admin { return h.c.Admin("") }

// createSale creates a sale open now with 10 units, as tweak changes it.
func (h *harness) createSale(sku string, tweak ...func(*client.NewSale)) *client.SaleView {
	h.t.Helper()
	s := client.NewSale{SKU: sku, Name: "Test " + sku, InitialStock: 10, OpensAt: h.clock.Now()}
	for _, f := range tweak {
		f(&s)
	}
	v, err := h.admin().CreateSale(context.Background(), s)
	if err != nil {
		h.t.Fatalf("create sale %s: %v", sku, err)
	}
	return v
}

// admit takes the shopper through the waiting room of a sale that admits
// at once and returns the admission token.
func (h *harness) admit(sku, user string) string {
	h.t.Helper()
	ctx := context.Background()
	t, err := h.shopper(user).Ticket(ctx, sku)
	if err != nil {
		h.t.Fatalf("ticket for %s: %v", user, err)
	}
	st, err := h.c.Status(ctx, sku, t.Token)
	if err != nil || st.State != client.StateAdmitted {
		h.t.Fatalf("status of %s: %+v %v, want admitted", user, st, err)
	}
	return st.AdmissionToken
}

// wantCode fails the test unless err is an *Error with code and status,
// matched by errors.Is against the code's sentinel.
func wantCode(t *testing.T, what string, err error, sentinel *client.Error, status int) {
	t.Helper()
	var e *client.Error
	switch {
	case err == nil:
		t.Errorf("%s: no error, want %s", what, sentinel.Code)
	case !errors.Is(err, sentinel):
		t.Errorf("%s: %v, want %s", what, err, sentinel.Code)
	case !errors.As(err, &e) || e.Status != status || e.Message == "":
		t.Errorf("%s: %#v, want status %d and a message", what, e, status)
	}
}
