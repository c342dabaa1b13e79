// Package queuetest is the conformance suite of waitroom.Queue: one set of
// tests run on every implementation (package memory in process, package
// redis shared by servers), so they cannot drift apart.
//
// Overselling is neither prevented nor caused here: the queue admits, the
// gate counts the stock.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/waitroom"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

// Exercise runs the suite; newQueue returns an empty queue for one test.
func Exercise(t *testing.T, newQueue func(t *testing.T) waitroom.Queue) {
	tests := []struct {
		name string
		fn   func(t *testing.T, q waitroom.Queue, sale string)
	}{
		{"JoinIsStable", testJoinIsStable},
		{"JoinConcurrent", testJoinConcurrent},
		{"EnterAndSeal", testEnterAndSeal},
		{"SealConcurrentWithEnter", testSealConcurrentWithEnter},
		{"AdmitNeverLowers", testAdmitNeverLowers},
		{"Counters", testCounters},
		{"Lead", testLead},
		{"SpendOnce", testSpendOnce},
		{"Suspects", testSuspects},
		{"Forget", testForget},
		{"RaiseNeverLowers", testRaise},
		{"Await", testAwait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newQueue(t), flashsale.NewID("sale_"))
		})
	}
}

func testJoinIsStable(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	p1, a1, err := q.Join(ctx, sale, "alice", t0)
	if err != nil || p1 != 1 || !a1.Equal(t0) {
		t.Fatalf("first join: %d %v %v", p1, a1, err)
	}
	p2, _, _ := q.Join(ctx, sale, "bob", t0.Add(time.Second))
	again, at, _ := q.Join(ctx, sale, "alice", t0.Add(time.Minute))
	if p2 != 2 || again != 1 || !at.Equal(t0) {
		t.Fatalf("bob %d, alice again %d at %v", p2, again, at)
	}
	if n, _ := q.Len(ctx, sale); n != 2 {
		t.Fatalf("Len %d, want 2", n)
	}
	if n, _ := q.Len(ctx, flashsale.NewID("sale_")); n != 0 {
		t.Fatalf("Len of an unknown sale %d", n)
	}
}

func testJoinConcurrent(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	const users, asks = 200, 3
	got := make([][asks]int64, users)
	var wg sync.WaitGroup
	for u := 0; u < users; u++ {
		for a := 0; a < asks; a++ {
			wg.Add(1)
			go func(u, a int) {
				defer wg.Done()
				p, _, err := q.Join(ctx, sale, fmt.Sprintf("u%d", u), t0)
				if err != nil {
					t.Error(err)
				}
				got[u][a] = p
			}(u, a)
		}
	}
	wg.Wait()
	seen := map[int64]bool{}
	for u := range got {
		if got[u][0] != got[u][1] || got[u][1] != got[u][2] {
			t.Fatalf("user %d got places %v", u, got[u])
		}
		if seen[got[u][0]] {
			t.Fatalf("place %d given twice", got[u][0])
		}
		seen[got[u][0]] = true
	}
	for p := int64(1); p <= users; p++ {
		if !seen[p] {
			t.Fatalf("place %d never given: places are not 1..%d", p, users)
		}
	}
}

func testEnterAndSeal(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	for i, u := range []string{"a", "b", "c"} {
		if _, err := q.Enter(ctx, sale, u, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if at, err := q.Enter(ctx, sale, "a", t0.Add(time.Hour)); err != nil || !at.Equal(t0) {
		t.Fatalf("entering again: %v %v, want the first time", at, err)
	}
	if at, ok, err := q.Entered(ctx, sale, "b"); err != nil || !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("Entered(b): %v %v %v", at, ok, err)
	}
	if _, ok, _ := q.Entered(ctx, sale, "zed"); ok {
		t.Fatal("zed never entered")
	}
	n, err := q.Seal(ctx, sale)
	if err != nil || n != 3 {
		t.Fatalf("Seal: %d %v", n, err)
	}
	if _, err := q.Enter(ctx, sale, "late", t0); !errors.Is(err, flashsale.ErrSealed) {
		t.Fatalf("Enter after the seal: %v", err)
	}
	if at, err := q.Enter(ctx, sale, "c", t0.Add(time.Hour)); err != nil || !at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("an entrant entering again after the seal: %v %v", at, err)
	}
	if n, _ := q.Seal(ctx, sale); n != 3 {
		t.Fatalf("sealing again: %d", n)
	}
	list, _ := q.Entrants(ctx, sale)
	sort.Strings(list)
	if fmt.Sprint(list) != "[a b c]" {
		t.Fatalf("Entrants %v", list)
	}
	// Places after the seal follow the entrants'.
	if p, _, _ := q.Join(ctx, sale, "late", t0); p != 4 {
		t.Fatalf("first place after the seal %d, want 4", p)
	}
	if n, _ := q.Len(ctx, sale); n != 4 {
		t.Fatalf("Len after the seal %d, want 4", n)
	}
}

func testSealConcurrentWithEnter(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	in := map[string]bool{}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			u := fmt.Sprintf("u%d", i)
			_, err := q.Enter(ctx, sale, u, t0)
			if err == nil {
				mu.Lock()
				in[u] = true
				mu.Unlock()
			} else if !errors.Is(err, flashsale.ErrSealed) {
				t.Error(err)
			}
		}(i)
	}
	var sealed int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, err := q.Seal(ctx, sale)
		if err != nil {
			t.Error(err)
		}
		sealed = n
	}()
	wg.Wait()
	list, _ := q.Entrants(ctx, sale)
	if int64(len(list)) != sealed || len(list) != len(in) {
		t.Fatalf("sealed %d, %d entrants listed, %d told they entered", sealed, len(list), len(in))
	}
	for _, u := range list {
		if !in[u] {
			t.Fatalf("%s is listed but was told the draw had closed", u)
		}
	}
}

func testAdmitNeverLowers(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	if n, _ := q.Admitted(ctx, sale); n != 0 {
		t.Fatalf("a new sale admitted up to %d", n)
	}
	if n, _ := q.Admit(ctx, sale, 10); n != 10 {
		t.Fatalf("Admit(10) = %d", n)
	}
	if n, _ := q.Admit(ctx, sale, 4); n != 10 {
		t.Fatalf("Admit(4) after 10 = %d, want 10", n)
	}
	if n, _ := q.Admitted(ctx, sale); n != 10 {
		t.Fatalf("Admitted %d", n)
	}
}

func testCounters(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := q.Add(ctx, sale, waitroom.CounterClaims, 2); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, _ := q.Counter(ctx, sale, waitroom.CounterClaims); n != 100 {
		t.Fatalf("claims %d, want 100", n)
	}
	if n, _ := q.Counter(ctx, sale, waitroom.CounterAttempts); n != 0 {
		t.Fatalf("attempts %d, want 0", n)
	}
}

func testLead(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	ok, err := q.Lead(ctx, "pacer:"+sale, "origin-a", time.Second)
	if err != nil || !ok {
		t.Fatalf("first lead: %v %v", ok, err)
	}
	if ok, _ := q.Lead(ctx, "pacer:"+sale, "origin-a", time.Second); !ok {
		t.Fatal("the leader could not renew")
	}
}

func testSpendOnce(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	until := time.Minute
	var wg sync.WaitGroup
	var mu sync.Mutex
	spent := 0
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := q.Spend(ctx, sale, "salt-1", until)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				spent++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if spent != 1 {
		t.Fatalf("salt spent %d times, want once", spent)
	}
	if ok, err := q.Spent(ctx, sale, "salt-1"); err != nil || !ok {
		t.Fatalf("a spent salt reads as not spent (%v)", err)
	}
	if ok, err := q.Spent(ctx, sale, "salt-2"); err != nil || ok {
		t.Fatalf("a salt never spent reads as spent (%v)", err)
	}
	if ok, _ := q.Spend(ctx, sale, "salt-2", until); !ok {
		t.Fatal("another salt could not be spent: reading it marked it")
	}
	if ok, _ := q.Spend(ctx, flashsale.NewID("sale_"), "salt-1", until); !ok {
		t.Fatal("the same salt in another sale could not be spent")
	}
}

func testSuspects(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	if m, err := q.Suspects(ctx, sale); err != nil || len(m) != 0 {
		t.Fatalf("a new sale's suspects: %v %v", m, err)
	}
	q.Flag(ctx, sale, "bot-1", "polled too fast")
	q.Flag(ctx, sale, "bot-1", "a later reason")
	q.Flag(ctx, sale, "bot-2", "rate limits")
	m, err := q.Suspects(ctx, sale)
	if err != nil || len(m) != 2 || m["bot-1"] != "polled too fast" || m["bot-2"] != "rate limits" {
		t.Fatalf("suspects %v %v", m, err)
	}
}

// testForget checks that a forgotten sale's queue is empty again, but for
// its suspects, and that another sale's is untouched.
func testForget(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	other := flashsale.NewID("sale_")
	for _, s := range []string{sale, other} {
		q.Enter(ctx, s, "ann", t0)
		q.Seal(ctx, s)
		q.Join(ctx, s, "bob", t0)
		q.Admit(ctx, s, 2)
		q.Add(ctx, s, waitroom.CounterClaims, 3)
		q.Flag(ctx, s, "bot-1", "polled too fast")
	}
	if err := q.Forget(ctx, sale); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if err := q.Forget(ctx, flashsale.NewID("sale_")); err != nil {
		t.Fatalf("Forget of an unknown sale: %v", err)
	}
	for _, s := range []struct {
		id   string
		want int64
	}{{sale, 0}, {other, 2}} {
		n, _ := q.Len(ctx, s.id)
		up, _ := q.Admitted(ctx, s.id)
		claims, _ := q.Counter(ctx, s.id, waitroom.CounterClaims)
		entrants, _ := q.Entrants(ctx, s.id)
		_, entered, _ := q.Entered(ctx, s.id, "ann")
		if n != s.want || up != s.want || claims != 3*s.want/2 || int64(len(entrants)) != s.want/2 || entered != (s.want > 0) {
			t.Fatalf("sale %s after forgetting %s: Len %d, Admitted %d, claims %d, entrants %v, ann entered %v",
				s.id, sale, n, up, claims, entrants, entered)
		}
		if m, err := q.Suspects(ctx, s.id); err != nil || m["bot-1"] != "polled too fast" {
			t.Fatalf("suspects of %s after forgetting %s: %v %v; want them kept", s.id, sale, m, err)
		}
	}
	// The queue starts again from the first place, and entrants may enter.
	if p, _, err := q.Join(ctx, sale, "cat", t0); err != nil || p != 1 {
		t.Fatalf("join after Forget: place %d, %v; want 1", p, err)
	}
	if _, err := q.Enter(ctx, sale, "dan", t0); err != nil {
		t.Fatalf("enter after Forget: %v", err)
	}
}

// testRaise: a cursor raised by many at once ends at the highest, and is
// never lowered.
func testRaise(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := int64(1); i <= 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := q.Raise(ctx, sale, waitroom.CounterTurns, i); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, err := q.Raise(ctx, sale, waitroom.CounterTurns, 3); err != nil || n != 40 {
		t.Fatalf("Raise to 3 after 40: %d %v; want 40", n, err)
	}
	if n, _ := q.Counter(ctx, sale, waitroom.CounterTurns); n != 40 {
		t.Fatalf("turns %d, want 40", n)
	}
}

// testAwait: shoppers noted at their places come back in place order, a
// range at a time; invited shoppers in the order first noted, once each;
// Forget drops them.
func testAwait(t *testing.T, q waitroom.Queue, sale string) {
	ctx := context.Background()
	for _, a := range []struct {
		user string
		pos  int64
	}{{"cat", 3}, {"ann", 1}, {"dan", 5}, {"ann", 1}} {
		if err := q.Await(ctx, sale, a.user, a.pos); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"vip-1", "vip-2", "vip-1"} {
		if err := q.Await(ctx, sale, u, waitroom.Invited); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := q.Awaiting(ctx, sale, 0, 4); err != nil || fmt.Sprint(got) != "[ann cat]" {
		t.Fatalf("Awaiting(0, 4) = %v %v; want [ann cat]", got, err)
	}
	if got, err := q.Awaiting(ctx, sale, 4, 9); err != nil || fmt.Sprint(got) != "[dan]" {
		t.Fatalf("Awaiting(4, 9) = %v %v; want [dan]", got, err)
	}
	if got, err := q.Awaiting(ctx, sale, 5, 5); err != nil || len(got) != 0 {
		t.Fatalf("Awaiting(5, 5) = %v %v; want none", got, err)
	}
	if got, err := q.AwaitingInvited(ctx, sale, 0); err != nil || fmt.Sprint(got) != "[vip-1 vip-2]" {
		t.Fatalf("AwaitingInvited(0) = %v %v; want [vip-1 vip-2]", got, err)
	}
	if got, err := q.AwaitingInvited(ctx, sale, 1); err != nil || fmt.Sprint(got) != "[vip-2]" {
		t.Fatalf("AwaitingInvited(1) = %v %v; want [vip-2]", got, err)
	}
	if got, err := q.AwaitingInvited(ctx, sale, 2); err != nil || len(got) != 0 {
		t.Fatalf("AwaitingInvited(2) = %v %v; want none", got, err)
	}
	if err := q.Forget(ctx, sale); err != nil {
		t.Fatal(err)
	}
	got, _ := q.Awaiting(ctx, sale, 0, 9)
	inv, _ := q.AwaitingInvited(ctx, sale, 0)
	if len(got)+len(inv) != 0 {
		t.Fatalf("after Forget: awaiting %v, invited %v", got, inv)
	}
}
