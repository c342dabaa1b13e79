package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sdk"
	"github.com/flashsale/flashsale/token"
)

// server is a real flash-sale server (the embedded default: in-process
// gate, SQLite) whose pacer a goroutine ticks, as its background
// services would, so that a shopper's turn comes.
type server struct {
	t   *testing.T
	eng *engine.Engine
	srv *httptest.Server
	now func() time.Time
}

func newServer(t *testing.T, origins ...string) *server {
	t.Helper()
	clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	start := time.Now()
	// The clock runs on with real time: the SDK's polls come after the
	// server's Retry-After, and a frozen clock would hold them early.
	now := func() time.Time { return clock.Now().Add(time.Since(start)) }
	eng, err := engine.Open(context.Background(), engine.Config{DataDir: t.TempDir(), Now: now, Source: "sdk-test",
		GateTimeout: 5 * time.Second, CORSOrigins: origins})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(eng.Handler)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = eng.Pacer.TickOnce(ctx)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		srv.Close()
		eng.Close()
	})
	return &server{t: t, eng: eng, srv: srv, now: now}
}

func (s *server) jwt(user string) string {
	s.t.Helper()
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, 720*time.Hour, s.now(), time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// do sends a request with the given headers and returns the answer, its
// body read.
func (s *server) do(method, path string, hdr map[string]string, body any) (*http.Response, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// createSale creates a sale open now, its counter loaded.
func (s *server) createSale(sku string, fields map[string]any) {
	s.t.Helper()
	body := map[string]any{"sku": sku, "name": "Test " + sku, "initialStock": 3, "admissionPerSecond": 50,
		"opensAt": s.now().Add(-time.Second).Format(time.RFC3339)}
	for k, v := range fields {
		body[k] = v
	}
	if resp, b := s.do("POST", "/admin/sales", nil, body); resp.StatusCode != 201 {
		s.t.Fatalf("create sale: %d %s", resp.StatusCode, b)
	}
	if err := s.eng.Warmer.WarmOnce(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// TestServedModules: the SDK is served at /sdk/ as JavaScript modules a
// storefront on any origin may import, cached and revalidated by ETag;
// every module a module imports is served beside it; nothing else is.
func TestServedModules(t *testing.T) {
	s := newServer(t)
	resp, body := s.do("GET", "/sdk/flashsale.js", nil, nil)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("export class WaitingRoom extends EventTarget")) {
		t.Fatalf("GET /sdk/flashsale.js: %d", resp.StatusCode)
	}
	for name, want := range map[string]string{
		"Content-Type":                 "text/javascript; charset=utf-8",
		"Cache-Control":                "public, max-age=300",
		"Access-Control-Allow-Origin":  "*",
		"X-Content-Type-Options":       "nosniff",
		"Cross-Origin-Resource-Policy": "cross-origin",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("the SDK's files allow credentials")
	}
	etag := resp.Header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) {
		t.Fatalf("ETag %q", etag)
	}
	if again, b := s.do("GET", "/sdk/flashsale.js", map[string]string{"If-None-Match": etag}, nil); again.StatusCode != 304 || len(b) != 0 {
		t.Errorf("revalidation: %d, %d bytes, want 304 and none", again.StatusCode, len(b))
	}

	// Every module reachable from the entry is served, as JavaScript.
	seen := map[string]bool{}
	queue := []string{"flashsale.js"}
	imports := regexp.MustCompile(`(?:from|import)\s*\(?\s*'\./([\w-]+\.js)'|new URL\('\./([\w-]+\.js)'`)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		resp, body := s.do("GET", "/sdk/"+name, nil, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
			t.Errorf("GET /sdk/%s: %d %s", name, resp.StatusCode, resp.Header.Get("Content-Type"))
			continue
		}
		for _, m := range imports.FindAllStringSubmatch(string(body), -1) {
			queue = append(queue, m[1]+m[2])
		}
	}
	for _, want := range []string{"flashsale.js", "api.js", "timing.js", "challenge.js", "pow.js", "pow-worker.js", "sha256.js"} {
		if !seen[want] {
			t.Errorf("%s is not reached from flashsale.js (reached: %v)", want, seen)
		}
	}
	for _, path := range []string{"/sdk/", "/sdk/nope.js", "/sdk/test/flashsale.test.js", "/sdk/js/flashsale.js", "/sdk/sdk.go"} {
		if resp, b := s.do("GET", path, nil, nil); resp.StatusCode != 404 || !strings.Contains(string(b), `"not_found"`) {
			t.Errorf("GET %s: %d %s, want 404 not_found", path, resp.StatusCode, b)
		}
	}
	// And the page serves what it imports.
	if resp, b := s.do("GET", "/assets/app.js", nil, nil); resp.StatusCode != 200 || !bytes.Contains(b, []byte("from '/sdk/flashsale.js'")) {
		t.Errorf("the page's app.js does not import the SDK: %d", resp.StatusCode)
	}
	_ = sdk.Prefix
}

// TestCORS: a storefront of --cors-origins may call the shopper routes
// from its pages (preflight answered, answers readable, Retry-After
// exposed, never credentials); another origin may not; no origin may call
// the operator routes or the plumbing.
func TestCORS(t *testing.T) {
	const shop, evil = "https://shop.example", "https://evil.example"
	s := newServer(t, shop)
	s.createSale("kicks", nil)

	preflight := func(origin, method, path, headers string) *http.Response {
		resp, _ := s.do("OPTIONS", path, map[string]string{"Origin": origin,
			"Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}, nil)
		return resp
	}
	noCredentials := func(what string, resp *http.Response) {
		t.Helper()
		if v := resp.Header.Get("Access-Control-Allow-Credentials"); v != "" {
			t.Errorf("%s: Access-Control-Allow-Credentials %q", what, v)
		}
	}

	for _, c := range []struct{ method, path, headers string }{
		{"GET", "/sale/kicks/status", "authorization,x-ticket"},
		{"GET", "/sale/kicks/ticket", "authorization"},
		{"POST", "/sale/kicks/admission", "authorization,content-type"},
		{"POST", "/sale/kicks/reserve", "authorization,content-type,idempotency-key,x-admission-token"},
		{"DELETE", "/reservations/res_1", "authorization"},
	} {
		resp := preflight(shop, c.method, c.path, c.headers)
		allowHeaders := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != shop ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), c.method) ||
			resp.Header.Get("Access-Control-Max-Age") == "" || !slicesContain(resp.Header.Values("Vary"), "Origin") {
			t.Errorf("preflight %s %s from the shop: %d %v", c.method, c.path, resp.StatusCode, resp.Header)
		}
		for _, h := range strings.Split(c.headers, ",") {
			if !strings.Contains(allowHeaders, h) {
				t.Errorf("preflight %s %s: %s not allowed (%q)", c.method, c.path, h, allowHeaders)
			}
		}
		noCredentials("preflight", resp)
	}

	// A refused origin's preflight: 403 forbidden, nothing that lets the browser go on.
	resp, body := s.do("OPTIONS", "/sale/kicks/status", map[string]string{"Origin": evil, "Access-Control-Request-Method": "GET"}, nil)
	if resp.StatusCode != 403 || !strings.Contains(string(body), `"forbidden"`) || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	// The operator routes and the plumbing never answer a preflight, even the shop's.
	for _, path := range []string{"/admin/sales", "/admin/sales/kicks/pause", "/metrics", "/healthz", "/readyz", "/demo/token"} {
		resp := preflight(shop, "POST", path, "authorization,content-type")
		if resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s from the shop: %d %v", path, resp.StatusCode, resp.Header)
		}
	}

	// The shop's pages read answers, errors included, and their Retry-After.
	jwt := s.jwt("ann")
	resp, body = s.do("GET", "/sale/kicks/ticket", map[string]string{"Origin": shop, "Authorization": "Bearer " + jwt}, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != shop ||
		resp.Header.Get("Access-Control-Expose-Headers") != "Retry-After" || !slicesContain(resp.Header.Values("Vary"), "Origin") {
		t.Errorf("ticket from the shop: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	noCredentials("ticket", resp)
	resp, body = s.do("GET", "/sale/kicks/status", map[string]string{"Origin": shop, "X-Ticket": "forged"}, nil)
	if resp.StatusCode < 400 || resp.Header.Get("Access-Control-Allow-Origin") != shop {
		t.Errorf("an error to the shop: %d %s %v (its code must be readable)", resp.StatusCode, body, resp.Header)
	}
	// Another origin's request is answered (a browser shows it to no
	// script), with nothing that lets its page read it.
	resp, _ = s.do("GET", "/sale/kicks", map[string]string{"Origin": evil}, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("sale from another origin: %d %v", resp.StatusCode, resp.Header)
	}
	// No CORS on the operator routes, whatever the origin.
	resp, _ = s.do("GET", "/admin/sales", map[string]string{"Origin": shop}, nil)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("the operator routes answered the shop's origin: %d %v", resp.StatusCode, resp.Header)
	}

	// Without --cors-origins no origin is allowed.
	closed := newServer(t)
	resp, _ = closed.do("OPTIONS", "/sale/kicks/status", map[string]string{"Origin": shop, "Access-Control-Request-Method": "GET"}, nil)
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight to a server without --cors-origins: %d %v", resp.StatusCode, resp.Header)
	}
}

func slicesContain(values []string, want string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			if strings.TrimSpace(part) == want {
				return true
			}
		}
	}
	return false
}

// TestSDKInNodeAgainstTheServer runs the SDK in Node against a real
// server, as a storefront's script would: it takes a place, is told its
// turn, reserves with an Idempotency-Key, and the reservation is the
// shopper's on the server. A second shopper, after the stock is gone,
// hears soldout.
func TestSDKInNodeAgainstTheServer(t *testing.T) {
	bin := node(t)
	s := newServer(t)
	s.createSale("kicks", map[string]any{"initialStock": 1})

	run := func(user, then string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "testdata/storefront.js", s.srv.URL, "kicks", s.jwt(user), then)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node storefront.js (%s): %v\n%s", user, err, stderr.Bytes())
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %q: %v", user, out, err)
		}
		return got
	}

	ann := run("ann", "reserve")
	if ann["outcome"] != "reserved" {
		t.Fatalf("ann: %v", ann)
	}
	events := ann["events"].([]any)
	if !containsAll(events, "turn", "reserved") {
		t.Errorf("ann's events: %v", events)
	}
	r := ann["reserve"].(map[string]any)
	id, _ := r["body"].(map[string]any)["reservationId"].(string)
	key, _ := r["key"].(string)
	if r["status"] != float64(201) || id == "" || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(key) {
		t.Fatalf("ann's reserve: %v", r)
	}
	// The reservation is ann's on the server, pending.
	resp, body := s.do("GET", "/reservations/"+id, map[string]string{"Authorization": "Bearer " + s.jwt("ann")}, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"pending"`) {
		t.Fatalf("GET /reservations/%s: %d %s", id, resp.StatusCode, body)
	}
	// Her key, sent again, replays the first answer: a lost answer's
	// retry by the SDK can never buy twice.
	resp, body = s.do("POST", "/sale/kicks/reserve", map[string]string{"Authorization": "Bearer " + s.jwt("ann"),
		"Idempotency-Key": key, "X-Admission-Token": ann["admissionToken"].(string)}, map[string]any{"quantity": 1})
	if resp.StatusCode != 201 || !strings.Contains(string(body), id) {
		t.Errorf("the same key again: %d %s, want the first answer", resp.StatusCode, body)
	}

	// Bo comes after the last unit: sold out, not final while ann's hold
	// may still return it.
	bo := run("bo", "reserve")
	if bo["outcome"] != "soldout" || !containsAll(bo["events"].([]any), "soldout") {
		t.Errorf("bo, after the last unit: %v", bo)
	}
}

func containsAll(events []any, want ...string) bool {
	have := map[string]bool{}
	for _, e := range events {
		have[e.(string)] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

// TestSDKAcrossServers: the SDK holds its place in the shopper's browser,
// never in a server, so it does not mind which server of a fleet answers.
// Two servers over one PostgreSQL and one Redis, each named the shop's
// origin, behind a balancer that alternates between them: the shop's
// preflight is granted by both, and the SDK in Node takes its ticket from
// one, polls both, and reserves on whichever the balancer picks.
func TestSDKAcrossServers(t *testing.T) {
	bin := node(t)
	const shop = "https://shop.example"
	dbURL := testenv.Postgres(t)
	_, prefix := testenv.Redis(t)
	key, err := token.GenerateKey("sdk-fleet")
	if err != nil {
		t.Fatal(err)
	}
	keys := token.FormatKeys([]token.Key{key}) // a ticket signed by one is read by the other
	ctx, cancel := context.WithCancel(context.Background())
	var servers [2]*httptest.Server
	for i := range servers {
		eng, err := engine.Open(ctx, engine.Config{DataDir: t.TempDir(), DatabaseURL: dbURL,
			RedisURL: testenv.RedisURL(), RedisPrefix: prefix, TokenKeys: keys, Source: fmt.Sprintf("sdk-fleet-%d", i),
			GateTimeout: 5 * time.Second, RecordTimeout: 30 * time.Second, CORSOrigins: []string{shop}})
		if err != nil {
			t.Fatal(err)
		}
		eng.Start(ctx)
		servers[i] = httptest.NewServer(eng.Handler)
		t.Cleanup(func() {
			servers[i].Close()
			eng.Stop()
			eng.Close()
		})
	}
	t.Cleanup(cancel)
	var next atomic.Int64
	var mu sync.Mutex
	served := map[string]map[int]bool{} // route -> the servers that answered it
	var proxies [2]*httputil.ReverseProxy
	for i, s := range servers {
		u, _ := url.Parse(s.URL)
		proxies[i] = httputil.NewSingleHostReverseProxy(u)
	}
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(next.Add(1) % 2)
		route := r.Method + " " + regexp.MustCompile(`/res_[^/]+`).ReplaceAllString(r.URL.Path, "/{id}")
		mu.Lock()
		if served[route] == nil {
			served[route] = map[int]bool{}
		}
		served[route][i] = true
		mu.Unlock()
		proxies[i].ServeHTTP(w, r)
	}))
	defer lb.Close()

	// The sale, created on one server, is known to both.
	body := map[string]any{"sku": "kicks", "name": "Kicks", "initialStock": 2, "admissionPerSecond": 50,
		"opensAt": time.Now().UTC().Add(-time.Second).Format(time.RFC3339)}
	b, _ := json.Marshal(body)
	resp, err := http.Post(servers[0].URL+"/admin/sales", "application/json", bytes.NewReader(b))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create sale: %v %v", resp, err)
	}
	resp.Body.Close()

	// Both servers grant the shop's preflight, alike.
	for i, s := range servers {
		req, _ := http.NewRequest("OPTIONS", s.URL+"/sale/kicks/status", nil)
		req.Header.Set("Origin", shop)
		req.Header.Set("Access-Control-Request-Method", "GET")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != shop {
			t.Fatalf("server %d's preflight: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}

	jwt, err := identity.MintHS256([]byte(identity.DevelopmentSecret), "ann", 720*time.Hour, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	run, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	cmd := exec.CommandContext(run, bin, "testdata/storefront.js", lb.URL, "kicks", jwt, "reserve")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node storefront.js: %v\n%s", err, stderr.Bytes())
	}
	var got struct {
		Outcome string
		Events  []string
		Reserve struct {
			Status int
			Body   struct{ ReservationID string }
		}
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Outcome != "reserved" || got.Reserve.Status != 201 {
		t.Fatalf("through the balancer: %s (%v)", out.Bytes(), err)
	}
	// The reservation is ann's, on either server.
	for i, s := range servers {
		req, _ := http.NewRequest("GET", s.URL+"/reservations/"+got.Reserve.Body.ReservationID, nil)
		req.Header.Set("Authorization", "Bearer "+jwt)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("server %d does not know ann's reservation: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	// The place and the purchase (the sale's published view aside) went
	// to both servers: a ticket of one was good at the other.
	used := map[int]bool{}
	for route, by := range served {
		if route != "GET /sale/kicks" {
			for i := range by {
				used[i] = true
			}
		}
	}
	if len(used) != 2 {
		t.Errorf("the SDK's ticket, status and reserve went to one server only: %v", served)
	}
	t.Logf("routes and the servers that answered them: %v", served)
}
