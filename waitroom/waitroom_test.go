package waitroom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/catalog"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/token"
	"github.com/flashsale/flashsale/waitroom"
)

var opens = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

type fakeLive struct {
	live  waitroom.Live
	err   error
	reads int
}

func (f *fakeLive) Live(context.Context, *flashsale.Sale) (waitroom.Live, error) {
	f.reads++
	return f.live, f.err
}

func newRoom(t *testing.T, clock *testenv.Clock, live *fakeLive) (*waitroom.Room, *token.Keyring) {
	t.Helper()
	k, err := token.GenerateKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := token.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	room := waitroom.New(waitroom.Config{
		Queue: memory.NewQueue(), Tokens: ring, Catalog: catalog.New(nil, catalog.Config{}),
		Live: live, Now: clock.Now, AdmissionTTL: 2 * time.Minute,
	})
	return room, ring
}

func sale(rate int) *flashsale.Sale {
	return &flashsale.Sale{ID: "sale_1", SKU: "s", OpensAt: opens, AdmissionPerSecond: rate, State: flashsale.SaleScheduled, Epoch: 3}
}

func TestAdmittedUpTo(t *testing.T) {
	s := sale(100)
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{{-time.Second, 0}, {0, 100}, {500 * time.Millisecond, 150}, {10 * time.Second, 1100}} {
		if got := waitroom.AdmittedUpTo(s, opens.Add(c.at)); got != c.want {
			t.Errorf("at %v: %d, want %d", c.at, got, c.want)
		}
	}
	if got := waitroom.AdmittedUpTo(sale(0), opens); got < 1<<62 {
		t.Errorf("no rate: %d, want everyone", got)
	}
}

// A shopper asking again keeps the same place, never a better one; places
// are handed out in order of arrival.
func TestTicketPlaceIsStable(t *testing.T) {
	clock := testenv.NewClock(opens.Add(-time.Minute))
	room, ring := newRoom(t, clock, &fakeLive{live: waitroom.Live{Loaded: true, Counter: 10}})
	s := sale(10)
	first, err := room.Ticket(context.Background(), s, "alice", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := room.Ticket(context.Background(), s, "bob", time.Time{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	again, err := room.Ticket(context.Background(), s, "alice", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	a1, _ := ring.VerifyTicket(first.Token)
	a2, _ := ring.VerifyTicket(again.Token)
	if a1.Position != 1 || a2.Position != 1 || !a2.Arrival.Equal(a1.Arrival) {
		t.Fatalf("alice's places: %+v then %+v", a1, a2)
	}
	bob, _ := room.Ticket(context.Background(), s, "bob", time.Time{})
	b, _ := ring.VerifyTicket(bob.Token)
	if b.Position != 2 {
		t.Fatalf("bob's place %d, want 2", b.Position)
	}
}

// Status answers from the ticket and the cached live figures: scheduled,
// waiting with an honest, conservative wait, then admitted with a token
// for the same admission id on every poll.
func TestStatusThroughTheDay(t *testing.T) {
	clock := testenv.NewClock(opens.Add(-10 * time.Second))
	live := &fakeLive{live: waitroom.Live{Loaded: true, Counter: 100, Epoch: 3}}
	room, ring := newRoom(t, clock, live)
	s := sale(10) // 10 a second; 10 admitted at the open
	ctx := context.Background()
	var tok string
	for i := 1; i <= 40; i++ {
		tk, err := room.Ticket(ctx, s, string(rune('a'+i%26))+string(rune('0'+i/26)), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		tok = tk.Token // place 40
	}
	st, err := room.Status(ctx, s, tok)
	if err != nil || st.State != waitroom.StateScheduled || !st.OpensAt.Equal(opens) || st.RetryAfter < time.Second {
		t.Fatalf("before the open: %+v %v", st, err)
	}
	clock.Set(opens)
	st, _ = room.Status(ctx, s, tok)
	// 30 ahead at 10 a second is 3s; a quarter more is 3.75s, rounded up.
	if st.State != waitroom.StateWaiting || st.Position != 30 || st.EstimatedWait != 4*time.Second {
		t.Fatalf("at the open: %+v", st)
	}
	clock.Advance(3 * time.Second)
	st, _ = room.Status(ctx, s, tok)
	if st.State != waitroom.StateAdmitted || st.ExpiresIn != 2*time.Minute {
		t.Fatalf("3s later: %+v", st)
	}
	adm, err := ring.VerifyAdmission(st.AdmissionToken, clock.Now())
	if err != nil || adm.Epoch != 3 || adm.ID != token.AdmissionID(s.ID, adm.UserID, 40, 3) || !adm.Expires.Equal(clock.Now().Add(2*time.Minute)) {
		t.Fatalf("admission %+v %v", adm, err)
	}
	clock.Advance(time.Second)
	st2, _ := room.Status(ctx, s, tok)
	adm2, _ := ring.VerifyAdmission(st2.AdmissionToken, clock.Now())
	if adm2.ID != adm.ID {
		t.Fatalf("a later poll gave another admission id: %s vs %s", adm2.ID, adm.ID)
	}
}

// Sold out is announced from the live figures, not final while holds may
// come back; a shopper who keeps polling is admitted again when they do.
func TestSoldOutFinalOnlyWhenNothingCanReturn(t *testing.T) {
	clock := testenv.NewClock(opens)
	live := &fakeLive{live: waitroom.Live{Loaded: true, Counter: 0, Pending: 3}}
	room, _ := newRoom(t, clock, live)
	s := sale(0)
	ctx := context.Background()
	tk, err := room.Ticket(ctx, s, "alice", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := room.Status(ctx, s, tk.Token)
	if st.State != waitroom.StateSoldOut || st.Final || st.RetryAfter == 0 {
		t.Fatalf("holds pending: %+v", st)
	}
	live.live = waitroom.Live{Loaded: true, Counter: 1, Pending: 2}
	clock.Advance(time.Second) // past the snapshot's lifetime
	if st, _ := room.Status(ctx, s, tk.Token); st.State != waitroom.StateAdmitted {
		t.Fatalf("a hold came back: %+v", st)
	}
	live.live = waitroom.Live{Loaded: true}
	clock.Advance(time.Second)
	if st, _ := room.Status(ctx, s, tk.Token); st.State != waitroom.StateSoldOut || !st.Final {
		t.Fatalf("nothing can come back: %+v", st)
	}
	if _, err := room.Ticket(ctx, s, "latecomer", time.Time{}); flashsale.ErrorCode(err) != flashsale.CodeSoldOut {
		t.Fatalf("a ticket once nothing can be sold: %v", err)
	}
}

// The live figures are read at most once per snapshot lifetime, and the
// last figures are served when a read fails rather than an error.
func TestLiveIsCachedAndSurvivesAFailedRead(t *testing.T) {
	clock := testenv.NewClock(opens)
	live := &fakeLive{live: waitroom.Live{Loaded: true, Counter: 7}}
	room, _ := newRoom(t, clock, live)
	s := sale(0)
	for i := 0; i < 100; i++ {
		if l, err := room.Live(context.Background(), s); err != nil || l.Counter != 7 {
			t.Fatalf("live: %+v %v", l, err)
		}
	}
	if live.reads != 1 {
		t.Fatalf("%d reads for 100 polls within one snapshot lifetime", live.reads)
	}
	live.err = errors.New("gate down")
	clock.Advance(time.Second)
	if l, err := room.Live(context.Background(), s); err != nil || l.Counter != 7 {
		t.Fatalf("after a failed read: %+v %v", l, err)
	}
}

func TestStatusStates(t *testing.T) {
	clock := testenv.NewClock(opens)
	room, ring := newRoom(t, clock, &fakeLive{live: waitroom.Live{Loaded: true, Counter: 5}})
	ctx := context.Background()
	s := sale(0)
	tk, _ := room.Ticket(ctx, s, "alice", time.Time{})

	paused := *s
	paused.State = flashsale.SalePaused
	if st, _ := room.Status(ctx, &paused, tk.Token); st.State != waitroom.StatePaused || st.RetryAfter == 0 {
		t.Fatalf("paused: %+v", st)
	}
	closed := *s
	closed.ClosesAt = opens.Add(-time.Second)
	closed.OpensAt = opens.Add(-time.Hour)
	if st, _ := room.Status(ctx, &closed, tk.Token); st.State != waitroom.StateClosed {
		t.Fatalf("closed: %+v", st)
	}
	other := *s
	other.ID = "sale_2"
	if _, err := room.Status(ctx, &other, tk.Token); flashsale.ErrorCode(err) != flashsale.CodeInvalidToken {
		t.Fatalf("another sale's ticket: %v", err)
	}
	forged := ring.SignTicket(token.Ticket{UserID: "x", SaleID: s.ID, Position: 1})
	if _, err := room.Status(ctx, s, forged[:len(forged)-3]+"AAA"); flashsale.ErrorCode(err) != flashsale.CodeInvalidToken {
		t.Fatalf("forged ticket: %v", err)
	}
	old := *s
	old.MinAccountAgeSeconds = 86400
	if _, err := room.Ticket(ctx, &old, "newbie", opens.Add(-time.Hour)); flashsale.ErrorCode(err) != flashsale.CodeNotEligible {
		t.Fatalf("young account: %v", err)
	}
	if _, err := room.Ticket(ctx, &old, "noclaim", time.Time{}); flashsale.ErrorCode(err) != flashsale.CodeNotEligible {
		t.Fatalf("no acct_created: %v", err)
	}
	if _, err := room.Ticket(ctx, &old, "veteran", opens.Add(-48*time.Hour)); err != nil {
		t.Fatalf("old account: %v", err)
	}
}
