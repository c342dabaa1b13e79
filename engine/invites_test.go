package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/token"
)

// issueInvites issues n codes for the sale through the operator route.
func (h *harness) issueInvites(sku string, n int) []string {
	h.t.Helper()
	r := h.do("POST", "/admin/sales/"+sku+"/invites", nil, map[string]int{"count": n})
	if r.status != http.StatusCreated {
		h.t.Fatalf("issue invites: %d %s", r.status, r.body)
	}
	var out struct{ Codes []string }
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Codes) != n {
		h.t.Fatalf("issue invites: %s %v", r.body, err)
	}
	return out.Codes
}

// redeem redeems code for user.
func (h *harness) redeem(sku, user, code string) response {
	h.t.Helper()
	return h.do("POST", "/sale/"+sku+"/redeem", map[string]string{"Authorization": "Bearer " + h.jwt(user)},
		map[string]string{"code": code})
}

// viewJSON is the operator's view of the sale, as JSON.
func (h *harness) viewJSON(sku string) map[string]any {
	h.t.Helper()
	r := h.do("GET", "/admin/sales/"+sku, nil, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("show sale: %d %s", r.status, r.body)
	}
	return r.json(h.t)
}

// invites is the sale view's invites object.
func (h *harness) invites(sku string) string {
	h.t.Helper()
	v, _ := json.Marshal(h.viewJSON(sku)["invites"])
	return string(v)
}

// saleEvents returns the sale's events of the type.
func (h *harness) saleEvents(sku string, typ flashsale.EventType) []*flashsale.OutboxEvent {
	h.t.Helper()
	evs, err := h.eng.Store.SaleEvents(context.Background(), h.saleOf(sku).ID, 10000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*flashsale.OutboxEvent
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// TestInvites: an operator issues codes; a shopper who redeems one is
// placed ahead of a paced line and admitted at the open with no pacer
// tick, while the line waits; the same code again by the same account is
// harmless, by another account 409, a code of nowhere 403; a second code
// for the same account binds nothing; after the sale sold out for good a
// code is refused and stays unbound. Issues and redemptions are audited
// in the outbox; the sale view counts codes issued, redeemed and won.
func TestInvites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		opens := h.clock.Now().Add(time.Minute)
		h.createSale("vip", map[string]any{"initialStock": 1, "admissionPerSecond": 1,
			"opensAt": opens.Format(time.RFC3339Nano)})
		h.createSale("other", nil)

		for _, body := range []any{map[string]int{"count": 0}, map[string]int{"count": 10_001}, map[string]any{}, `{"count":"3"}`} {
			if r := h.do("POST", "/admin/sales/vip/invites", nil, body); r.status != 400 || r.code() != "bad_request" {
				t.Fatalf("invites %v: %d %s", body, r.status, r.body)
			}
		}
		if r := h.do("POST", "/admin/sales/none/invites", nil, map[string]int{"count": 1}); r.status != 404 {
			t.Fatalf("invites for no sale: %d %s", r.status, r.body)
		}
		codes := h.issueInvites("vip", 3)
		otherCodes := h.issueInvites("other", 1)
		if codes[0] == codes[1] || len(codes[0]) < 20 {
			t.Fatalf("codes %q", codes)
		}

		r := h.redeem("vip", "alice", codes[0])
		if r.status != 200 {
			t.Fatalf("redeem: %d %s", r.status, r.body)
		}
		tk := r.json(t)
		if tk["position"].(float64) != 1 || tk["token"] == "" {
			t.Fatalf("redeem: %s", r.body)
		}
		if again := h.redeem("vip", "alice", codes[0]); again.status != 200 || again.json(t)["position"] != tk["position"] {
			t.Fatalf("redeem again: %d %s", again.status, again.body)
		}
		if r := h.redeem("vip", "bob", codes[0]); r.status != 409 || r.code() != "invite_used" {
			t.Fatalf("another account: %d %s", r.status, r.body)
		}
		if r := h.redeem("vip", "bob", otherCodes[0]); r.status != 403 || r.code() != "invite_invalid" {
			t.Fatalf("a code of another sale: %d %s", r.status, r.body)
		}
		if r := h.redeem("vip", "bob", "no such code"); r.status != 403 || r.code() != "invite_invalid" {
			t.Fatalf("an unknown code: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/sale/vip/redeem", nil, map[string]string{"code": codes[1]}); r.status != 401 {
			t.Fatalf("redeem without a JWT: %d %s", r.status, r.body)
		}
		if r := h.do("POST", "/sale/vip/redeem", map[string]string{"Authorization": "Bearer " + h.jwt("bob")},
			map[string]string{"code": codes[1], "extra": "x"}); r.status != 400 {
			t.Fatalf("redeem with an unknown field: %d %s", r.status, r.body)
		}
		// One code per account: a second one gives alice her own ticket
		// back and stays for someone else.
		if r := h.redeem("vip", "alice", codes[1]); r.status != 200 {
			t.Fatalf("alice's second code: %d %s", r.status, r.body)
		}
		if got := h.invites("vip"); got != `{"issued":3,"redeemed":1,"won":0}` {
			t.Fatalf("invites %s", got)
		}

		// Carol queues the ordinary way; the open comes; the pacer has
		// not ticked, so the line is not admitted, but alice is.
		carol, _ := h.ticketOf("vip", "carol")
		h.clock.Set(opens.Add(time.Second))
		h.warm()
		if st := h.status("vip", carol); st["state"] != "waiting" {
			t.Fatalf("carol at the open: %v", st)
		}
		st := h.status("vip", tk["token"].(string))
		if st["state"] != "admitted" {
			t.Fatalf("alice at the open: %v", st)
		}
		if r := h.reserve("vip", "alice", st["admissionToken"].(string), "k-alice", nil); r.status != 201 {
			t.Fatalf("alice's reserve: %d %s", r.status, r.body)
		}
		if got := h.invites("vip"); got != `{"issued":3,"redeemed":1,"won":1}` {
			t.Fatalf("invites after the win %s", got)
		}
		// Redeemed now, while open, a code admits at once; but the unit
		// is held, so the shopper is told sold out (not final).
		r = h.redeem("vip", "bob", codes[1])
		if r.status != 200 || r.json(t)["position"].(float64) != 0 {
			t.Fatalf("bob's redeem while open: %d %s", r.status, r.body)
		}
		h.clock.Advance(time.Second)
		if st := h.status("vip", r.json(t)["token"].(string)); st["state"] != "sold_out" || st["final"] != false {
			t.Fatalf("bob while alice holds the last unit: %v", st)
		}

		// Sold out for good: a code is refused, and stays unbound.
		res := h.saleEvents("vip", flashsale.EventReservationCreated)
		if len(res) != 1 {
			t.Fatalf("%d holds", len(res))
		}
		var hold flashsale.ReservationData
		env := flashsale.Envelope{}
		if err := json.Unmarshal(res[0].Payload, &env); err != nil || json.Unmarshal(env.Data, &hold) != nil {
			t.Fatalf("hold event: %s", res[0].Payload)
		}
		if c := h.do("POST", "/reservations/"+hold.ReservationID+"/confirm", map[string]string{"Authorization": "Bearer " + h.jwt("alice")},
			map[string]string{"paymentRef": "p"}); c.status != 200 {
			t.Fatalf("confirm: %d %s", c.status, c.body)
		}
		h.clock.Advance(2 * time.Second)
		if r := h.redeem("vip", "dave", codes[2]); r.status != 409 || r.code() != "sold_out" {
			t.Fatalf("a code after the sale sold out: %d %s", r.status, r.body)
		}
		if got := h.invites("vip"); got != `{"issued":3,"redeemed":2,"won":1}` {
			t.Fatalf("invites at the end %s", got)
		}

		// The audit trail: one issue event per batch, one redemption per
		// code, naming the account and never the code.
		if n := len(h.saleEvents("vip", flashsale.EventInviteIssued)); n != 1 {
			t.Fatalf("%d invite.issued events", n)
		}
		red := h.saleEvents("vip", flashsale.EventInviteRedeemed)
		if len(red) != 2 {
			t.Fatalf("%d invite.redeemed events", len(red))
		}
		for _, e := range red {
			for _, c := range codes {
				if strings.Contains(string(e.Payload), c) {
					t.Fatalf("a code in an event: %s", e.Payload)
				}
			}
		}
	})
}

// turnEvents returns the sale's shopper.turn events by user.
func (h *harness) turnEvents(sku string) map[string]flashsale.TurnData {
	h.t.Helper()
	out := map[string]flashsale.TurnData{}
	for _, e := range h.saleEvents(sku, flashsale.EventShopperTurn) {
		var env flashsale.Envelope
		var d flashsale.TurnData
		if err := json.Unmarshal(e.Payload, &env); err != nil || json.Unmarshal(env.Data, &d) != nil {
			h.t.Fatalf("turn event %s", e.Payload)
		}
		if _, dup := out[d.UserID]; dup {
			h.t.Fatalf("two turn events for %s", d.UserID)
		}
		out[d.UserID] = d
	}
	return out
}

// TestTurnNotified: in a sale that sets notifiedAdmissionSeconds, the
// turn of each shopper admitted goes out once through the outbox, with
// the admission's expiry; the invited's at the open; a shopper still in
// line gets none; the admission then lasts notifiedAdmissionSeconds.
func TestTurnNotified(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		opens := h.clock.Now().Add(time.Minute)
		h.createSale("told", map[string]any{"initialStock": 5, "admissionPerSecond": 2,
			"notifiedAdmissionSeconds": 900, "opensAt": opens.Format(time.RFC3339Nano)})
		if v := h.viewJSON("told"); v["notifiedAdmissionSeconds"] != float64(900) {
			t.Fatalf("view: %v", v["notifiedAdmissionSeconds"])
		}
		code := h.issueInvites("told", 1)[0]
		var toks []string
		for _, u := range []string{"u1", "u2", "u3"} {
			tok, _ := h.ticketOf("told", u)
			toks = append(toks, tok)
		}
		if r := h.redeem("told", "vip", code); r.status != 200 {
			t.Fatalf("redeem: %d %s", r.status, r.body)
		}
		turns := func() {
			t.Helper()
			if err := h.eng.Turns.TickOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Before the open, no one's turn has come.
		turns()
		if got := h.turnEvents("told"); len(got) != 0 {
			t.Fatalf("turns before the open: %v", got)
		}
		h.clock.Set(opens.Add(time.Second))
		h.warm()
		turns()
		now := h.clock.Now()
		got := h.turnEvents("told")
		if len(got) != 1 || !got["vip"].AdmissionExpiresAt.Equal(now.Add(900*time.Second)) {
			t.Fatalf("turns at the open: %v", got)
		}
		// The pacer admits the first place (a second's worth at half the
		// rate); its turn goes out at the next round, the others' not.
		if err := h.eng.Pacer.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
		turns()
		turns() // a repeated round writes nothing new
		got = h.turnEvents("told")
		if len(got) != 2 || !got["u1"].AdmissionExpiresAt.Equal(h.clock.Now().Add(900*time.Second)) {
			t.Fatalf("turns after a pacer tick: %v", got)
		}
		// The shopper comes back: admitted, for notifiedAdmissionSeconds.
		st := h.status("told", toks[0])
		if st["state"] != "admitted" || st["expiresIn"] != float64(900) {
			t.Fatalf("u1 back: %v", st)
		}
		if st := h.status("told", toks[2]); st["state"] != "waiting" {
			t.Fatalf("u3: %v", st)
		}
	})
}

// pair is two servers (each a whole engine, as behind a load balancer)
// on one PostgreSQL and one Redis, with one clock and one token keyring.
func pair(t *testing.T) (a, b *harness) {
	t.Helper()
	key, err := token.GenerateKey("pair")
	if err != nil {
		t.Fatal(err)
	}
	keys := token.FormatKeys([]token.Key{key})
	be := backend{name: "redis+postgres", redis: true, postgres: true}
	a = newHarness(t, be, func(c *engine.Config) { c.TokenKeys, c.Source = keys, "server-a" })
	b = newHarness(t, be, func(c *engine.Config) {
		c.TokenKeys, c.Source = keys, "server-b"
		c.DatabaseURL, c.RedisPrefix, c.Now = a.eng.Config.DatabaseURL, a.prefix, a.clock.Now
	})
	b.clock = a.clock
	return a, b
}

// TestInvitesAcrossServers: codes issued through one server are redeemed
// through the other; a code bound through one is refused to another
// account through the other, and harmless again through either; the
// invited ticket one server gave is admitted by the other; both servers
// running the turn rounds at once write each turn once.
func TestInvitesAcrossServers(t *testing.T) {
	a, b := pair(t)
	ctx := context.Background()
	opens := a.clock.Now().Add(time.Minute)
	a.createSale("both", map[string]any{"initialStock": 50, "admissionPerSecond": 1000,
		"notifiedAdmissionSeconds": 600, "opensAt": opens.Format(time.RFC3339Nano)})
	codes := a.issueInvites("both", 4)
	r := b.redeem("both", "alice", codes[0])
	if r.status != 200 {
		t.Fatalf("redeem through b: %d %s", r.status, r.body)
	}
	tok := r.json(t)["token"].(string)
	if r := a.redeem("both", "bob", codes[0]); r.status != 409 || r.code() != "invite_used" {
		t.Fatalf("bob through a: %d %s", r.status, r.body)
	}
	if r := a.redeem("both", "alice", codes[0]); r.status != 200 {
		t.Fatalf("alice again through a: %d %s", r.status, r.body)
	}
	// Racing accounts for one code through both servers: one binds it.
	var wg sync.WaitGroup
	statuses := make([]int, 16)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := []*harness{a, b}[i%2]
			rr, err := h.call("POST", "/sale/both/redeem", map[string]string{"Authorization": "Bearer " + h.jwt(fmt.Sprintf("racer-%d", i))},
				map[string]string{"code": codes[1]})
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = rr.status
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case 200:
			won++
		case 409:
		default:
			t.Fatalf("a racer was told %d", s)
		}
	}
	if won != 1 {
		t.Fatalf("%d racers bound one code", won)
	}
	if got := b.invites("both"); got != `{"issued":4,"redeemed":2,"won":0}` {
		t.Fatalf("invites through b: %s", got)
	}

	// Tickets through both servers; the open; the turn rounds of both at
	// once, repeatedly.
	for i := range 10 {
		h := []*harness{a, b}[i%2]
		h.ticketOf("both", fmt.Sprintf("shopper-%d", i))
	}
	a.clock.Set(opens.Add(time.Second))
	a.warm()
	if st := a.status("both", tok); st["state"] != "admitted" {
		t.Fatalf("alice's ticket (from b) at a: %v", st)
	}
	if err := a.eng.Pacer.TickOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var wg sync.WaitGroup
		for _, h := range []*harness{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.eng.Turns.TickOnce(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		a.clock.Advance(time.Second)
		// The lease is the queue's: let it pass to whoever asks next.
		a.clock.Advance(10 * time.Second)
	}
	got := a.turnEvents("both")
	if len(got) != 12 { // ten shoppers, alice and the racer who won
		t.Fatalf("%d turns: %v", len(got), got)
	}
}

// TestTurnNotifiedAfterTheDraw: in a random sale, entrants who took a
// ticket before the open and never came back are told of their turn by
// their drawn place, and so is a latecomer behind them.
func TestTurnNotifiedAfterTheDraw(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		opens := start.Add(time.Minute)
		h.createSale("drawn", map[string]any{"initialStock": 100, "fairness": "random",
			"notifiedAdmissionSeconds": 300, "opensAt": opens.Format(time.RFC3339)})
		h.warm()
		for i := range 5 {
			h.ticketOf("drawn", fmt.Sprintf("early-%d", i))
		}
		h.clock.Set(opens)
		h.ticketOf("drawn", "late")
		if err := h.eng.Drawer.DrawDue(ctx); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second) // past the snapshot's lifetime
		for range 2 {                // the second round notifies the places the first saw
			if err := h.eng.Turns.TickOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		got := h.turnEvents("drawn")
		if len(got) != 6 {
			t.Fatalf("%d turns: %v", len(got), got)
		}
		for u, d := range got {
			if !d.AdmissionExpiresAt.Equal(h.clock.Now().Add(300 * time.Second)) {
				t.Fatalf("%s: %v", u, d)
			}
		}
	})
}

// TestRedeemGuessesAreLimited: an account guessing codes is told 429 after
// twenty tries in an hour, without a lookup; another account is not.
func TestRedeemGuessesAreLimited(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("guess", nil)
	code := h.issueInvites("guess", 1)[0]
	for i := range 20 {
		if r := h.redeem("guess", "mallory", fmt.Sprintf("guess-%d", i)); r.status != 403 {
			t.Fatalf("guess %d: %d %s", i, r.status, r.body)
		}
	}
	r := h.redeem("guess", "mallory", code)
	if r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("the 21st try: %d %s", r.status, r.body)
	}
	if r := h.redeem("guess", "alice", code); r.status != 200 {
		t.Fatalf("another account: %d %s", r.status, r.body)
	}
}

// TestNotifiedAdmissionSecondsSetting: the setting goes in with the sale,
// changes with PATCH, and is refused out of range.
func TestNotifiedAdmissionSecondsSetting(t *testing.T) {
	h := newHarness(t, backends[0])
	v := h.createSale("told", map[string]any{"notifiedAdmissionSeconds": 60})
	if v["notifiedAdmissionSeconds"] != float64(60) {
		t.Fatalf("created: %v", v["notifiedAdmissionSeconds"])
	}
	version := fmt.Sprint(v["version"])
	r := h.do("PATCH", "/admin/sales/told", map[string]string{"If-Match": version}, map[string]any{"notifiedAdmissionSeconds": 900})
	if r.status != 200 || r.json(t)["notifiedAdmissionSeconds"] != float64(900) {
		t.Fatalf("patched: %d %s", r.status, r.body)
	}
	r = h.do("PATCH", "/admin/sales/told", map[string]string{"If-Match": fmt.Sprint(r.json(t)["version"])}, map[string]any{"notifiedAdmissionSeconds": -1})
	if r.status != 400 || !strings.Contains(string(r.body), "notifiedAdmissionSeconds") {
		t.Fatalf("patched to -1: %d %s", r.status, r.body)
	}
	r = h.do("POST", "/admin/sales", nil, map[string]any{"sku": "long", "initialStock": 1,
		"opensAt": h.clock.Now().Format(time.RFC3339), "notifiedAdmissionSeconds": 86401})
	if r.status != 400 {
		t.Fatalf("created with 86401: %d %s", r.status, r.body)
	}
}

// TestInvitesThroughTheFleet: the fleet of two origins and an edge behind
// the balancer, with their background services running: codes issued and
// redeemed through the balancer (either origin), the invited ticket polled
// at the edge and admitted, the reserve through either origin; the turn
// goes out once, though both origins run the turn rounds.
func TestInvitesThroughTheFleet(t *testing.T) {
	_, prefix := testenv.Redis(t)
	f := newFleet(t, testenv.RedisURL(), prefix)
	lb := f.lb.URL
	r := f.admin(lb, "POST", "/admin/sales", map[string]any{"sku": "fleet-vip", "name": "VIP", "initialStock": 5,
		"admissionPerSecond": 1, "notifiedAdmissionSeconds": 300, "opensAt": f.clock.Now().Format(time.RFC3339Nano)})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	f.published("fleet-vip", "open")
	r = f.admin(lb, "POST", "/admin/sales/fleet-vip/invites", map[string]int{"count": 2})
	if r.status != http.StatusCreated {
		t.Fatalf("invites: %d %s", r.status, r.body)
	}
	var issued struct{ Codes []string }
	if err := json.Unmarshal(r.body, &issued); err != nil {
		t.Fatal(err)
	}
	auth := func(u string) map[string]string { return map[string]string{"Authorization": "Bearer " + f.jwt(u)} }
	// Twice through the balancer: one origin, then the other.
	var tok string
	for range 2 {
		r = f.do(lb, "POST", "/sale/fleet-vip/redeem", auth("alice"), map[string]string{"code": issued.Codes[0]})
		if r.status != 200 {
			t.Fatalf("redeem: %d %s", r.status, r.body)
		}
		tok = r.json(t)["token"].(string)
	}
	for range 2 {
		if r := f.do(lb, "POST", "/sale/fleet-vip/redeem", auth("bob"), map[string]string{"code": issued.Codes[0]}); r.status != 409 {
			t.Fatalf("bob: %d %s", r.status, r.body)
		}
	}
	hdr := auth("alice")
	hdr["X-Ticket"] = tok
	r = f.do(f.edgeURL, "GET", "/sale/fleet-vip/status", hdr, nil)
	st := r.json(t)
	if st["state"] != "admitted" || st["expiresIn"] != float64(300) {
		t.Fatalf("alice at the edge: %d %s", r.status, r.body)
	}
	hdr = auth("alice")
	hdr["X-Admission-Token"], hdr["Idempotency-Key"] = st["admissionToken"].(string), "k-alice"
	if r := f.do(lb, "POST", "/sale/fleet-vip/reserve", hdr, nil); r.status != http.StatusCreated {
		t.Fatalf("reserve: %d %s", r.status, r.body)
	}
	saleID := f.catalogSale(0, "fleet-vip").ID
	turns := func() (int, error) {
		evs, err := f.origins[1].Store.SaleEvents(context.Background(), saleID, 1000)
		n := 0
		for _, e := range evs {
			if e.Type == flashsale.EventShopperTurn {
				n++
			}
		}
		return n, err
	}
	f.eventually(func() string { return "alice's turn is written" }, func() (bool, error) {
		n, err := turns()
		return n > 0, err
	})
	// More rounds of both origins, at once: still one.
	for range 3 {
		var wg sync.WaitGroup
		for _, o := range f.origins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := o.Turns.TickOnce(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if n, err := turns(); err != nil || n != 1 {
		t.Fatalf("%d turn events, %v; want 1", n, err)
	}
	r = f.admin(lb, "GET", "/admin/sales/fleet-vip", nil)
	var v struct {
		Invites struct{ Issued, Redeemed, Won int }
	}
	if err := json.Unmarshal(r.body, &v); err != nil || v.Invites.Issued != 2 || v.Invites.Redeemed != 1 || v.Invites.Won != 1 {
		t.Fatalf("the view through the balancer: %s %v", r.body, err)
	}
}

// TestTurnNotToldWhileSoldOut: while nothing is left, no one is told it is
// their turn; when units come back, the places admitted meanwhile are.
func TestTurnNotToldWhileSoldOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		opens := h.clock.Now().Add(time.Minute)
		h.createSale("one", map[string]any{"initialStock": 1, "notifiedAdmissionSeconds": 120,
			"opensAt": opens.Format(time.RFC3339Nano)})
		h.warm()
		h.ticketOf("one", "u1")
		h.ticketOf("one", "u2")
		h.clock.Set(opens)
		res := h.reserve("one", "u1", h.admit("one", "u1"), "k-u1", nil)
		if res.status != http.StatusCreated {
			t.Fatalf("reserve: %d %s", res.status, res.body)
		}
		h.clock.Advance(time.Second) // past the snapshot's lifetime
		for range 2 {
			if err := h.eng.Turns.TickOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.turnEvents("one"); len(got) != 0 {
			t.Fatalf("turns while sold out: %v", got)
		}
		id := res.json(t)["reservationId"].(string)
		if r := h.do("DELETE", "/reservations/"+id, map[string]string{"Authorization": "Bearer " + h.jwt("u1")}, nil); r.status != 200 {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		h.clock.Advance(time.Second)
		if err := h.eng.Turns.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if got := h.turnEvents("one"); len(got) != 2 {
			t.Fatalf("turns once a unit came back: %v", got)
		}
	})
}
