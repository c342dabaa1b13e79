package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/waitroom"
)

func (h *harness) ticketOf(sku, user string) (string, map[string]any) {
	h.t.Helper()
	r := h.do("GET", "/sale/"+sku+"/ticket", map[string]string{"Authorization": "Bearer " + h.jwt(user)}, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("ticket for %s: %d %s", user, r.status, r.body)
	}
	m := r.json(h.t)
	return m["token"].(string), m
}

func (h *harness) status(sku, tok string) map[string]any {
	h.t.Helper()
	r := h.do("GET", "/sale/"+sku+"/status?token="+tok, nil, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("status: %d %s", r.status, r.body)
	}
	return r.json(h.t)
}

// statusBy polls as the shopper's page does: the ticket in X-Ticket and the
// shopper's JWT, so that the poll counts as the shopper's own.
func (h *harness) statusBy(sku, tok, user string) map[string]any {
	h.t.Helper()
	r := h.do("GET", "/sale/"+sku+"/status", map[string]string{"X-Ticket": tok, "Authorization": "Bearer " + h.jwt(user)}, nil)
	if r.status != http.StatusOK {
		h.t.Fatalf("status: %d %s", r.status, r.body)
	}
	return r.json(h.t)
}

func (h *harness) drawDoc(sku string) *waitroom.DrawDocument {
	h.t.Helper()
	r := h.do("GET", "/sale/"+sku+"/draw", nil, nil)
	if r.status != 200 {
		h.t.Fatalf("draw: %d %s", r.status, r.body)
	}
	var d waitroom.DrawDocument
	if err := json.Unmarshal(r.body, &d); err != nil {
		h.t.Fatal(err)
	}
	return &d
}

// warm loads the counters of sales opening within the warm lead, as the
// warmer does before the open.
func (h *harness) warm() {
	h.t.Helper()
	if err := h.eng.Warmer.WarmOnce(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// TestRandomFairness: everyone who took a ticket before the open is
// shuffled at the open by the committed seed; the published draw recomputes
// and matches the commitment; places follow it; later arrivals queue behind
// in arrival order; asking again never improves a place.
func TestRandomFairness(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		sale := h.createSale("drop", map[string]any{"initialStock": 100, "fairness": "random",
			"opensAt": start.Add(time.Minute).Format(time.RFC3339)})
		h.warm()
		pub := h.do("GET", "/sale/drop", nil, nil).json(t)
		commitment, _ := pub["seedCommitment"].(string)
		if len(commitment) != 64 || sale["seedCommitment"] != commitment {
			t.Fatalf("published commitment %q", commitment)
		}
		if r := h.do("GET", "/sale/drop/draw", nil, nil); r.status != 404 || r.header.Get("Retry-After") == "" {
			t.Fatalf("the draw before it ran: %d %s", r.status, r.body)
		}
		const early = 40
		tickets := map[string]string{}
		for i := 0; i < early; i++ {
			user := fmt.Sprintf("early-%d", i)
			tok, m := h.ticketOf("drop", user)
			tickets[user] = tok
			if st := h.status("drop", tok); st["state"] != "scheduled" {
				t.Fatalf("before the open: %v (ticket %v)", st, m)
			}
		}
		h.clock.Set(start.Add(time.Minute))
		// A latecomer before the draw has even run still queues behind.
		lateTok, _ := h.ticketOf("drop", "late-0")
		if err := h.eng.Drawer.DrawDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second) // past the snapshot's lifetime
		doc := h.drawDoc("drop")
		if err := doc.Verify(); err != nil {
			t.Fatalf("the published draw does not verify: %v", err)
		}
		if doc.SeedCommitment != commitment || len(doc.Order) != early {
			t.Fatalf("draw: commitment %s, %d places", doc.SeedCommitment, len(doc.Order))
		}
		place := map[string]int{}
		for i, p := range doc.Order {
			place[p] = i + 1
		}
		saleID := h.saleOf("drop").ID
		for user, tok := range tickets {
			st := h.status("drop", tok)
			if st["state"] != "admitted" || st["token"] == nil {
				t.Fatalf("%s after the draw: %v", user, st)
			}
			newTok := st["token"].(string)
			got, err := h.eng.Tokens.VerifyTicket(newTok, saleID)
			if err != nil || got.Position != int64(place[waitroom.Pseudonym(saleID, user)]) {
				t.Fatalf("%s: ticket says %d, draw says %d", user, got.Position, place[waitroom.Pseudonym(saleID, user)])
			}
			again, _ := h.ticketOf("drop", user)
			if a, _ := h.eng.Tokens.VerifyTicket(again, saleID); a.Position != got.Position {
				t.Fatalf("%s asked again: place %d, was %d", user, a.Position, got.Position)
			}
		}
		late, _ := h.eng.Tokens.VerifyTicket(lateTok, saleID)
		if late.Position != early+1 {
			t.Fatalf("the first arrival after the open has place %d, want %d", late.Position, early+1)
		}
		late2Tok, _ := h.ticketOf("drop", "late-1")
		if l2, _ := h.eng.Tokens.VerifyTicket(late2Tok, saleID); l2.Position != early+2 {
			t.Fatalf("the second latecomer has place %d", l2.Position)
		}
		if pub := h.do("GET", "/sale/drop", nil, nil).json(t); pub["drawn"] != true {
			t.Fatalf("the sale does not say it was drawn: %v", pub)
		}
	})
}

// TestLotteryFairness: shoppers register in the window; the draw selects
// twice the units, who are admitted in drawn order; the others, and anyone
// who did not register, are told not_selected.
func TestLotteryFairness(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("raffle", map[string]any{"initialStock": 5, "fairness": "lottery",
			"registrationClosesAt": start.Add(time.Minute).Format(time.RFC3339),
			"opensAt":              start.Add(2 * time.Minute).Format(time.RFC3339),
			"admissionPerSecond":   2})
		h.warm()
		auth := func(u string) map[string]string { return map[string]string{"Authorization": "Bearer " + h.jwt(u)} }
		if r := h.do("GET", "/sale/raffle/ticket", auth("nobody"), nil); r.status != 409 || r.code() != "not_registered" {
			t.Fatalf("ticket before registering: %d %s", r.status, r.body)
		}
		const entrants = 30
		for i := 0; i < entrants; i++ {
			for rep := 0; rep < 2; rep++ { // repeating is harmless
				r := h.do("POST", "/sale/raffle/register", auth(fmt.Sprintf("fan-%d", i)), nil)
				if r.status != 202 || r.json(t)["registered"] != true {
					t.Fatalf("register: %d %s", r.status, r.body)
				}
			}
		}
		tickets := map[string]string{}
		for i := 0; i < entrants; i++ {
			u := fmt.Sprintf("fan-%d", i)
			tickets[u], _ = h.ticketOf("raffle", u)
		}
		h.clock.Set(start.Add(time.Minute))
		h.warm() // a minute before the open
		if r := h.do("POST", "/sale/raffle/register", auth("too-late"), `{}`); r.status != 409 || r.code() != "registration_closed" {
			t.Fatalf("register after the window: %d %s", r.status, r.body)
		}
		if err := h.eng.Drawer.DrawDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
		doc := h.drawDoc("raffle")
		if err := doc.Verify(); err != nil || doc.Winners != 10 || len(doc.Order) != entrants {
			t.Fatalf("draw: %v, %d winners of %d", err, doc.Winners, len(doc.Order))
		}
		saleID := h.saleOf("raffle").ID
		rank := map[string]int{}
		for i, p := range doc.Order {
			rank[p] = i + 1
		}
		var winners []string
		for u, tok := range tickets {
			st := h.status("raffle", tok)
			r := rank[waitroom.Pseudonym(saleID, u)]
			switch {
			case r <= 10 && st["state"] != "scheduled":
				t.Fatalf("winner %s (place %d) before the open: %v", u, r, st)
			case r > 10 && st["state"] != "not_selected":
				t.Fatalf("%s drawn at %d of 10: %v", u, r, st)
			}
			if r <= 10 {
				winners = append(winners, u)
				tickets[u] = st["token"].(string)
			}
		}
		tok, _ := h.ticketOf("raffle", "did-not-register")
		if st := h.status("raffle", tok); st["state"] != "not_selected" {
			t.Fatalf("a shopper who did not register: %v", st)
		}

		// At the open, winners are admitted in drawn order, paced at 2/s.
		h.clock.Set(start.Add(2 * time.Minute))
		if err := h.eng.Pacer.TickOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
		sort.Slice(winners, func(i, j int) bool {
			return rank[waitroom.Pseudonym(saleID, winners[i])] < rank[waitroom.Pseudonym(saleID, winners[j])]
		})
		admittedTill := 0
		for i, u := range winners {
			st := h.status("raffle", tickets[u])
			if st["state"] == "admitted" {
				if i != admittedTill {
					t.Fatalf("%s (drawn %d) admitted before an earlier winner", u, i+1)
				}
				admittedTill++
			} else if st["state"] != "waiting" {
				t.Fatalf("winner %s: %v", u, st)
			}
		}
		if admittedTill == 0 || admittedTill == len(winners) {
			t.Fatalf("%d of %d winners admitted after one tick at 2/s", admittedTill, len(winners))
		}
	})
}

// TestSoldOutWithPendingHolds: every poller sees sold_out (not final)
// within one snapshot of the last unit going; those who keep polling are
// admitted again when holds expire; once nothing can come back, final.
func TestSoldOutWithPendingHolds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("vinyl", map[string]any{"initialStock": 3, "holdSeconds": 60})
		var pollers []string
		for i := 0; i < 5; i++ {
			tok, _ := h.ticketOf("vinyl", fmt.Sprintf("poller-%d", i))
			pollers = append(pollers, tok)
		}
		var ids []string
		for i := 0; i < 3; i++ {
			u := fmt.Sprintf("buyer-%d", i)
			r := h.reserve("vinyl", u, h.admit("vinyl", u), "k", nil)
			ids = append(ids, r.json(t)["reservationId"].(string))
		}
		h.clock.Advance(200 * time.Millisecond) // one snapshot lifetime (100ms), well within 1s
		for _, tok := range pollers {
			st := h.status("vinyl", tok)
			if st["state"] != "sold_out" || st["final"] != false {
				t.Fatalf("after the last unit: %v", st)
			}
		}
		// One hold is paid, two lapse.
		h.do("POST", "/reservations/"+ids[0]+"/confirm", map[string]string{"Authorization": "Bearer " + h.jwt("buyer-0")}, `{"paymentRef":"p"}`)
		h.clock.Advance(61 * time.Second)
		if _, err := h.eng.Sweeper.SweepOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(200 * time.Millisecond)
		for i, tok := range pollers[:2] {
			st := h.status("vinyl", tok)
			if st["state"] != "admitted" {
				t.Fatalf("poller %d after holds returned: %v", i, st)
			}
			u := fmt.Sprintf("poller-%d", i)
			if r := h.reserve("vinyl", u, st["admissionToken"].(string), "k", nil); r.status != 201 {
				t.Fatalf("poller %d reserve: %d %s", i, r.status, r.body)
			}
		}
		h.clock.Advance(200 * time.Millisecond)
		st := h.status("vinyl", pollers[2])
		if st["state"] != "sold_out" || st["final"] != false {
			t.Fatalf("two holds pending: %v", st)
		}
		// The two pollers pay: nothing can come back now.
		for i := 0; i < 2; i++ {
			u := fmt.Sprintf("poller-%d", i)
			res := h.reserve("vinyl", u, "", "k", nil).json(t)["reservationId"].(string)
			h.do("POST", "/reservations/"+res+"/confirm", map[string]string{"Authorization": "Bearer " + h.jwt(u)}, `{"paymentRef":"p"}`)
		}
		// Final within a second of the last hold going (the units held
		// are read from the record at most once a second).
		h.clock.Advance(time.Second)
		if st := h.status("vinyl", pollers[4]); st["state"] != "sold_out" || st["final"] != true {
			t.Fatalf("nothing left, nothing pending: %v", st)
		}
		if r := h.do("GET", "/sale/vinyl/ticket", map[string]string{"Authorization": "Bearer " + h.jwt("newcomer")}, nil); r.status != 409 || r.code() != "sold_out" {
			t.Fatalf("a ticket once nothing can be sold: %d %s", r.status, r.body)
		}
		h.exact("vinyl")
	})
}

// TestPacedWaitIsHonest: with a paced sale, waiting shoppers see their
// place fall as admissions proceed, and the estimate is never shorter than
// the places ahead at the measured rate.
func TestPacedWaitIsHonest(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("paced", map[string]any{"initialStock": 1000, "admissionPerSecond": 4})
	toks := make([]string, 40)
	for i := range toks {
		toks[i], _ = h.ticketOf("paced", fmt.Sprintf("u%d", i))
	}
	ctx := context.Background()
	last := int64(1 << 40)
	for tick := 0; tick < 6; tick++ {
		if err := h.eng.Pacer.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
		st := h.status("paced", toks[39])
		if st["state"] != "waiting" {
			t.Fatalf("tick %d: %v", tick, st)
		}
		pos := int64(st["position"].(float64))
		wait := st["estimatedWaitSeconds"].(float64)
		if pos >= last {
			t.Fatalf("tick %d: place %d did not fall from %d", tick, pos, last)
		}
		if wait < float64(pos)/4 {
			t.Fatalf("tick %d: %v s estimated for %d places at most 4/s", tick, wait, pos)
		}
		if st["unitsLeft"].(float64) != 1000 || st["chance"] != "likely" {
			t.Fatalf("odds: %v", st)
		}
		last = pos
	}
}

// TestWaitJustAfterTheOpen: half a second after the open, the shopper at
// place p of a sale admitting r a second is told a wait of the order of
// p/r (at most the published quarter more, and a second of rounding),
// and asked back accordingly, however long before the open the sale was
// created and polled. Before the fix, a sale polled through the hour
// before its open measured its rate decaying to nothing, and told such a
// shopper hours.
func TestWaitJustAfterTheOpen(t *testing.T) {
	const (
		rate   = 10
		places = 200
	)
	for _, lead := range []time.Duration{time.Hour, time.Minute, 8 * time.Second, 0} {
		t.Run(lead.String(), func(t *testing.T) {
			h := newHarness(t, backends[0])
			opens := h.clock.Now().Add(lead)
			sku := "drop"
			h.createSale(sku, map[string]any{"initialStock": 1000, "admissionPerSecond": rate,
				"opensAt": opens.Format(time.RFC3339Nano)})
			toks := make([]string, places)
			for i := range toks {
				toks[i], _ = h.ticketOf(sku, fmt.Sprintf("u%d", i))
			}
			// The crowd polls while it waits for the open.
			for h.clock.Now().Before(opens) {
				h.status(sku, toks[places-1])
				h.clock.Advance(min(opens.Sub(h.clock.Now()), lead/20+time.Second))
			}
			h.warm()
			ctx := context.Background()
			for range 2 { // the pacer's loop ticks every 250ms from the open
				if err := h.eng.Pacer.TickOnce(ctx); err != nil {
					t.Fatal(err)
				}
				h.clock.Advance(250 * time.Millisecond)
				h.status(sku, toks[0])
			}
			// Half a second after the open:
			r := h.do("GET", "/sale/"+sku+"/status?token="+toks[places-1], nil, nil)
			st := r.json(t)
			if st["state"] != "waiting" {
				t.Fatalf("place %d at the open: %v", places, st)
			}
			p := st["position"].(float64)
			wait := st["estimatedWaitSeconds"].(float64)
			if lo, hi := p/rate, p/rate*waitroom.WaitMargin+1; wait < lo || wait > hi {
				t.Errorf("place %v of a sale admitting %d a second is told %vs, want %v to %v", p, rate, wait, lo, hi)
			}
			if ra := r.header.Get("Retry-After"); ra != strconv.Itoa(max(1, int(wait)/20)) {
				t.Errorf("Retry-After %s for a wait of %vs", ra, wait)
			}
		})
	}
}
