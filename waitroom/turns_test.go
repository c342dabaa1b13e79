package waitroom

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
)

// outbox is an AppendEvents that keeps one event per id, as the record's.
type outbox struct {
	mu     sync.Mutex
	events map[string]flashsale.Event
	order  []string
}

func (o *outbox) AppendEvents(_ context.Context, events ...flashsale.Event) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.events == nil {
		o.events = map[string]flashsale.Event{}
	}
	n := 0
	for _, e := range events {
		if _, ok := o.events[e.ID]; !ok {
			o.events[e.ID] = e
			o.order = append(o.order, e.ID)
			n++
		}
	}
	return n, nil
}

// users returns the notified users in the order first written.
func (o *outbox) users(t *testing.T) []string {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, id := range o.order {
		var env flashsale.Envelope
		var d flashsale.TurnData
		if err := json.Unmarshal(o.events[id].Payload, &env); err != nil || json.Unmarshal(env.Data, &d) != nil {
			t.Fatalf("event %s", o.events[id].Payload)
		}
		out = append(out, d.UserID)
	}
	return out
}

// TestTurnsFollowTheAdmissions: a round notifies the places admitted that
// were given before the previous round, the invited at the open, each
// once, at most Batch a round; a sale that notifies nobody, or is not
// open, gets no round.
func TestTurnsFollowTheAdmissions(t *testing.T) {
	ctx := context.Background()
	clock := testenv.NewClock(opens.Add(-time.Minute))
	q := memory.NewQueue()
	sale := &flashsale.Sale{ID: "sale_t", SKU: "t", OpensAt: opens, AdmissionPerSecond: 10, NotifiedAdmissionSeconds: 60,
		State: flashsale.SaleOpen}
	quiet := &flashsale.Sale{ID: "sale_q", SKU: "q", OpensAt: opens.Add(-time.Hour), State: flashsale.SaleOpen}
	ob := &outbox{}
	turns := NewTurns(TurnsConfig{Queue: q, Sales: saleList{sale, quiet}, Events: ob, Now: clock.Now, Batch: 3})
	round := func() {
		t.Helper()
		if err := turns.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	join := func(s *flashsale.Sale, u string) {
		t.Helper()
		pos, _, err := q.Join(ctx, s.ID, u, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Await(ctx, s.ID, u, pos); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		join(sale, fmt.Sprintf("u%d", i))
		join(quiet, fmt.Sprintf("q%d", i))
	}
	if err := q.Await(ctx, sale.ID, "vip", Invited); err != nil {
		t.Fatal(err)
	}
	q.Admit(ctx, sale.ID, 4)
	q.Admit(ctx, quiet.ID, 5)
	round() // before the open: nothing
	if got := ob.users(t); len(got) != 0 {
		t.Fatalf("before the open: %v", got)
	}
	clock.Set(opens)
	round() // the invited; the places given before the previous round: none seen yet
	if got := fmt.Sprint(ob.users(t)); got != "[vip]" {
		t.Fatalf("at the open: %s", got)
	}
	round() // places 1-3 of the 4 admitted: the batch
	round() // place 4
	round() // nothing new
	if got := fmt.Sprint(ob.users(t)); got != "[vip u0 u1 u2 u3]" {
		t.Fatalf("after the rounds: %s", got)
	}
	// A place given now and admitted at once waits a round for its note.
	join(sale, "late")
	q.Admit(ctx, sale.ID, 6)
	round()
	if got := len(ob.users(t)); got != 6 {
		t.Fatalf("%d notified after u4 was admitted, want 6", got)
	}
	round()
	if got := fmt.Sprint(ob.users(t)); got != "[vip u0 u1 u2 u3 u4 late]" {
		t.Fatalf("the late place: %s", got)
	}
	var env flashsale.Envelope
	var d flashsale.TurnData
	for _, e := range ob.events {
		_ = json.Unmarshal(e.Payload, &env)
		_ = json.Unmarshal(env.Data, &d)
		if e.Type != flashsale.EventShopperTurn || e.SaleID != sale.ID || !d.AdmissionExpiresAt.Equal(e.OccurredAt.Add(time.Minute)) {
			t.Fatalf("event %s", e.Payload)
		}
	}
}
