package waitroom

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/token"
)

// countingQueue counts the calls that decide places.
type countingQueue struct {
	Queue
	joins, enters atomic.Int64
}

func (c *countingQueue) Join(ctx context.Context, saleID, userID string, now time.Time) (int64, time.Time, error) {
	c.joins.Add(1)
	return c.Queue.Join(ctx, saleID, userID, now)
}

func (c *countingQueue) Enter(ctx context.Context, saleID, userID string, now time.Time) (time.Time, error) {
	c.enters.Add(1)
	return c.Queue.Enter(ctx, saleID, userID, now)
}

// fixedSnapshots answers every poll from fixed snapshots.
type fixedSnapshots map[string]*Snapshot

func (f fixedSnapshots) Snapshot(_ context.Context, sku string) (*Snapshot, error) {
	if s, ok := f[sku]; ok {
		return s, nil
	}
	return nil, flashsale.ErrNotFound
}

func (f fixedSnapshots) DrawIndex(context.Context, *Snapshot) (*DrawIndex, error) {
	return nil, flashsale.ErrNotFound
}

func (f fixedSnapshots) DrawDocument(context.Context, *Snapshot) (*DrawDocument, error) {
	return nil, flashsale.ErrNotFound
}

func placesRig(t *testing.T, capacity int) (*Room, *countingQueue, *token.Keyring) {
	t.Helper()
	k, err := token.GenerateKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := token.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	q := &countingQueue{Queue: memory.NewQueue()}
	snaps := fixedSnapshots{
		"fifo": {Sale: SaleInfo{ID: "sale_fifo", SKU: "fifo", State: flashsale.SaleOpen, OpensAt: opens,
			Fairness: flashsale.FairnessFIFO, InitialStock: 10, PerUserLimit: 1, AdmissionPerSecond: 1},
			Loaded: true, Counter: 10},
		"random": {Sale: SaleInfo{ID: "sale_random", SKU: "random", State: flashsale.SaleScheduled,
			OpensAt: opens.Add(time.Hour), Fairness: flashsale.FairnessRandom, InitialStock: 10, PerUserLimit: 1},
			Loaded: true, Counter: 10},
	}
	room := New(Config{Queue: q, Tokens: keys, Snapshots: snaps, Now: testenv.NewClock(opens).Now, PlaceCache: capacity})
	return room, q, keys
}

// TestRoomRemembersPlaces: a shopper asking again gets the same place
// from memory, with no call to the queue; places pending a draw are asked
// again; the memory is bounded, and can be turned off.
func TestRoomRemembersPlaces(t *testing.T) {
	ctx := context.Background()
	room, q, keys := placesRig(t, 0)
	placeOf := func(sku, user string) int64 {
		t.Helper()
		tk, err := room.Ticket(ctx, sku, user, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := keys.VerifyTicket(tk.Token, "sale_"+sku)
		if err != nil {
			t.Fatal(err)
		}
		return v.Position
	}
	first, err := room.Ticket(ctx, "fifo", "ann", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if got := placeOf("fifo", "ann"); got != 1 {
			t.Fatalf("ann's place on ask %d: %d, want 1", i+1, got)
		}
		// The remembered ticket is the one signing again would give.
		again, _ := room.Ticket(ctx, "fifo", "ann", time.Time{})
		v, err := keys.VerifyTicket(again.Token, "sale_fifo")
		if err != nil || again.Token != first.Token || keys.SignTicket(v) != again.Token {
			t.Fatalf("asking again gave another ticket: %v", err)
		}
	}
	if got := placeOf("fifo", "bob"); got != 2 {
		t.Fatalf("bob's place: %d, want 2", got)
	}
	if n := q.joins.Load(); n != 2 {
		t.Fatalf("%d joins for 12 asks of 2 shoppers, want 2", n)
	}

	// Before a random sale's draw the place is pending: not final, so not
	// remembered.
	for range 3 {
		if got := placeOf("random", "cat"); got != PendingDraw {
			t.Fatalf("cat's place before the draw: %d", got)
		}
	}
	if n := q.enters.Load(); n != 3 {
		t.Fatalf("%d entries for 3 asks pending the draw, want 3", n)
	}

	// Bounded: 128 places at most, 2 a shard.
	small, _, _ := placesRig(t, 2*placeShards)
	for i := range 1000 {
		if _, err := small.Ticket(ctx, "fifo", fmt.Sprintf("u%d", i), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range small.places.shards {
		if n := len(small.places.shards[i].m); n > 2 {
			t.Fatalf("shard %d holds %d places, bound 2", i, n)
		}
	}

	// Off.
	none, q3, _ := placesRig(t, -1)
	for range 3 {
		if _, err := none.Ticket(ctx, "fifo", "ann", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := q3.joins.Load(); n != 3 {
		t.Fatalf("with no memory, %d joins for 3 asks, want 3", n)
	}
}

// TestSoldOutPollingByOdds: while sold out is not final, a shopper whose
// place the returning holds could reach is asked back each second, one far
// behind them every ten seconds; once final, no one is asked back.
func TestSoldOutPollingByOdds(t *testing.T) {
	ctx := context.Background()
	room, _, keys := placesRig(t, 0)
	snap := room.cfg.Snapshots.(fixedSnapshots)["fifo"]
	snap.Counter, snap.Pending, snap.AdmittedUpTo = 0, 3, 10
	poll := func(position int64) Status {
		t.Helper()
		tok := keys.SignTicket(token.Ticket{UserID: fmt.Sprint("u", position), SaleID: "sale_fifo", Arrival: opens, Position: position})
		st, err := room.Status(ctx, "fifo", tok)
		if err != nil || st.State != StateSoldOut {
			t.Fatalf("position %d: %+v %v", position, st, err)
		}
		return st
	}
	for _, c := range []struct {
		position int64
		want     time.Duration
	}{{5, time.Second}, {16, time.Second}, {17, farBehind}, {5000, farBehind}} {
		if st := poll(c.position); st.Final || st.RetryAfter != c.want {
			t.Errorf("position %d (3 units held, admitted up to 10): final %v, retry after %v; want %v", c.position, st.Final, st.RetryAfter, c.want)
		}
	}
	snap.Pending = 0
	if st := poll(5000); !st.Final || st.RetryAfter != 0 {
		t.Errorf("final sold out: %+v", st)
	}
}

// flagCounter counts the writes that hold a shopper as automation.
type flagCounter struct {
	Queue
	flags atomic.Int64
}

func (f *flagCounter) Flag(ctx context.Context, saleID, userID, reason string) error {
	f.flags.Add(1)
	return f.Queue.Flag(ctx, saleID, userID, reason)
}

// A client hammering its status is held with one write, not one a poll:
// the room's answer to it stays as cheap as to anyone.
func TestHammeringPollerFlaggedOnce(t *testing.T) {
	ctx := context.Background()
	room, q, keys := placesRig(t, 0)
	fc := &flagCounter{Queue: q}
	room.cfg.Queue = fc
	tok := keys.SignTicket(token.Ticket{UserID: "hammer", SaleID: "sale_fifo", Arrival: opens, Position: 5})
	for range 500 {
		if _, err := room.StatusFor(ctx, "fifo", tok, "hammer"); err != nil {
			t.Fatal(err)
		}
	}
	if n := fc.flags.Load(); n != 1 {
		t.Fatalf("%d writes to hold one shopper, want 1", n)
	}
}

// TestCopiedTicketHoldsNoOne: polls of a ticket that carry no shopper JWT
// (anyone with a copy can send them) never hold the ticket's shopper: past
// the poll limits they are told 429 rate_limited with Retry-After, while
// the shopper's own polls (bound to its JWT) are answered as before and
// counted apart. A poll with another shopper's JWT is refused.
func TestCopiedTicketHoldsNoOne(t *testing.T) {
	ctx := context.Background()
	room, q, keys := placesRig(t, 0)
	fc := &flagCounter{Queue: q}
	room.cfg.Queue = fc
	tok := keys.SignTicket(token.Ticket{UserID: "victim", SaleID: "sale_fifo", Arrival: opens, Position: 5})
	limited := 0
	for range 500 {
		_, err := room.Status(ctx, "fifo", tok)
		switch {
		case err == nil:
		case flashsale.ErrorCode(err) == flashsale.CodeRateLimited:
			var fe *flashsale.Error
			if !errors.As(err, &fe) || fe.RetryAfter < time.Second {
				t.Fatalf("429 without a Retry-After: %v", err)
			}
			limited++
		default:
			t.Fatal(err)
		}
	}
	if n := fc.flags.Load(); n != 0 {
		t.Fatalf("500 polls of a copy wrote %d holds of its shopper, want none", n)
	}
	if limited < 500-room.cfg.PollLimit {
		t.Fatalf("%d of 500 anonymous polls told 429, want every one past the limits", limited)
	}
	if st, err := room.StatusFor(ctx, "fifo", tok, "victim"); err != nil || st.State == "" {
		t.Fatalf("the shopper's own poll meanwhile: %+v %v", st, err)
	}
	if _, err := room.StatusFor(ctx, "fifo", tok, "mallory"); err != ErrNotYourTicket {
		t.Fatalf("a poll with another shopper's JWT: %v, want ErrNotYourTicket", err)
	}
	if n := fc.flags.Load(); n != 0 {
		t.Fatalf("%d holds written, want none", n)
	}
}
