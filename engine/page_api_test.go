package engine_test

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
)

// TestCountdownFigures: the waiting-room page counts down from times
// relative to the server's clock, never trusting the device's: the sale
// and a scheduled status carry opensInSeconds, a pending reservation
// expiresIn. The reserve answer does not, since a replay repeats it byte
// for byte.
func TestCountdownFigures(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("clock", map[string]any{"opensAt": start.Add(90 * time.Second).Format(time.RFC3339), "holdSeconds": 300})
	if v := h.do("GET", "/sale/clock", nil, nil).json(t); v["opensInSeconds"] != 90.0 {
		t.Fatalf("sale before the open: %v", v)
	}
	tok, _ := h.ticketOf("clock", "ann")
	h.clock.Advance(30 * time.Second)
	if st := h.status("clock", tok); st["state"] != "scheduled" || st["opensInSeconds"] != 60.0 {
		t.Fatalf("status before the open: %v", st)
	}
	h.clock.Advance(time.Minute)
	h.warm()
	if v := h.do("GET", "/sale/clock", nil, nil).json(t); v["opensInSeconds"] != nil {
		t.Fatalf("an open sale has no countdown: %v", v)
	}
	st := h.status("clock", tok)
	if st["state"] != "admitted" {
		t.Fatalf("status at the open: %v", st)
	}
	r := h.reserve("clock", "ann", st["admissionToken"].(string), "k1", nil)
	if r.status != 201 || r.json(t)["expiresIn"] != nil {
		t.Fatalf("reserve: %d %s", r.status, r.body)
	}
	id := r.json(t)["reservationId"].(string)
	h.clock.Advance(10 * time.Second)
	auth := map[string]string{"Authorization": "Bearer " + h.jwt("ann")}
	if v := h.do("GET", "/reservations/"+id, auth, nil).json(t); v["state"] != "pending" || v["expiresIn"] != 290.0 {
		t.Fatalf("pending reservation: %v", v)
	}
	if r := h.do("POST", "/reservations/"+id+"/confirm", auth, map[string]any{"paymentRef": "p"}); r.status != 200 {
		t.Fatalf("confirm: %d %s", r.status, r.body)
	}
	if v := h.do("GET", "/reservations/"+id, auth, nil).json(t); v["expiresIn"] != nil {
		t.Fatalf("a confirmed reservation has no countdown: %v", v)
	}
}

// TestDemoTokenRoute: GET /demo/token mints development shopper JWTs only
// for a demo engine verifying shoppers with the development key.
func TestDemoTokenRoute(t *testing.T) {
	plain := newHarness(t, backends[0])
	if r := plain.do("GET", "/demo/token?user=ann", nil, nil); r.status != 404 {
		t.Fatalf("without Demo: %d %s", r.status, r.body)
	}
	keyed := newHarness(t, backends[0], func(c *engine.Config) {
		c.Demo, c.UserJWTSecret = true, "a-real-secret-that-is-long-enough-0123456789"
	})
	if r := keyed.do("GET", "/demo/token?user=ann", nil, nil); r.status != 404 {
		t.Fatalf("Demo with a real key must not mint: %d %s", r.status, r.body)
	}
	demo := newHarness(t, backends[0], func(c *engine.Config) { c.Demo = true })
	for _, bad := range []string{"", "a%20b", "%3Cscript%3E"} {
		if r := demo.do("GET", "/demo/token?user="+bad, nil, nil); r.status != 400 || r.code() != "bad_request" {
			t.Fatalf("user %q: %d %s", bad, r.status, r.body)
		}
	}
	r := demo.do("GET", "/demo/token?user=ann", nil, nil)
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("demo token: %d %s", r.status, r.body)
	}
	v, err := identity.NewHS256([]byte(identity.DevelopmentSecret))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := v.Verify("Bearer "+r.json(t)["token"].(string), demo.clock.Now())
	if err != nil || sh.UserID != "ann" || sh.AccountCreated.IsZero() {
		t.Fatalf("the demo token: %+v %v", sh, err)
	}
	// And it takes a place like any shopper's.
	demo.createSale("demo", nil)
	if r := demo.do("GET", "/sale/demo/ticket", map[string]string{"Authorization": "Bearer " + r.json(t)["token"].(string)}, nil); r.status != 200 {
		t.Fatalf("ticket with the demo token: %d %s", r.status, r.body)
	}
}
