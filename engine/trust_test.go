package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
)

// trustRecords are the backends whose record differs, with the in-process gate:
// what the trust boundaries decide is the HTTP layer's, and every record
// must be behind it alike.
var trustRecords = []backend{backends[0], backends[2]}

func forEachTrustRecord(t *testing.T, scenario func(t *testing.T, b backend)) {
	for _, b := range trustRecords {
		t.Run(b.name, func(t *testing.T) { scenario(t, b) })
	}
}

// forged sends a request shaped exactly as given, Host, headers and body,
// as a browser, an attacker or curl would send it.
func (h *harness) forged(method, path, host string, headers map[string]string, body string) response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
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

// TestAdminWithoutTokenRefusesWebPages is issue 21's first attack: with no
// --admin-token, a page of another site open in the operator's browser
// created, paused and read sales (a cross-site POST as text/plain, a
// DNS-rebinding page reading the admin API under its own name). Each of
// those is refused now; curl and a page of the server's own origin (the
// console) still work.
func TestAdminWithoutTokenRefusesWebPages(t *testing.T) {
	forEachTrustRecord(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		own := strings.TrimPrefix(h.srv.URL, "http://")
		port := own[strings.LastIndexByte(own, ':'):]
		sale := func(sku string) string {
			return `{"sku":"` + sku + `","name":"Drop","initialStock":5,"opensAt":"` + start.Format(time.RFC3339) + `"}`
		}
		jsonType := map[string]string{"Content-Type": "application/json"}
		attacks := []struct {
			name    string
			method  string
			path    string
			host    string
			headers map[string]string
			body    string
			status  int
			code    string
		}{
			{"cross-site form post as text/plain", "POST", "/admin/sales", "",
				map[string]string{"Content-Type": "text/plain", "Origin": "https://attacker.example"}, sale("evil-1"), 403, "forbidden"},
			{"text/plain post without an Origin", "POST", "/admin/sales", "",
				map[string]string{"Content-Type": "text/plain"}, sale("evil-2"), 415, "unsupported_media_type"},
			{"urlencoded form post", "POST", "/admin/sales", "",
				map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, sale("evil-3"), 415, "unsupported_media_type"},
			{"JSON from another origin", "POST", "/admin/sales", "",
				map[string]string{"Content-Type": "application/json", "Origin": "https://attacker.example"}, sale("evil-4"), 403, "forbidden"},
			{"DNS rebinding creates", "POST", "/admin/sales", "attacker.example" + port, jsonType, sale("evil-5"), 403, "forbidden"},
			{"DNS rebinding reads", "GET", "/admin/sales", "attacker.example" + port, nil, "", 403, "forbidden"},
			{"DNS rebinding reads the metrics", "GET", "/metrics", "attacker.example" + port, nil, "", 403, "forbidden"},
			{"0.0.0.0 reads", "GET", "/admin/sales", "0.0.0.0" + port, nil, "", 403, "forbidden"},
			{"cross-site GET", "GET", "/admin/sales", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403, "forbidden"},
			{"pause from another origin", "POST", "/admin/sales/kept/pause", "",
				map[string]string{"Origin": "https://attacker.example"}, "", 403, "forbidden"},
			{"pause as text/plain", "POST", "/admin/sales/kept/pause", "",
				map[string]string{"Content-Type": "text/plain"}, `{"reason":"x"}`, 415, "unsupported_media_type"},
		}
		h.createSale("kept", nil)
		for _, a := range attacks {
			r := h.forged(a.method, a.path, a.host, a.headers, a.body)
			if r.status != a.status || r.code() != a.code {
				t.Errorf("%s: %d %s, want %d %s", a.name, r.status, r.body, a.status, a.code)
			}
		}
		var list struct {
			Sales []struct {
				SKU   string `json:"sku"`
				State string `json:"state"`
			} `json:"sales"`
		}
		r := h.forged("GET", "/admin/sales", "", nil, "")
		if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		if len(list.Sales) != 1 || list.Sales[0].SKU != "kept" || list.Sales[0].State != "open" {
			t.Fatalf("after the attacks the sales are %+v, want kept alone, open", list.Sales)
		}

		// What the operator does still works: curl on loopback, by
		// address or by name, and the console, a page of this origin.
		if r := h.forged("POST", "/admin/sales", "", jsonType, sale("curl")); r.status != 201 {
			t.Errorf("curl create: %d %s", r.status, r.body)
		}
		if r := h.forged("POST", "/admin/sales/curl/pause", "", nil, ""); r.status != 200 {
			t.Errorf("curl pause, no body: %d %s", r.status, r.body)
		}
		console := map[string]string{"Content-Type": "application/json", "Origin": "http://localhost" + port,
			"Sec-Fetch-Site": "same-origin"}
		if r := h.forged("POST", "/admin/sales", "localhost"+port, console, sale("console")); r.status != 201 {
			t.Errorf("console create: %d %s", r.status, r.body)
		}
		if r := h.forged("GET", "/admin/sales/console", "localhost"+port, map[string]string{"Sec-Fetch-Site": "same-origin"}, ""); r.status != 200 {
			t.Errorf("console read: %d %s", r.status, r.body)
		}
		if r := h.forged("GET", "/metrics", "", nil, ""); r.status != 200 {
			t.Errorf("metrics on loopback: %d", r.status)
		}
	})
}

// TestAdminWithTokenUnchanged: with an admin token, the token is what
// decides, as before: a request that carries it is served whatever its
// Origin or type, and one without it is 401, /metrics included.
func TestAdminWithTokenUnchanged(t *testing.T) {
	forEachTrustRecord(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, func(c *engine.Config) { c.AdminToken = "operator-token-of-24-bytes+" })
		body := `{"sku":"tok","name":"Drop","initialStock":5,"opensAt":"` + start.Format(time.RFC3339) + `"}`
		if r := h.forged("POST", "/admin/sales", "", map[string]string{"Content-Type": "text/plain",
			"Origin": "https://tooling.example"}, body); r.status != 401 {
			t.Errorf("without the token: %d %s", r.status, r.body)
		}
		if r := h.forged("POST", "/admin/sales", "ops.internal:8080", map[string]string{"Content-Type": "text/plain",
			"Origin": "https://tooling.example", "Authorization": "Bearer operator-token-of-24-bytes+"}, body); r.status != 201 {
			t.Errorf("with the token: %d %s", r.status, r.body)
		}
		if r := h.forged("GET", "/metrics", "", nil, ""); r.status != 401 || r.code() != "unauthenticated" {
			t.Errorf("/metrics without the token: %d %s", r.status, r.body)
		}
		if r := h.forged("GET", "/metrics", "", map[string]string{"Authorization": "Bearer operator-token-of-24-bytes+"}, ""); r.status != 200 {
			t.Errorf("/metrics with the token: %d", r.status)
		}
	})
}

// shopperJWT signs claims with the harness's configured secret.
func shopperJWT(t *testing.T, secret string, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const trustSecret = "a-shop-secret-of-at-least-32-bytes!!"

// TestShopperJWTAudienceIssuerLifetime is issue 21's identity attack: a
// JWT the shop's identity service issued for another audience or by
// another issuer, or one that lives for a year, was accepted. With
// --user-jwt-audience, --user-jwt-issuer and the maximum lifetime, each is
// 401 unauthenticated, at the waiting room and on the purchase path.
func TestShopperJWTAudienceIssuerLifetime(t *testing.T) {
	forEachTrustRecord(t, func(t *testing.T, b backend) {
		h := newHarness(t, b, func(c *engine.Config) {
			c.UserJWTSecret, c.UserJWTAudience, c.UserJWTIssuer = trustSecret, "flashsale", "https://id.shop.example"
		})
		h.createSale("aud", nil)
		now := h.clock.Now()
		claims := func(change jwt.MapClaims) jwt.MapClaims {
			c := jwt.MapClaims{"sub": "alice", "aud": "flashsale", "iss": "https://id.shop.example",
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "acct_created": now.Add(-720 * time.Hour).Unix()}
			for k, v := range change {
				if v == nil {
					delete(c, k)
				} else {
					c[k] = v
				}
			}
			return c
		}
		refused := map[string]jwt.MapClaims{
			"another audience":  {"aud": "accounts"},
			"no audience":       {"aud": nil},
			"another issuer":    {"iss": "https://id.attacker.example"},
			"no issuer":         {"iss": nil},
			"a year long":       {"exp": now.Add(365 * 24 * time.Hour).Unix()},
			"a year, no iat":    {"iat": nil, "exp": now.Add(365 * 24 * time.Hour).Unix()},
			"issued in future":  {"iat": now.Add(time.Hour).Unix(), "exp": now.Add(2 * time.Hour).Unix()},
			"a day and a bit":   {"exp": now.Add(25 * time.Hour).Unix()},
			"one of a list not": {"aud": []string{"accounts", "mail"}},
		}
		for name, change := range refused {
			auth := map[string]string{"Authorization": "Bearer " + shopperJWT(t, trustSecret, claims(change))}
			if r := h.do("GET", "/sale/aud/ticket", auth, nil); r.status != 401 || r.code() != "unauthenticated" {
				t.Errorf("%s, ticket: %d %s", name, r.status, r.body)
			}
			auth["Idempotency-Key"] = "k-" + strings.ReplaceAll(name, " ", "-")
			if r := h.do("POST", "/sale/aud/reserve", auth, nil); r.status != 401 || r.code() != "unauthenticated" {
				t.Errorf("%s, reserve: %d %s", name, r.status, r.body)
			}
		}
		good := map[string]string{"Authorization": "Bearer " + shopperJWT(t, trustSecret, claims(nil))}
		if r := h.do("GET", "/sale/aud/ticket", good, nil); r.status != 200 {
			t.Fatalf("a token that keeps to everything: %d %s", r.status, r.body)
		}
		listed := map[string]string{"Authorization": "Bearer " + shopperJWT(t, trustSecret,
			claims(jwt.MapClaims{"sub": "bob", "aud": []string{"accounts", "flashsale"}}))}
		if r := h.do("GET", "/sale/aud/ticket", listed, nil); r.status != 200 {
			t.Fatalf("the audience in a list: %d %s", r.status, r.body)
		}
	})
}

// TestEdgeVerifiesAudience: an edge verifies shopper JWTs with the same
// rules as the origin.
func TestEdgeVerifiesAudience(t *testing.T) {
	h := newHarness(t, backends[1], func(c *engine.Config) {
		c.AdminToken, c.UserJWTSecret, c.UserJWTAudience = "edge-secret-of-24-bytes-or-more", trustSecret, "flashsale"
	})
	if r := h.do("POST", "/admin/sales", map[string]string{"Authorization": "Bearer edge-secret-of-24-bytes-or-more"},
		map[string]any{"sku": "edgy", "initialStock": 2, "opensAt": start.Format(time.RFC3339)}); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	edge, err := engine.Open(context.Background(), engine.Config{
		Role: "edge", RedisURL: testenv.RedisURL(), RedisPrefix: h.prefix, OriginURL: h.srv.URL,
		OriginToken: "edge-secret-of-24-bytes-or-more", TokenKeys: tokenKeysOf(t, h), Now: h.clock.Now,
		DataDir: t.TempDir(), UserJWTSecret: trustSecret, UserJWTAudience: "flashsale",
		AdminToken: "edge-metrics-token-of-24-bytes",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Close()
	esrv := httptest.NewServer(edge.Handler)
	defer esrv.Close()
	if err := edge.Edge.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	for aud, want := range map[string]int{"accounts": 401, "flashsale": 200} {
		tok := shopperJWT(t, trustSecret, jwt.MapClaims{"sub": "eve-" + aud, "aud": aud, "iat": now.Unix(),
			"exp": now.Add(time.Hour).Unix()})
		req, _ := http.NewRequest("GET", esrv.URL+"/sale/edgy/ticket", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("edge, aud %s: %d, want %d", aud, resp.StatusCode, want)
		}
	}
	// The edge's /metrics is behind its admin token when it has one.
	for token, want := range map[string]int{"": 401, "edge-metrics-token-of-24-bytes": 200} {
		req, _ := http.NewRequest("GET", esrv.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("edge /metrics, token %q: %d, want %d", token, resp.StatusCode, want)
		}
	}
}

// TestMetricsHideUnpublishedSales is issue 21's metrics attack: /metrics
// listed every sale's SKU, one not yet announced included, with live
// figures. A series labelled with the SKU of a sale that has not opened is
// now left out of every /metrics answered without the admin token, and
// shown to the operator who sends it.
func TestMetricsHideUnpublishedSales(t *testing.T) {
	forEachTrustRecord(t, func(t *testing.T, b backend) {
		for _, token := range []string{"", "operator-token-of-24-bytes+"} {
			h := newHarness(t, b, func(c *engine.Config) { c.AdminToken = token })
			auth := map[string]string{}
			if token != "" {
				auth["Authorization"] = "Bearer " + token
			}
			h.do("POST", "/admin/sales", auth, map[string]any{"sku": "secret-drop", "initialStock": 5,
				"opensAt": start.Add(time.Hour).Format(time.RFC3339)})
			h.do("POST", "/admin/sales", auth, map[string]any{"sku": "live-drop", "initialStock": 5,
				"opensAt": start.Format(time.RFC3339)})
			// A pause gives each sale a series of its own.
			for _, sku := range []string{"secret-drop", "live-drop"} {
				if r := h.do("POST", "/admin/sales/"+sku+"/pause", auth, map[string]string{"reason": "check"}); r.status != 200 {
					t.Fatalf("pause %s: %d %s", sku, r.status, r.body)
				}
			}
			public := h.eng.MetricsHandler
			rec := httptest.NewRecorder()
			public.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if body := rec.Body.String(); strings.Contains(body, "secret-drop") || !strings.Contains(body, `sku="live-drop"`) {
				t.Errorf("token %q, the listener apart: secret-drop shown %t, live-drop shown %t", token,
					strings.Contains(body, "secret-drop"), strings.Contains(body, `sku="live-drop"`))
			}
			r := h.forged("GET", "/metrics", "", auth, "")
			body := string(r.body)
			if token == "" && (strings.Contains(body, "secret-drop") || !strings.Contains(body, `sku="live-drop"`)) {
				t.Errorf("no token, /metrics on the main listener: secret-drop shown %t, live-drop shown %t",
					strings.Contains(body, "secret-drop"), strings.Contains(body, `sku="live-drop"`))
			}
			if token != "" && !strings.Contains(body, `sku="secret-drop"`) {
				t.Errorf("the operator's /metrics (with the token) leaves out the scheduled sale")
			}
			// Once it opens, it is published.
			h.clock.Advance(time.Hour)
			rec = httptest.NewRecorder()
			public.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if !strings.Contains(rec.Body.String(), `sku="secret-drop"`) {
				t.Errorf("token %q: the sale opened, and its series are still left out", token)
			}
		}
	})
}
