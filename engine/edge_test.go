package engine_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestEdgeServesTheWaitingRoom: an edge answers the sale, tickets and
// polls from signed tokens and snapshots it fetches from the origin (and
// the queue it shares with it in Redis), never reaching the gate or the
// record; shoppers it admits reserve at the origin; sold out reaches its
// pollers at its next refresh; with the origin gone it says "come back
// shortly", never passes through.
func TestEdgeServesTheWaitingRoom(t *testing.T) {
	h := newHarness(t, backends[1], func(c *engine.Config) { c.AdminToken = "edge-secret" })
	admin := map[string]string{"Authorization": "Bearer edge-secret"}
	if r := h.do("POST", "/admin/sales", admin, map[string]any{"sku": "kicks", "initialStock": 2,
		"opensAt": start.Format(time.RFC3339), "display": map[string]any{"title": "Kicks", "brandColor": "#c8102e"}}); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	edge, err := engine.Open(context.Background(), engine.Config{
		Role: "edge", RedisURL: testenv.RedisURL(), RedisPrefix: h.prefix, OriginURL: h.srv.URL,
		OriginToken: "edge-secret", EdgeID: "edge-1", TokenKeys: tokenKeysOf(t, h), Now: h.clock.Now,
		DataDir: t.TempDir(), RoomSaleInFlight: 1, RoomInFlightWait: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Close()
	if edge.Store != nil || edge.Gate != nil {
		t.Fatal("an edge must not hold the record or the gate")
	}
	esrv := httptest.NewServer(edge.Handler)
	defer esrv.Close()
	ctx := context.Background()
	if err := edge.Edge.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(path string, hdr map[string]string) response {
		req, _ := http.NewRequest("GET", esrv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return response{status: resp.StatusCode, header: resp.Header, body: body}
	}
	if r := get("/sale/kicks", nil); r.status != 200 || r.json(t)["state"] != "open" {
		t.Fatalf("sale at the edge: %d %s", r.status, r.body)
	} else if d, _ := r.json(t)["display"].(map[string]any); d["title"] != "Kicks" || d["brandColor"] != "#c8102e" {
		t.Fatalf("the edge publishes the display %v", r.json(t)["display"])
	}
	if r := get("/sale/kicks/reserve", nil); r.status != 405 && r.status != 404 {
		t.Fatalf("the edge must not serve the purchase path: %d", r.status)
	}
	// Two shoppers through the edge, reserving at the origin.
	var polls []string
	for _, u := range []string{"ann", "ben", "cat"} {
		r := get("/sale/kicks/ticket", map[string]string{"Authorization": "Bearer " + h.jwt(u)})
		if r.status != 200 {
			t.Fatalf("ticket at the edge: %d %s", r.status, r.body)
		}
		polls = append(polls, r.json(t)["token"].(string))
	}
	// The edge bounds a sale's waiting-room work as the origin does.
	crowd, ok := edge.RoomInFlight.Acquire(ctx, "kicks")
	if !ok {
		t.Fatal("the edge's room slot was shed")
	}
	if r := get("/sale/kicks/status?token="+polls[0], nil); r.status != http.StatusServiceUnavailable || r.code() != "overloaded" {
		t.Fatalf("a poll at the edge past the sale's share: %d %s, want 503 overloaded", r.status, r.body)
	}
	crowd()
	for i, u := range []string{"ann", "ben"} {
		st := get("/sale/kicks/status?token="+polls[i], nil).json(t)
		if st["state"] != "admitted" {
			t.Fatalf("%s at the edge: %v", u, st)
		}
		if r := h.reserve("kicks", u, st["admissionToken"].(string), "k", nil); r.status != 201 {
			t.Fatalf("%s reserves at the origin with the edge's admission: %d %s", u, r.status, r.body)
		}
	}
	// Sold out reaches the edge's pollers at its next refresh.
	h.clock.Advance(time.Second)
	if err := edge.Edge.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if st := get("/sale/kicks/status?token="+polls[2], nil).json(t); st["state"] != "sold_out" || st["final"] != false {
		t.Fatalf("after the last unit, at the edge: %v", st)
	}
	if v := h.do("GET", "/admin/sales/kicks", admin, nil).json(t); len(v["edges"].([]any)) != 1 {
		t.Fatalf("the origin does not list the edge: %v", v["edges"])
	}
	// The origin goes away: the edge says come back shortly.
	h.srv.Close()
	h.clock.Advance(5 * time.Second)
	r := get("/sale/kicks/status?token="+polls[2], nil)
	if r.status != 503 || r.header.Get("Retry-After") == "" || r.code() != "unavailable" {
		t.Fatalf("with the origin gone: %d %s", r.status, r.body)
	}
}

// tokenKeysOf returns the origin's waiting-room keys, which an edge shares.
func tokenKeysOf(t *testing.T, h *harness) string {
	t.Helper()
	b, err := readFile(h.eng.Config.DataDir + "/token-keys")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
