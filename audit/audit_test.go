package audit

import (
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

var opens = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

func order(id, user, card string, created, reserved time.Time) flashsale.Attempt {
	return flashsale.Attempt{ReservationID: "res_" + id, UserID: user, Instrument: card, Quantity: 1,
		State: flashsale.ReservationConfirmed, CreatedAt: reserved, AccountCreated: created,
		OrderID: "ord_" + id, OrderState: flashsale.OrderConfirmed, OrderVersion: 1}
}

func TestAnalyze(t *testing.T) {
	sale := &flashsale.Sale{ID: "sale_1", SKU: "s", OpensAt: opens}
	farm := opens.Add(-2 * 24 * time.Hour) // five accounts made one evening
	var attempts []flashsale.Attempt
	for i := 0; i < 5; i++ {
		attempts = append(attempts, order(fmt.Sprint("bot", i), fmt.Sprint("bot-", i), fmt.Sprint("card-b", i),
			farm.Add(time.Duration(i)*time.Minute), opens.Add(time.Duration(i)*100*time.Millisecond)))
	}
	// A genuine shopper who happened to buy in the same second.
	attempts = append(attempts, order("human", "human", "card-h", opens.Add(-400*24*time.Hour), opens.Add(50*time.Millisecond)))
	// A card behind two accounts: one's hold lapsed, the other bought.
	lapsed := order("mule1", "mule-1", "card-m", opens.Add(-90*24*time.Hour), opens)
	lapsed.OrderID, lapsed.State = "", flashsale.ReservationExpired
	attempts = append(attempts, lapsed, order("mule2", "mule-2", "card-m", opens.Add(-90*24*time.Hour), opens.Add(time.Minute)))
	// A shipped order matching two patterns is reported, not cancelled.
	shipped := order("ship", "bot-9", "card-m", farm.Add(30*time.Second), opens.Add(150*time.Millisecond))
	shipped.OrderState = flashsale.OrderShipped
	attempts = append(attempts, shipped)

	rep := Analyze(sale, attempts, map[string]string{"mule-2": "polled faster than the waiting room asks"}, Policy{})
	if rep.Orders != 8 {
		t.Fatalf("%d orders audited, want 8", rep.Orders)
	}
	by := map[string]Finding{}
	for _, f := range rep.Findings {
		by[f.UserID] = f
	}
	if _, ok := by["human"]; ok {
		t.Fatalf("a genuine shopper was flagged: %+v", by["human"])
	}
	for i := 0; i < 5; i++ {
		f := by[fmt.Sprint("bot-", i)]
		if !f.Cancel || len(f.Patterns) < 2 {
			t.Fatalf("bot-%d: %+v, want cancelled for created-together and burst", i, f)
		}
	}
	if f := by["mule-2"]; !f.Cancel || len(f.Patterns) != 2 {
		t.Fatalf("mule-2 (shared card, held): %+v", f)
	}
	if f := by["bot-9"]; f.Cancel || len(f.Patterns) < 2 {
		t.Fatalf("a shipped order: %+v, want reported, not cancelled", f)
	}
	// One pattern alone is reported, never cancelled.
	one := Analyze(sale, []flashsale.Attempt{order("x", "x", "", farm, opens), order("y", "y", "", farm, opens.Add(time.Hour)),
		order("z", "z", "", farm, opens.Add(2*time.Hour))}, nil, Policy{})
	for _, f := range one.Findings {
		if f.Cancel || len(f.Patterns) != 1 {
			t.Fatalf("created together but bought hours apart: %+v", f)
		}
	}
}
