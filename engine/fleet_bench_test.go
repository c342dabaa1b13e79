package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/token"
)

// BenchmarkFleetPropagation measures how long a change made through one
// origin takes to show in another's GET /sale/{sku}, on PostgreSQL and
// Redis, with the real clock: from the moment the first origin answers
// the operator's request to the first answer of the second that shows it,
// the second asked every 200µs. Each iteration is one change, made at a
// random moment; p50_ms and p99_ms are the delays' percentiles.
//
// "pause" alternates pause and resume of one sale; "create" creates a
// sale of a new SKU (the delay until the second stops answering 404).
// "notify" is the fleet as it runs; "no-notify" stops the sale listener
// of the second origin, leaving its catalog's TTL and listing, the
// baseline before issue 19; "edge" asks an edge of the second origin
// instead, which fetches its snapshots every 250ms.
//
//	go test -run '^$' -bench BenchmarkFleetPropagation -benchtime 200x ./engine/
func BenchmarkFleetPropagation(b *testing.B) {
	for _, change := range []string{"pause", "create"} {
		for _, at := range []string{"notify", "no-notify", "edge"} {
			b.Run(change+"/"+at, func(b *testing.B) { benchPropagation(b, change, at) })
		}
	}
}

func benchPropagation(b *testing.B, change, at string) {
	dbURL := testenv.Postgres(b)
	_, prefix := testenv.Redis(b)
	key, err := token.GenerateKey("bench")
	if err != nil {
		b.Fatal(err)
	}
	keys := token.FormatKeys([]token.Key{key})
	ctx, cancel := context.WithCancel(context.Background())
	var servers [2]*httptest.Server
	var engines [2]*engine.Engine
	for i := range engines {
		eng, err := engine.Open(ctx, engine.Config{Role: httpapi.RoleOrigin, DataDir: b.TempDir(), DatabaseURL: dbURL,
			RedisURL: testenv.RedisURL(), RedisPrefix: prefix, TokenKeys: keys, AdminToken: fleetAdmin,
			Source: fmt.Sprintf("origin-%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		eng.Start(ctx)
		engines[i], servers[i] = eng, httptest.NewServer(eng.Handler)
	}
	b.Cleanup(func() {
		cancel()
		for i := range engines {
			servers[i].Close()
			engines[i].Stop()
			engines[i].Close()
		}
	})
	// asked is where the change is looked for.
	asked := servers[1].URL
	switch at {
	case "no-notify":
		engines[1].SaleListener.Stop()
	case "edge":
		edge, err := engine.Open(ctx, engine.Config{Role: httpapi.RoleEdge, DataDir: b.TempDir(),
			RedisURL: testenv.RedisURL(), RedisPrefix: prefix, TokenKeys: keys,
			OriginURL: servers[1].URL, OriginToken: fleetAdmin, EdgeID: "bench-edge"})
		if err != nil {
			b.Fatal(err)
		}
		edge.Start(ctx)
		srv := httptest.NewServer(edge.Handler)
		b.Cleanup(func() {
			srv.Close()
			edge.Stop()
			edge.Close()
		})
		asked = srv.URL
	}
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(base, method, path string, admin bool, body string) (int, string) {
		req, err := http.NewRequest(method, base+path, stringsReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if admin {
			req.Header.Set("Authorization", "Bearer "+fleetAdmin)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct{ State string }
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v.State
	}
	create := func(sku string, lasts time.Duration) {
		now := time.Now().UTC()
		body := fmt.Sprintf(`{"sku":%q,"initialStock":10,"opensAt":%q`, sku, now.Format(time.RFC3339Nano))
		if lasts > 0 {
			body += fmt.Sprintf(`,"closesAt":%q`, now.Add(lasts).Format(time.RFC3339Nano))
		}
		body += "}"
		if code, _ := call(servers[0].URL, "POST", "/admin/sales", true, body); code != http.StatusCreated {
			b.Fatalf("create %s: %d", sku, code)
		}
	}
	// shows polls the server asked until done says its answer shows the
	// change, and returns how long after since that was.
	shows := func(path string, done func(code int, state string) bool, since time.Time) time.Duration {
		for {
			code, state := call(asked, "GET", path, false, "")
			if done(code, state) {
				return time.Since(since)
			}
			if time.Since(since) > 10*time.Second {
				b.Fatalf("GET %s at %s: still %d %s after 10s", path, at, code, state)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	if change == "pause" {
		create("bench", 0)
		shows("/sale/bench", func(code int, _ string) bool { return code == http.StatusOK }, time.Now())
	}
	delays := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		// A change comes at any moment, not just after the last one was
		// seen: without this, each would land just after a refresh (the
		// one that showed the last) and every delay be the worst.
		time.Sleep(rand.N(300 * time.Millisecond))
		switch change {
		case "pause":
			action, want := "pause", "paused"
			if i%2 == 1 {
				action, want = "resume", "open"
			}
			if code, _ := call(servers[0].URL, "POST", "/admin/sales/bench/"+action, true, `{}`); code != http.StatusOK {
				b.Fatalf("%s: %d", action, code)
			}
			done := time.Now()
			delays = append(delays, shows("/sale/bench", func(_ int, state string) bool { return state == want }, done))
		case "create":
			sku := fmt.Sprintf("new-%d", i)
			// The server has been asked for the SKU before: a shopper
			// arriving early caches its absence.
			call(asked, "GET", "/sale/"+sku, false, "")
			// Closed two seconds later: the sales open at once stay few,
			// as in a shop, rather than every one the benchmark made
			// (each fetch of an edge builds every open sale's snapshot).
			create(sku, 2*time.Second)
			done := time.Now()
			delays = append(delays, shows("/sale/"+sku, func(code int, _ string) bool { return code == http.StatusOK }, done))
		}
	}
	b.StopTimer()
	slices.Sort(delays)
	pct := func(p float64) float64 {
		return float64(delays[min(len(delays)-1, int(p*float64(len(delays))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(delays[len(delays)-1].Microseconds())/1000, "max_ms")
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
