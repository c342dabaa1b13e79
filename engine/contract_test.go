package engine_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
)

// TestContractErrors provokes, over HTTP, every error code of the contract
// that the core sale path answers, and checks status, code and the error's
// shape.
func TestContractErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("shoe", map[string]any{"initialStock": 2, "perUserLimit": 2, "holdSeconds": 60})
		h.createSale("old-accounts", map[string]any{"initialStock": 5, "minAccountAgeSeconds": 86400})
		h.createSale("later", map[string]any{"initialStock": 5, "opensAt": start.Add(time.Hour).Format(time.RFC3339)})
		adm := h.admit("shoe", "alice")
		alice := "Bearer " + h.jwt("alice")

		check := func(name string, r response, status int, code string) {
			t.Helper()
			if r.status != status || r.code() != code {
				t.Errorf("%s: got %d %s, want %d %s", name, r.status, r.body, status, code)
				return
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s: Content-Type %q", name, ct)
			}
			if msg := r.json(t)["error"].(map[string]any)["message"]; msg == "" {
				t.Errorf("%s: empty message", name)
			}
			if (status == 503 || status == 429) && r.header.Get("Retry-After") == "" {
				t.Errorf("%s: %d without Retry-After", name, status)
			}
		}
		reserve := func(hdr map[string]string, body any) response {
			return h.do("POST", "/sale/shoe/reserve", hdr, body)
		}
		full := func(extra map[string]string) map[string]string {
			m := map[string]string{"Authorization": alice, "X-Admission-Token": adm, "Idempotency-Key": fmt.Sprint(time.Now().UnixNano())}
			for k, v := range extra {
				if v == "" {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			return m
		}

		// 400: shape first, even before authentication.
		check("malformed JSON", reserve(map[string]string{"Idempotency-Key": "a"}, `{"quantity":`), 400, "bad_request")
		check("unknown field", reserve(full(nil), `{"quantity":1,"colour":"red"}`), 400, "bad_request")
		check("trailing data", reserve(full(nil), `{"quantity":1} {}`), 400, "bad_request")
		check("missing Idempotency-Key", reserve(map[string]string{"Authorization": alice}, nil), 400, "bad_request")
		check("quantity 0", reserve(full(nil), `{"quantity":0}`), 400, "bad_request")
		check("quantity above perUserLimit", reserve(full(nil), `{"quantity":3}`), 400, "bad_request")
		check("fractional quantity", reserve(full(nil), `{"quantity":1.5}`), 400, "bad_request")
		check("quantity as a string", reserve(full(nil), `{"quantity":"1"}`), 400, "bad_request")
		check("body over 16 KiB", reserve(full(nil), `{"paymentFingerprint":"`+strings.Repeat("x", 17<<10)+`"}`), 413, "too_large")

		// 401.
		check("no JWT", reserve(full(map[string]string{"Authorization": ""}), nil), 401, "unauthenticated")
		check("forged JWT", reserve(full(map[string]string{"Authorization": "Bearer " + h.jwt("alice") + "x"}), nil), 401, "unauthenticated")
		check("expired JWT", func() response {
			tok := h.jwt("alice")
			h.clock.Advance(25 * time.Hour)
			defer h.clock.Advance(-25 * time.Hour)
			return reserve(full(map[string]string{"Authorization": "Bearer " + tok}), nil)
		}(), 401, "unauthenticated")

		// 403 admission.
		check("no admission token", reserve(full(map[string]string{"X-Admission-Token": ""}), nil), 403, "admission_required")
		check("forged admission token", reserve(full(map[string]string{"X-Admission-Token": tamper(adm)}), nil), 403, "admission_invalid")
		check("another shopper's admission", reserve(full(map[string]string{"Authorization": "Bearer " + h.jwt("bob")}), nil), 403, "admission_invalid")
		check("another sale's admission", h.do("POST", "/sale/old-accounts/reserve", full(nil), nil), 403, "admission_invalid")
		check("expired admission", func() response {
			h.clock.Advance(121 * time.Second)
			defer h.clock.Advance(-121 * time.Second)
			return reserve(full(nil), nil)
		}(), 403, "admission_expired")

		// 403 eligibility: at the ticket already, and at reserve.
		young := "Bearer " + h.jwtAged("newbie", time.Hour)
		check("young account at ticket", h.do("GET", "/sale/old-accounts/ticket", map[string]string{"Authorization": young}, nil), 403, "not_eligible")
		oldAdm := h.admit("old-accounts", "newbie")
		check("young account at reserve", h.do("POST", "/sale/old-accounts/reserve",
			map[string]string{"Authorization": young, "X-Admission-Token": oldAdm, "Idempotency-Key": "n1"}, nil), 403, "not_eligible")

		// 409 not open yet.
		check("reserve before the open", h.do("POST", "/sale/later/reserve", map[string]string{"Authorization": alice,
			"X-Admission-Token": h.eng.Tokens.SignAdmission(admissionFor(h.saleOf("later"), "alice", h.clock.Now())),
			"Idempotency-Key":   "early"}, nil), 409, "not_open")

		// 201, then the gate's rejections.
		// Alice's sign-in vouches for card-A, and so does bob's next one.
		first := reserve(full(map[string]string{"Idempotency-Key": "first", "Authorization": "Bearer " + h.jwtCard("alice", "card-A")}), `{"quantity":1}`)
		if first.status != 201 {
			t.Fatalf("first reserve: %d %s", first.status, first.body)
		}
		check("admission already spent", reserve(full(nil), nil), 403, "admission_used")
		check("same key, other body", reserve(full(map[string]string{"Idempotency-Key": "first", "Authorization": "Bearer " + h.jwtCard("alice", "card-A")}), `{"quantity":2}`), 422, "idempotency_key_reused")
		bobAdm := h.admit("shoe", "bob")
		check("instrument already holds", h.do("POST", "/sale/shoe/reserve", map[string]string{"Authorization": "Bearer " + h.jwtCard("bob", "card-A"),
			"X-Admission-Token": bobAdm, "Idempotency-Key": "b1"}, `{"paymentFingerprint":"card-A"}`), 409, "limit_reached")
		carolAdm := h.admit("shoe", "carol")
		check("more than is left", h.do("POST", "/sale/shoe/reserve", map[string]string{"Authorization": "Bearer " + h.jwt("carol"),
			"X-Admission-Token": carolAdm, "Idempotency-Key": "c1"}, `{"quantity":2}`), 409, "sold_out")
		if r := h.do("POST", "/sale/shoe/reserve", map[string]string{"Authorization": "Bearer " + h.jwt("bob"),
			"X-Admission-Token": bobAdm, "Idempotency-Key": "b2"}, nil); r.status != 201 {
			t.Fatalf("bob: %d %s", r.status, r.body)
		}
		daveAdm := h.admit("shoe", "dave")
		check("sold out", h.do("POST", "/sale/shoe/reserve", map[string]string{"Authorization": "Bearer " + h.jwt("dave"),
			"X-Admission-Token": daveAdm, "Idempotency-Key": "d1"}, nil), 409, "sold_out")

		// 503 paused.
		if r := h.do("POST", "/admin/sales/shoe/pause", nil, map[string]string{"reason": "checking stock"}); r.status != 200 {
			t.Fatalf("pause: %d %s", r.status, r.body)
		}
		check("paused", h.do("POST", "/sale/shoe/reserve", map[string]string{"Authorization": "Bearer " + h.jwt("dave"),
			"X-Admission-Token": daveAdm, "Idempotency-Key": "d2"}, nil), 503, "sale_paused")

		// Reservation routes.
		rid := first.json(t)["reservationId"].(string)
		check("unknown reservation", h.do("GET", "/reservations/res_nope", map[string]string{"Authorization": alice}, nil), 404, "not_found")
		check("another shopper's reservation", h.do("POST", "/reservations/"+rid+"/confirm",
			map[string]string{"Authorization": "Bearer " + h.jwt("bob")}, `{"paymentRef":"x"}`), 404, "not_found")
		check("confirm without JWT", h.do("POST", "/reservations/"+rid+"/confirm", nil, `{"paymentRef":"x"}`), 401, "unauthenticated")

		// Waiting room.
		check("forged ticket", h.do("GET", "/sale/shoe/status?token=tkt_forged", nil, nil), 401, "invalid_token")
		check("no ticket", h.do("GET", "/sale/shoe/status", nil, nil), 401, "invalid_token")
		check("ticket of another sale", h.do("GET", "/sale/shoe/status?token="+h.ticket("later", "alice"), nil, nil), 401, "invalid_token")
		check("ticket without JWT", h.do("GET", "/sale/shoe/ticket", nil, nil), 401, "unauthenticated")
		check("unknown sale", h.do("GET", "/sale/nope", nil, nil), 404, "not_found")

		// Operator routes.
		check("PATCH without If-Match", h.do("PATCH", "/admin/sales/shoe", nil, `{"name":"x"}`), 428, "precondition_required")
		check("PATCH with a stale version", h.do("PATCH", "/admin/sales/shoe", map[string]string{"If-Match": `"1"`}, `{"name":"x"}`), 412, "version_conflict")
		check("PATCH of a field that cannot change", h.do("PATCH", "/admin/sales/later", map[string]string{"If-Match": "1"}, `{"fairness":"random"}`), 400, "bad_request")
		check("rebuild while open", h.do("POST", "/admin/sales/later/rebuild", nil, nil), 409, "not_paused")
		check("create with a bad fairness", h.do("POST", "/admin/sales", nil, map[string]any{"sku": "x", "initialStock": 1,
			"opensAt": start.Format(time.RFC3339), "fairness": "bribes"}), 400, "bad_request")
		check("create without opensAt", h.do("POST", "/admin/sales", nil, map[string]any{"sku": "x", "initialStock": 1}), 400, "bad_request")
		check("create a second live sale of a SKU", h.do("POST", "/admin/sales", nil, map[string]any{"sku": "shoe", "initialStock": 1,
			"opensAt": start.Format(time.RFC3339)}), 409, "sale_exists")
		check("ship without If-Match", h.do("POST", "/admin/orders/ord_x/ship", nil, nil), 428, "precondition_required")
		check("ship an unknown order", h.do("POST", "/admin/orders/ord_x/ship", map[string]string{"If-Match": "1"}, nil), 404, "not_found")
		check("wrong method", h.do("PUT", "/sale/shoe/reserve", nil, nil), 405, "method_not_allowed")
		check("unknown route", h.do("GET", "/nowhere", nil, nil), 404, "not_found")
		check("a dot segment", h.do("GET", "/reservations/.", map[string]string{"Authorization": alice}, nil), 404, "not_found")
		check("a doubled slash", h.do("GET", "/sale//shoe", nil, nil), 404, "not_found")
	})
}

// ticket returns a ticket token of the shopper for the sale.
func (h *harness) ticket(sku, user string) string {
	h.t.Helper()
	r := h.do("GET", "/sale/"+sku+"/ticket", map[string]string{"Authorization": "Bearer " + h.jwt(user)}, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("ticket: %d %s", r.status, r.body)
	}
	return r.json(h.t)["token"].(string)
}

// TestOperatorRoutes drives create, list, show, PATCH with If-Match, pause,
// resume, rebuild, orders and ship, and the admin token.
func TestOperatorRoutes(t *testing.T) {
	h := newHarness(t, backends[0], func(c *engine.Config) { c.AdminToken = "s3cret" })
	admin := map[string]string{"Authorization": "Bearer s3cret"}
	if r := h.do("GET", "/admin/sales", nil, nil); r.status != 401 || r.code() != "unauthenticated" {
		t.Fatalf("no admin token: %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/admin/sales", map[string]string{"Authorization": "Bearer wrong"}, nil); r.status != 401 {
		t.Fatalf("wrong admin token: %d %s", r.status, r.body)
	}
	r := h.do("POST", "/admin/sales", admin, map[string]any{"sku": "lamp", "name": "Lamp", "initialStock": 4,
		"opensAt": start.Add(time.Minute).Format(time.RFC3339)})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	sale := r.json(t)
	if sale["saleId"] == "" || sale["version"].(float64) != 1 || sale["state"] != "scheduled" || sale["holdSeconds"].(float64) != 600 ||
		sale["perUserLimit"].(float64) != 1 || sale["fairness"] != "fifo" {
		t.Fatalf("created sale: %v", sale)
	}
	r = h.do("PATCH", "/admin/sales/lamp", map[string]string{"Authorization": "Bearer s3cret", "If-Match": "1"},
		map[string]any{"name": "Desk lamp", "initialStock": 6})
	if r.status != 200 || r.json(t)["version"].(float64) != 2 || r.json(t)["initialStock"].(float64) != 6 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if r := h.do("PATCH", "/admin/sales/lamp", map[string]string{"Authorization": "Bearer s3cret", "If-Match": "1"},
		map[string]any{"name": "Stale"}); r.status != 412 {
		t.Fatalf("stale patch: %d %s", r.status, r.body)
	}
	if got := h.do("GET", "/admin/sales/lamp", admin, nil).json(t)["name"]; got != "Desk lamp" {
		t.Fatalf("the stale patch changed the name to %v", got)
	}
	h.clock.Advance(time.Minute)
	if err := h.eng.Warmer.WarmOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := h.do("PATCH", "/admin/sales/lamp", map[string]string{"Authorization": "Bearer s3cret", "If-Match": `"2"`},
		map[string]any{"initialStock": 9}); r.status != 409 || r.code() != "invalid_state" {
		t.Fatalf("stock change after the open: %d %s", r.status, r.body)
	}
	v := h.do("GET", "/admin/sales/lamp", admin, nil).json(t)
	if v["state"] != "open" || v["counter"].(float64) != 6 || v["gate"] != "loaded" || v["warm"] != true {
		t.Fatalf("open sale view: %v", v)
	}
	res := h.reserve("lamp", "alice", h.admit("lamp", "alice"), "k", nil)
	rid := res.json(t)["reservationId"].(string)
	order := h.do("POST", "/reservations/"+rid+"/confirm", map[string]string{"Authorization": "Bearer " + h.jwt("alice")},
		map[string]string{"paymentRef": "p"}).json(t)["orderId"].(string)
	orders := h.do("GET", "/admin/orders?sku=lamp", admin, nil).json(t)["orders"].([]any)
	if len(orders) != 1 || orders[0].(map[string]any)["orderId"] != order || orders[0].(map[string]any)["userId"] != "alice" ||
		orders[0].(map[string]any)["state"] != "confirmed" || orders[0].(map[string]any)["sku"] != "lamp" {
		t.Fatalf("orders: %v", orders)
	}
	shipped := h.do("POST", "/admin/orders/"+order+"/ship", map[string]string{"Authorization": "Bearer s3cret", "If-Match": "1"}, nil)
	if shipped.status != 200 || shipped.json(t)["state"] != "shipped" || shipped.json(t)["version"].(float64) != 2 {
		t.Fatalf("ship: %d %s", shipped.status, shipped.body)
	}
	if r := h.do("POST", "/admin/orders/"+order+"/ship", map[string]string{"Authorization": "Bearer s3cret", "If-Match": "1"}, nil); r.status != 412 {
		t.Fatalf("stale ship: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/admin/sales/lamp/pause", admin, map[string]string{"reason": "supplier recall"}); r.status != 200 ||
		r.json(t)["state"] != "paused" || r.json(t)["pauseReason"] != "supplier recall" {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/admin/sales/lamp/rebuild", admin, nil); r.status != 200 || r.json(t)["epoch"].(float64) != 2 {
		t.Fatalf("rebuild: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/admin/sales/lamp/resume", admin, nil); r.status != 200 || r.json(t)["state"] != "open" {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	list := h.do("GET", "/admin/sales", admin, nil).json(t)["sales"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["counter"].(float64) != 5 || list[0].(map[string]any)["confirmed"].(float64) != 1 {
		t.Fatalf("list: %v", list)
	}
	audit := h.do("GET", "/admin/sales/lamp/audit", admin, nil).json(t)["entries"].([]any)
	ops := []string{}
	for _, e := range audit {
		ops = append(ops, e.(map[string]any)["op"].(string))
	}
	if strings.Join(ops, ",") != "load,reserve,pause,rebuild,resume" {
		t.Fatalf("audit ops %v", ops)
	}
}

// tamper changes one character in the middle of a token's signature.
func tamper(tok string) string {
	i := len(tok) - 6
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}
