package engine_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/challenge"
)

// TestOneCardOneWin: fifty accounts sharing one payment instrument (their
// sign-ins vouch for the same card), reserving at once, win once between
// them: the instrument check is in the gate's atomic step, like the
// per-user check.
func TestOneCardOneWin(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("gpu", map[string]any{"initialStock": 100})
		adms := make([]string, 50)
		for i := range adms {
			adms[i] = h.admit("gpu", fmt.Sprintf("acct-%d", i))
		}
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range adms {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r := h.reserveAs("gpu", h.jwtCard(fmt.Sprintf("acct-%d", i), "card-shared"), adms[i], "k", nil)
				switch {
				case r.status == 201:
					won.Add(1)
				case r.code() == "limit_reached", r.code() == "rate_limited":
				default:
					t.Errorf("acct-%d: %d %s", i, r.status, r.body)
				}
			}(i)
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("%d wins on one card, want 1", won.Load())
		}
		if counter, totals := h.exact("gpu"); counter != 99 || totals.Pending != 1 {
			t.Fatalf("counter %d pending %d", counter, totals.Pending)
		}
	})
}

// TestRateLimitsByAccountAndCard: the budgets are per account and per card,
// not per address; a spent one is 429 rate_limited with Retry-After, and it
// refills with time.
func TestRateLimitsByAccountAndCard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("tee", map[string]any{"initialStock": 1})
		// The one unit is held: everyone else is told sold out, not final.
		h.reserve("tee", "taker", h.admit("tee", "taker"), "k", nil)
		adm := h.admit("tee", "hammer")
		for i := 0; i < 5; i++ { // the burst: told sold out, but let through
			if r := h.reserve("tee", "hammer", adm, fmt.Sprint("k", i), nil); r.code() != "sold_out" {
				t.Fatalf("attempt %d: %d %s", i, r.status, r.body)
			}
		}
		r := h.reserve("tee", "hammer", adm, "k-over", nil)
		if r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
			t.Fatalf("beyond the budget: %d %s", r.status, r.body)
		}
		if r := h.reserve("tee", "patient", h.admit("tee", "patient"), "k", nil); r.code() != "sold_out" {
			t.Fatalf("another account: %d %s", r.status, r.body)
		}
		h.clock.Advance(2 * time.Second)
		if r := h.reserve("tee", "hammer", adm, "k-later", nil); r.code() != "sold_out" {
			t.Fatalf("after the budget refilled: %d %s", r.status, r.body)
		}
		// A card's budget is shared by every account that uses it. (The sale
		// is sold out, so the room admits no one; the tokens are minted as
		// it would have.)
		for i := 0; i < 5; i++ {
			u := fmt.Sprintf("mule-%d", i)
			if r := h.reserveAs("tee", h.jwtCard(u, "card-x"), h.admitPaused("tee", u), "k", nil); r.code() != "sold_out" {
				t.Fatalf("%s: %d %s", u, r.status, r.body)
			}
		}
		if r := h.reserveAs("tee", h.jwtCard("mule-9", "card-x"), h.admitPaused("tee", "mule-9"), "k", nil); r.code() != "rate_limited" {
			t.Fatalf("a fresh account on a spent card: %d %s", r.status, r.body)
		}
	})
}

// TestChallengeAtAdmission: a sale with challengeBits asks the admitted
// shopper for a proof of work before the admission; harder for a young
// account; a wrong nonce fails without spending the salt; a salt is
// accepted once; the JSON API works as the page does.
func TestChallengeAtAdmission(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("pow", map[string]any{"initialStock": 5, "challengeBits": 8})
		if pub := h.do("GET", "/sale/pow", nil, nil).json(t); pub["policy"].(map[string]any)["challenge"] != true {
			t.Fatalf("published policy: %v", pub["policy"])
		}
		tok, _ := h.ticketOf("pow", "alice")
		st := h.status("pow", tok)
		if st["state"] != "challenge" {
			t.Fatalf("status: %v", st)
		}
		c := st["challenge"].(map[string]any)
		salt, bits := c["salt"].(string), int(c["difficultyBits"].(float64))
		if c["algorithm"] != "sha256" || bits != 8 || c["expiresIn"].(float64) < 60 {
			t.Fatalf("challenge %v", c)
		}
		// A young account is asked more.
		youngTok := func() string {
			r := h.do("GET", "/sale/pow/ticket", map[string]string{"Authorization": "Bearer " + h.jwtAged("fresh", time.Hour)}, nil)
			return r.json(t)["token"].(string)
		}()
		if yc := h.status("pow", youngTok)["challenge"].(map[string]any); int(yc["difficultyBits"].(float64)) != 12 {
			t.Fatalf("a young account's challenge: %v", yc)
		}
		nonce := challenge.Solve(salt, bits)
		wrong := "7"
		for challenge.LeadingZeroBits(salt, wrong) >= bits {
			wrong += "7"
		}
		post := func(n string) response {
			return h.do("POST", "/sale/pow/admission", nil, map[string]string{"token": tok, "salt": salt, "nonce": n})
		}
		if r := post(wrong); r.status != 403 || r.code() != "challenge_failed" {
			t.Fatalf("wrong nonce: %d %s", r.status, r.body)
		}
		r := post(nonce)
		if r.status != 200 || r.json(t)["admissionToken"] == "" || r.json(t)["expiresIn"].(float64) != 120 {
			t.Fatalf("right nonce after a wrong one: %d %s", r.status, r.body)
		}
		if again := post(nonce); again.status != 403 || again.code() != "challenge_failed" {
			t.Fatalf("the salt a second time: %d %s", again.status, again.body)
		}
		// Back at its place after solving (say its reserve found the units
		// gone and some came back), the shopper is admitted, not handed
		// the salt it already spent.
		if st := h.status("pow", tok); st["state"] != "admitted" || st["admissionToken"] == "" {
			t.Fatalf("status after solving: %v", st)
		}
		if res := h.reserve("pow", "alice", r.json(t)["admissionToken"].(string), "k", nil); res.status != 201 {
			t.Fatalf("reserve with the earned admission: %d %s", res.status, res.body)
		}
		other, _ := h.ticketOf("pow", "bob")
		if r := h.do("POST", "/sale/pow/admission", nil, map[string]string{"token": other, "salt": salt, "nonce": nonce}); r.code() != "challenge_failed" {
			t.Fatalf("alice's solution used by bob: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/sale/pow/admission", nil, `{"token":"x"}`); r.status != 400 {
			t.Fatalf("a body without salt: %d %s", r.status, r.body)
		}
	})
}

// TestAutomationIsHeldQuietly: a shopper who polls far faster than asked
// keeps a place that never comes up — no loud rejection to learn from —
// under the published policy; so does one who keeps hitting the rate
// limits.
func TestAutomationIsHeldQuietly(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("drop", map[string]any{"initialStock": 50})
	if pub := h.do("GET", "/sale/drop", nil, nil).json(t); !strings.Contains(pub["automationPolicy"].(string), "not admitted") {
		t.Fatalf("no published policy: %v", pub)
	}
	tok, _ := h.ticketOf("drop", "speedy")
	for i := 0; i < 40; i++ { // 40 polls inside one second, with its own sign-in
		h.statusBy("drop", tok, "speedy")
	}
	h.clock.Advance(200 * time.Millisecond) // the next snapshot carries the hold
	st := h.statusBy("drop", tok, "speedy")
	if st["state"] != "waiting" || st["chance"] != "unlikely" {
		t.Fatalf("a fast poller: %v", st)
	}
	calm, _ := h.ticketOf("drop", "calm")
	if st := h.status("drop", calm); st["state"] != "admitted" {
		t.Fatalf("a calm shopper: %v", st)
	}

	adm := h.admit("drop", "hammer")
	for i := 0; i < 20; i++ {
		h.reserve("drop", "hammer", adm, fmt.Sprint("k", i), `{"quantity":1}`)
	}
	h.clock.Advance(200 * time.Millisecond)
	hammer, _ := h.ticketOf("drop", "hammer")
	if st := h.status("drop", hammer); st["state"] != "waiting" {
		t.Fatalf("an account that kept hitting the limits: %v", st)
	}
	if v := h.sale("drop"); v.HeldAsAutomation != 2 {
		t.Fatalf("the operator view holds %v shoppers, want 2", v.HeldAsAutomation)
	}
}

// TestEarlyPollerIsHeld: far back in a paced queue the room asks for a
// poll every ten seconds; a client that comes back every second (ten times
// faster than asked, far below any fixed rate limit) is held under the
// automation policy, one that comes back when asked is not.
func TestEarlyPollerIsHeld(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("slow", map[string]any{"initialStock": 5, "admissionPerSecond": 1})
	for i := 0; i < 400; i++ {
		h.ticketOf("slow", fmt.Sprint("crowd-", i))
	}
	eager, _ := h.ticketOf("slow", "eager")
	patient, _ := h.ticketOf("slow", "patient")
	r := h.do("GET", "/sale/slow/status?token="+patient, nil, nil)
	if r.header.Get("Retry-After") != "10" {
		t.Fatalf("far back, the room asks for a poll in %q seconds, want 10: %s", r.header.Get("Retry-After"), r.body)
	}
	for i := 1; i <= 20; i++ {
		h.clock.Advance(time.Second)
		h.statusBy("slow", eager, "eager")
		if i%10 == 0 {
			h.statusBy("slow", patient, "patient")
		}
	}
	h.clock.Advance(200 * time.Millisecond)
	if v := h.sale("slow"); v.HeldAsAutomation != 1 {
		t.Fatalf("held as automation: %v, want the eager poller alone", v.HeldAsAutomation)
	}
}

// TestAuditCancelsAutomationOrders: after the sale, the audit reports the
// orders of young accounts created together that bought in the same second
// and cancels them under the policy; their units return exactly once; a
// genuine shopper's order is untouched.
func TestAuditCancelsAutomationOrders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("jersey", map[string]any{"initialStock": 10})
		buy := func(user, jwt string) {
			auth := map[string]string{"Authorization": "Bearer " + jwt}
			tok := h.do("GET", "/sale/jersey/ticket", auth, nil).json(t)["token"].(string)
			adm := h.status("jersey", tok)["admissionToken"].(string)
			hdr := map[string]string{"Authorization": "Bearer " + jwt, "X-Admission-Token": adm, "Idempotency-Key": "k"}
			r := h.do("POST", "/sale/jersey/reserve", hdr, nil)
			if r.status != 201 {
				t.Fatalf("%s reserve: %d %s", user, r.status, r.body)
			}
			id := r.json(t)["reservationId"].(string)
			if c := h.do("POST", "/reservations/"+id+"/confirm", auth, `{"paymentRef":"p"}`); c.status != 200 {
				t.Fatalf("%s confirm: %d %s", user, c.status, c.body)
			}
		}
		for i := 0; i < 4; i++ { // four accounts made within minutes, two days ago
			u := fmt.Sprintf("farm-%d", i)
			buy(u, h.jwtAged(u, 48*time.Hour-time.Duration(i)*time.Minute))
		}
		buy("regular", h.jwt("regular"))
		rep := h.do("GET", "/admin/sales/jersey/automation", nil, nil).json(t)
		findings := rep["findings"].([]any)
		if rep["orders"].(float64) != 5 || len(findings) != 4 {
			t.Fatalf("audit: %v", rep)
		}
		for _, f := range findings {
			if f.(map[string]any)["cancel"] != true || f.(map[string]any)["userId"] == "regular" {
				t.Fatalf("finding %v", f)
			}
		}
		if counter, _ := h.exact("jersey"); counter != 5 {
			t.Fatalf("counter before %d", counter)
		}
		done := h.do("POST", "/admin/sales/jersey/automation/cancel", nil, nil).json(t)
		if done["cancelled"].(float64) != 4 {
			t.Fatalf("cancel run: %v", done)
		}
		// Running it again cancels nothing more and restocks nothing.
		if again := h.do("POST", "/admin/sales/jersey/automation/cancel", nil, nil).json(t); again["cancelled"].(float64) != 0 {
			t.Fatalf("second run: %v", again)
		}
		counter, totals := h.exact("jersey")
		if counter != 9 || totals.Confirmed != 1 {
			t.Fatalf("after: counter %d totals %+v, want 9 left and the regular's order", counter, totals)
		}
	})
}
