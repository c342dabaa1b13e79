package waitroom

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// An edge asks its origin about a SKU it does not hold at most once a
// second, and never about a path that cannot name a sale.
func TestEdgeAsksAboutUnknownSKUsSparingly(t *testing.T) {
	var asked atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("sku") != "" {
			asked.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"sales": []}`))
	}))
	defer origin.Close()
	clock := testenv.NewClock(time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC))
	e := NewEdgeSnapshots(EdgeConfig{Origin: origin.URL, Now: clock.Now})
	ctx := context.Background()
	if err := e.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sku := range []string{"a/b", "with space", strings.Repeat("x", 129), ""} {
		if _, err := e.Snapshot(ctx, sku); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("Snapshot(%q) = %v; want not found", sku, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the origin was asked %d times about paths that name no sale", n)
	}
	for range 3 {
		if _, err := e.Snapshot(ctx, "unknown"); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the origin was asked %d times about one unknown SKU within a second; want 1", n)
	}
}
