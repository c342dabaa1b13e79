package waitroom

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func entrants(n int, sale string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = Pseudonym(sale, fmt.Sprintf("user-%d", i))
	}
	return out
}

func TestDrawIsDeterministicAndVerifiable(t *testing.T) {
	seed := []byte("a seed of thirty-two bytes......")
	es := entrants(500, "sale_1")
	order := Order(seed, es)
	if len(order) != 500 {
		t.Fatalf("%d places for 500 entrants", len(order))
	}
	// The order depends on the seed, not on the order entrants arrived.
	rev := append([]string(nil), es...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if fmt.Sprint(Order(seed, rev)) != fmt.Sprint(order) {
		t.Fatal("the order depends on arrival order")
	}
	if fmt.Sprint(Order([]byte("another seed, another order....."), es)) == fmt.Sprint(order) {
		t.Fatal("a different seed gave the same order")
	}
	// Not the arrival order either.
	same := 0
	for i := range es {
		if es[i] == order[i] {
			same++
		}
	}
	if same > 10 {
		t.Fatalf("%d of 500 entrants kept their arrival place", same)
	}

	doc := &DrawDocument{Algorithm: DrawAlgorithm, SeedCommitment: SeedCommitment(seed), Seed: fmt.Sprintf("%x", seed),
		DrawnAt: time.Now(), Order: order}
	if err := doc.Verify(); err != nil {
		t.Fatalf("an honest draw fails to verify: %v", err)
	}
	blob, err := EncodeDrawDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeDrawDocument(blob)
	if err != nil || back.Verify() != nil || len(back.Order) != 500 {
		t.Fatalf("round trip: %v", err)
	}

	for name, tamper := range map[string]func(d *DrawDocument){
		"two places swapped":  func(d *DrawDocument) { d.Order[3], d.Order[4] = d.Order[4], d.Order[3] },
		"an entrant doubled":  func(d *DrawDocument) { d.Order[10] = d.Order[11] },
		"a place moved":       func(d *DrawDocument) { d.Order = append(d.Order[1:], d.Order[0]) },
		"another seed":        func(d *DrawDocument) { d.Seed = fmt.Sprintf("%x", []byte("another seed, another order.....")) },
		"another commitment":  func(d *DrawDocument) { d.SeedCommitment = SeedCommitment([]byte("x")) },
		"unknown algorithm":   func(d *DrawDocument) { d.Algorithm = "dice" },
		"winners beyond list": func(d *DrawDocument) { d.Winners = 501 },
	} {
		d := *doc
		d.Order = append([]string(nil), doc.Order...)
		tamper(&d)
		if err := d.Verify(); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestDrawIndexMatchesTheOrder(t *testing.T) {
	seed := []byte("a seed of thirty-two bytes......")
	users := make([]string, 300)
	ps := make([]string, 300)
	for i := range users {
		users[i] = fmt.Sprintf("shopper-%d", i)
		ps[i] = Pseudonym("sale_9", users[i])
	}
	order := Order(seed, ps)
	place := map[string]int64{}
	for i, p := range order {
		place[p] = int64(i + 1)
	}
	ix := NewDrawIndex("sale_9", seed, order)
	for _, u := range users {
		got, ok := ix.Position(u)
		if !ok || got != place[Pseudonym("sale_9", u)] {
			t.Fatalf("%s: index says %d %v, order says %d", u, got, ok, place[Pseudonym("sale_9", u)])
		}
	}
	if _, ok := ix.Position("stranger"); ok {
		t.Fatal("a shopper who did not enter has a place")
	}
	if !strings.HasPrefix(Pseudonym("s", "u"), Pseudonym("s", "u")[:8]) || Pseudonym("s", "u") == Pseudonym("s2", "u") {
		t.Fatal("pseudonyms must differ between sales")
	}
}

func BenchmarkDrawTwoHundredThousand(b *testing.B) {
	seed := []byte("a seed of thirty-two bytes......")
	es := entrants(200_000, "sale_b")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Order(seed, es)
	}
}
