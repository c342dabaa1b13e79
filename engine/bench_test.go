package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
)

// discard is a ResponseWriter that keeps nothing, so a benchmark measures
// the handler rather than a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// benchEngine is an engine with an open, paced sale in which the shopper
// "poller" waits behind 100 others, as most of a crowd does.
func benchEngine(b *testing.B) (*engine.Engine, string, string) {
	b.Helper()
	eng, err := engine.Open(context.Background(), engine.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	ctx := context.Background()
	sale, err := eng.Control.Create(ctx, &flashsale.Sale{SKU: "bench", Name: "Benchmark", InitialStock: 1_000_000,
		OpensAt: time.Now().Add(-time.Second), AdmissionPerSecond: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Warmer.WarmOnce(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if _, _, err := eng.Queue.Join(ctx, sale.ID, fmt.Sprintf("u%d", i), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	jwt, err := identity.MintHS256([]byte(identity.DevelopmentSecret), "poller", time.Hour, time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	t, err := eng.Room.Ticket(ctx, "bench", "poller", time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	return eng, jwt, t.Token
}

// BenchmarkEdgeStatus is one poll of a waiting shopper through the HTTP
// handler, without the network: what the edge adds to net/http's own work.
// The poll carries the shopper's sign-in, as the page's does: a poll of
// the ticket alone, repeated this fast, is told 429 after the room's limit
// (a copy of a ticket holds no one), and would measure that answer
// instead. The shopper's own polls this fast are answered as before (and
// hold it once, which changes nothing for a shopper this far back).
func BenchmarkEdgeStatus(b *testing.B) {
	eng, jwt, ticket := benchEngine(b)
	req, _ := http.NewRequest("GET", "/sale/bench/status?token="+url.QueryEscape(ticket), nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	w := &discard{h: http.Header{}}
	for range 100 { // past the limits, to the answer every later poll gets
		rec := httptest.NewRecorder()
		eng.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"waiting"`) {
			b.Fatalf("the poll's answer: %d %s", rec.Code, rec.Body)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		eng.Handler.ServeHTTP(w, req)
	}
}

// BenchmarkEdgeTicket is a shopper asking again for its place.
func BenchmarkEdgeTicket(b *testing.B) {
	eng, jwt, _ := benchEngine(b)
	req, _ := http.NewRequest("GET", "/sale/bench/ticket", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		eng.Handler.ServeHTTP(w, req)
	}
}
