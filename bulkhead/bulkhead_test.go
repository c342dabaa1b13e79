package bulkhead

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		in         Config
		max, share int
	}{
		{Config{Max: 32}, 32, 16},
		{Config{Max: 1}, 1, 1},
		{Config{Max: 0}, 1, 1},
		{Config{Max: 8, PerKey: 20}, 8, 8},
		{Config{Max: 8, PerKey: 3}, 8, 3},
	} {
		got := New(tc.in).Config()
		if got.Max != tc.max || got.PerKey != tc.share {
			t.Errorf("New(%+v): max %d per key %d, want %d and %d", tc.in, got.Max, got.PerKey, tc.max, tc.share)
		}
	}
}

// hold takes n slots for key and returns their releases.
func hold(t *testing.T, b *Bulkhead, key string, n int) []func() {
	t.Helper()
	var out []func()
	for i := 0; i < n; i++ {
		release, ok := b.Acquire(context.Background(), key)
		if !ok {
			t.Fatalf("slot %d of %s shed", i, key)
		}
		out = append(out, release)
	}
	return out
}

// TestShedsAtOnceWhenFull: with no wait, the request past the bound is
// shed, and the same request succeeds once a slot is given back.
func TestShedsAtOnceWhenFull(t *testing.T) {
	b := New(Config{Max: 4, PerKey: 4})
	held := hold(t, b, "a", 4)
	if _, ok := b.Acquire(context.Background(), "a"); ok {
		t.Fatal("a fifth slot was handed out")
	}
	if b.Shed() != 1 || b.InFlight() != 4 {
		t.Fatalf("shed %d in flight %d, want 1 and 4", b.Shed(), b.InFlight())
	}
	held[0]()
	held[0]() // a second release gives back nothing more
	if b.InFlight() != 3 {
		t.Fatalf("in flight %d after one release (twice), want 3", b.InFlight())
	}
	release, ok := b.Acquire(context.Background(), "a")
	if !ok {
		t.Fatal("the repeat was shed with a slot free")
	}
	release()
	for _, r := range held[1:] {
		r()
	}
	if b.InFlight() != 0 || b.InFlightOf("a") != 0 {
		t.Fatalf("in flight %d (a: %d) after every release", b.InFlight(), b.InFlightOf("a"))
	}
}

// TestPerKeyShare: a key that holds its share is shed while another key
// still finds slots.
func TestPerKeyShare(t *testing.T) {
	b := New(Config{Max: 6}) // three per key
	hold(t, b, "big", 3)
	if _, ok := b.Acquire(context.Background(), "big"); ok {
		t.Fatal("the big sale took more than its share")
	}
	quiet := hold(t, b, "quiet", 3)
	if b.InFlightOf("big") != 3 || b.InFlightOf("quiet") != 3 {
		t.Fatalf("big %d quiet %d", b.InFlightOf("big"), b.InFlightOf("quiet"))
	}
	quiet[0]()
	if _, ok := b.Acquire(context.Background(), "big"); ok {
		t.Fatal("the big sale took the quiet one's freed slot beyond its share")
	}
}

// TestWaiterGetsTheFreedSlot: a request waiting for a slot gets the first
// one given back, ahead of its timeout.
func TestWaiterGetsTheFreedSlot(t *testing.T) {
	b := New(Config{Max: 2, PerKey: 2, Wait: time.Hour})
	queued := make(chan string, 1)
	b.queued = func(key string) { queued <- key }
	held := hold(t, b, "a", 2)

	got := waits(context.Background(), t, b, queued, "a")
	held[0]()
	if !<-got {
		t.Fatal("the waiter was shed although a slot was given back")
	}
	held[1]()
}

// TestWaiterWhoseKeyIsFullLetsOthersPass: a freed slot goes to the first
// waiter whose key has room, not to one whose sale is at its share.
func TestWaiterWhoseKeyIsFullLetsOthersPass(t *testing.T) {
	b := New(Config{Max: 4, PerKey: 2, Wait: time.Hour})
	queued := make(chan string, 2)
	b.queued = func(key string) { queued <- key }
	big := hold(t, b, "big", 2)
	other := hold(t, b, "other", 2)

	results := make(chan string, 2)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, key := range []string{"big", "quiet"} {
		wg.Go(func() {
			release, ok := b.Acquire(ctx, key)
			if ok {
				results <- key
				release()
				return
			}
			results <- "shed " + key
		})
		<-queued // big queues first
	}
	other[0]() // a slot of "other" frees: big is at its share, quiet is not
	if got := <-results; got != "quiet" {
		t.Fatalf("the freed slot went to %q, want quiet", got)
	}
	cancel() // big gives up waiting
	if got := <-results; got != "shed big" {
		t.Fatalf("big: %q, want shed", got)
	}
	wg.Wait()
	for _, r := range append(big, other[1]) {
		r()
	}
	if b.InFlight() != 0 {
		t.Fatalf("in flight %d after every release", b.InFlight())
	}
}

// TestWaitIsBounded: a request nobody frees a slot for is shed after the
// wait, and no waiter is left behind.
func TestWaitIsBounded(t *testing.T) {
	b := New(Config{Max: 1, Wait: time.Millisecond})
	hold(t, b, "a", 1)
	if _, ok := b.Acquire(context.Background(), "a"); ok {
		t.Fatal("a slot was handed out past the bound")
	}
	b.mu.Lock()
	left, queues := b.waiting, len(b.queues)
	b.mu.Unlock()
	if left != 0 || queues != 0 {
		t.Fatalf("%d waiters (%d queues) left behind", left, queues)
	}
}

// TestWaitersAreBounded: at most Max requests wait; the next is shed at
// once.
func TestWaitersAreBounded(t *testing.T) {
	b := New(Config{Max: 1, Wait: time.Hour})
	queued := make(chan string, 1)
	b.queued = func(key string) { queued <- key }
	release := hold(t, b, "a", 1)[0]
	done := waits(context.Background(), t, b, queued, "a")
	shedAtOnce(t, b, queued, "a") // a second waiter
	release()
	if !<-done {
		t.Fatal("the one waiter was shed")
	}
}

// TestConcurrentNeverExceeds: under many goroutines, the bound and the
// share hold at every moment, and every slot comes back.
func TestConcurrentNeverExceeds(t *testing.T) {
	b := New(Config{Max: 8, PerKey: 5, Wait: time.Millisecond})
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak, peakKey := 0, map[string]int{}
	for i := 0; i < 64; i++ {
		key := []string{"a", "b", "c"}[i%3]
		wg.Go(func() {
			for j := 0; j < 50; j++ {
				release, ok := b.Acquire(context.Background(), key)
				if !ok {
					continue
				}
				mu.Lock()
				peak = max(peak, b.InFlight())
				peakKey[key] = max(peakKey[key], b.InFlightOf(key))
				mu.Unlock()
				release()
			}
		})
	}
	wg.Wait()
	if peak > 8 {
		t.Fatalf("peak in flight %d, bound 8", peak)
	}
	for k, p := range peakKey {
		if p > 5 {
			t.Fatalf("peak of %s %d, share 5", k, p)
		}
	}
	if b.InFlight() != 0 {
		t.Fatalf("in flight %d at the end", b.InFlight())
	}
}

// TestShares: a key named in Shares holds its own number of slots, not
// PerKey, and out-of-range shares are clamped.
func TestShares(t *testing.T) {
	b := New(Config{Max: 8, PerKey: 4, Shares: map[string]int{"shared": 2, "zero": 0, "huge": 99}})
	if b.Share("shared") != 2 || b.Share("zero") != 1 || b.Share("huge") != 8 || b.Share("sale") != 4 {
		t.Fatalf("shares %d %d %d %d, want 2 1 8 4", b.Share("shared"), b.Share("zero"), b.Share("huge"), b.Share("sale"))
	}
	hold(t, b, "shared", 2)
	if _, ok := b.Acquire(context.Background(), "shared"); ok {
		t.Fatal("the shared key took more than its share")
	}
	hold(t, b, "sale", 4)
	if b.InFlight() != 6 {
		t.Fatalf("in flight %d, want 6", b.InFlight())
	}
}

// TestMaxWaiting: MaxWaiting lets more requests wait than Max may run,
// and no more.
func TestMaxWaiting(t *testing.T) {
	b := New(Config{Max: 1, Wait: time.Hour, MaxWaiting: 3})
	queued := make(chan string, 3)
	b.queued = func(key string) { queued <- key }
	release := hold(t, b, "a", 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var results []chan bool
	for range 3 {
		results = append(results, waits(ctx, t, b, queued, "a"))
	}
	shedAtOnce(t, b, queued, "a") // a fourth waiter
	release()
	for _, got := range results {
		if !<-got {
			t.Fatal("a waiter within MaxWaiting was shed")
		}
	}
}

// TestOldestWaiterFirst: with many waiters over several keys, freed slots
// go oldest first among the keys with room, a waiter that gave up is
// passed over, and the queues are empty at the end.
func TestOldestWaiterFirst(t *testing.T) {
	b := New(Config{Max: 2, PerKey: 2, Wait: time.Hour, MaxWaiting: 16})
	queued := make(chan string, 16)
	b.queued = func(key string) { queued <- key }
	held := hold(t, b, "x", 2)

	type result struct {
		name string
		ok   bool
	}
	granted := make(chan result, 16)
	cancels := map[string]context.CancelFunc{}
	gotSlot := make(chan func(), 16)
	names := []string{"a1", "b1", "a2", "gone", "b2", "a3"}
	for _, name := range names {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[name] = cancel
		key := name[:1]
		if name == "gone" {
			key = "a"
		}
		go func() {
			r, ok := b.Acquire(ctx, key)
			granted <- result{name, ok}
			if ok {
				gotSlot <- r
			}
		}()
		<-queued
	}
	cancels["gone"]()
	if got := <-granted; got != (result{"gone", false}) {
		t.Fatalf("first answer %+v, want gone shed", got)
	}
	// Each slot given back goes to the next waiter in arrival order.
	release := held[0]
	held[1]()
	if got := <-granted; got != (result{"a1", true}) {
		t.Fatalf("got %+v, want a1", got)
	}
	for _, want := range []string{"b1", "a2", "b2", "a3"} {
		release()
		if got := <-granted; got != (result{want, true}) {
			t.Fatalf("got %+v, want %s", got, want)
		}
		release = <-gotSlot
	}
	release()
	(<-gotSlot)()
	for _, cancel := range cancels {
		cancel()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight != 0 || b.waiting != 0 || len(b.queues) != 0 {
		t.Fatalf("in flight %d, waiting %d, queues %d at the end", b.inFlight, b.waiting, len(b.queues))
	}
}

// acquire asks for a slot for key in a goroutine of its own; the channel
// receives whether it got one (a slot it got is given back at once).
func acquire(ctx context.Context, b *Bulkhead, key string) chan bool {
	got := make(chan bool, 1)
	go func() {
		r, ok := b.Acquire(ctx, key)
		if ok {
			r()
		}
		got <- ok
	}()
	return got
}

// waits asks for a slot for key that must wait for one: a request
// answered before it queues (queued receives its key) fails the test. The
// channel receives the answer, as acquire's.
func waits(ctx context.Context, t *testing.T, b *Bulkhead, queued chan string, key string) chan bool {
	t.Helper()
	got := acquire(ctx, b, key)
	select {
	case k := <-queued:
		if k != key {
			t.Fatalf("queued %q, want %q", k, key)
		}
	case ok := <-got:
		t.Fatalf("%s answered %v at once, want it to wait", key, ok)
	}
	return got
}

// shedAtOnce checks that a request for key is shed without waiting: one
// that queues (queued receives its key) fails the test and is called off.
func shedAtOnce(t *testing.T, b *Bulkhead, queued chan string, key string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := acquire(ctx, b, key)
	select {
	case <-queued:
		t.Errorf("%s waited, want it shed at once", key)
		cancel()
		<-got
	case ok := <-got:
		if ok {
			t.Errorf("%s got a slot, want it shed", key)
		}
	}
}

// TestPatient: a patient key's requests wait by its own Patience, past a
// crowd that is shed at once and past a line full of the crowd's waiters;
// its own bound on waiters holds; and its waiters take no place in the
// crowd's line.
func TestPatient(t *testing.T) {
	b := New(Config{Max: 4, PerKey: 1, Wait: time.Hour, MaxWaiting: 1,
		Patient: map[string]Patience{"pay": {Wait: time.Hour, MaxWaiting: 2}}})
	queued := make(chan string, 8)
	b.queued = func(key string) { queued <- key }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := func(key string) chan bool { return waits(ctx, t, b, queued, key) }
	releaseCrowd := hold(t, b, "crowd", 1)[0]
	releasePay := hold(t, b, "pay", 1)[0]

	crowd := wait("crowd")                 // the crowd's line (MaxWaiting 1) is full now
	shedAtOnce(t, b, queued, "crowd")      // a second crowd waiter, past MaxWaiting 1
	pay1, pay2 := wait("pay"), wait("pay") // not shed for the crowd's full line
	shedAtOnce(t, b, queued, "pay")        // a third, past its own MaxWaiting 2
	if got := b.Waiting(); got != 3 {
		t.Fatalf("Waiting() = %d, want 3", got)
	}
	releasePay()
	if !<-pay1 || !<-pay2 {
		t.Fatal("a patient waiter was shed")
	}
	releaseCrowd()
	if !<-crowd {
		t.Fatal("the crowd's waiter was shed")
	}

	// The patient waiters take no place in the crowd's line.
	releaseCrowd = hold(t, b, "crowd", 1)[0]
	releasePay = hold(t, b, "pay", 1)[0]
	pay := wait("pay")
	crowd = wait("crowd")
	releaseCrowd()
	releasePay()
	if !<-crowd || !<-pay {
		t.Fatal("a waiter was shed")
	}
	if got := b.Waiting(); got != 0 {
		t.Fatalf("Waiting() = %d once all were served, want 0", got)
	}

	// A patient waiter that gives up leaves the crowd's line as it was.
	releaseCrowd = hold(t, b, "crowd", 1)[0]
	defer releaseCrowd()
	hold(t, b, "pay", 1)
	payCtx, giveUp := context.WithCancel(ctx)
	gaveUp := waits(payCtx, t, b, queued, "pay")
	giveUp()
	if <-gaveUp {
		t.Fatal("a patient waiter that gave up got a slot")
	}
	wait("crowd")
	shedAtOnce(t, b, queued, "crowd") // the line is one long still
}

// TestPatientWait: a patient key waits its own time, longer or shorter
// than the others'.
func TestPatientWait(t *testing.T) {
	b := New(Config{Max: 2, PerKey: 1, Wait: -1,
		Patient: map[string]Patience{"pay": {Wait: time.Hour}, "never": {Wait: -1}}})
	queued := make(chan string, 8)
	b.queued = func(key string) { queued <- key }
	hold(t, b, "crowd", 1)
	shedAtOnce(t, b, queued, "crowd")
	release := hold(t, b, "pay", 1)[0]
	got := waits(context.Background(), t, b, queued, "pay")
	release()
	if !<-got {
		t.Fatal("the patient waiter was shed")
	}
	if _, ok := b.Acquire(context.Background(), "never"); !ok {
		t.Fatal("a free slot was refused")
	}
	shedAtOnce(t, b, queued, "never")
}

// TestKeyWaiting: one key (an account) may have KeyWaiting requests
// waiting; its next is shed at once, while another key is served at once
// and may wait its own turn.
func TestKeyWaiting(t *testing.T) {
	b := New(Config{Max: 1 << 20, PerKey: 1, Wait: time.Hour, MaxWaiting: 100, KeyWaiting: 2})
	queued := make(chan string, 8)
	b.queued = func(key string) { queued <- key }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := hold(t, b, "acct", 1)[0]
	first, second := waits(ctx, t, b, queued, "acct"), waits(ctx, t, b, queued, "acct")
	shedAtOnce(t, b, queued, "acct") // a third waiter of the same account
	other := hold(t, b, "other", 1)[0]
	otherWaits := waits(ctx, t, b, queued, "other") // another account has a line of its own
	release()
	if !<-first || !<-second {
		t.Fatal("a waiter within KeyWaiting was shed")
	}
	other()
	if !<-otherWaits {
		t.Fatal("the other key's waiter was shed")
	}
	if b.InFlight() != 0 || b.Waiting() != 0 {
		t.Fatalf("in flight %d, waiting %d at the end", b.InFlight(), b.Waiting())
	}
}

// TestReleaseWakesOnlyItsKey: with room in total, a slot given back goes
// to its own key's oldest waiter, never to another key's (which waits for
// its own share).
func TestReleaseWakesOnlyItsKey(t *testing.T) {
	b := New(Config{Max: 1 << 20, PerKey: 1, Wait: time.Hour, MaxWaiting: 100})
	queued := make(chan string, 8)
	b.queued = func(key string) { queued <- key }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	releaseA := hold(t, b, "a", 1)[0]
	releaseB := hold(t, b, "b", 1)[0]
	waitA := waits(ctx, t, b, queued, "a")
	waitB := waits(ctx, t, b, queued, "b")
	releaseA()
	if !<-waitA {
		t.Fatal("a's waiter was shed")
	}
	select {
	case ok := <-waitB:
		t.Fatalf("b's waiter was answered %v when a's slot was given back", ok)
	default:
	}
	if b.InFlightOf("b") != 1 || b.Waiting() != 1 {
		t.Fatalf("b holds %d, %d waiting; want 1 and its waiter", b.InFlightOf("b"), b.Waiting())
	}
	releaseB()
	if !<-waitB {
		t.Fatal("b's waiter was shed")
	}
}

// TestManyKeysOneEach: many keys of one slot each, under the race
// detector: no key ever holds two, and with a long wait no one is shed.
func TestManyKeysOneEach(t *testing.T) {
	b := New(Config{Max: 1 << 20, PerKey: 1, Wait: time.Hour, MaxWaiting: 1 << 10})
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := 0
	for i := range 64 {
		key := string(rune('a' + i%16))
		wg.Go(func() {
			for range 20 {
				release, ok := b.Acquire(context.Background(), key)
				if !ok {
					t.Error("shed with an hour's wait")
					return
				}
				mu.Lock()
				peak = max(peak, b.InFlightOf(key))
				mu.Unlock()
				release()
			}
		})
	}
	wg.Wait()
	if peak != 1 {
		t.Fatalf("a key held %d slots at once, want 1", peak)
	}
	if b.InFlight() != 0 || b.Waiting() != 0 {
		t.Fatalf("in flight %d, waiting %d at the end", b.InFlight(), b.Waiting())
	}
}
