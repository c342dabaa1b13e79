package client_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/waitroom"
)

// statusLog records what a Waiter reported.
type statusLog struct {
	mu  sync.Mutex
	all []client.Status
}

func (l *statusLog) add(st *client.Status) {
	l.mu.Lock()
	l.all = append(l.all, *st)
	l.mu.Unlock()
}

func (l *statusLog) states() []client.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []client.State
	for _, s := range l.all {
		if len(out) == 0 || out[len(out)-1] != s.State {
			out = append(out, s.State)
		}
	}
	return out
}

// checkPacing fails the test unless each wait the client took after a
// status came no sooner than that status's Retry-After.
func checkPacing(t *testing.T, log *statusLog, waits []time.Duration) {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	polled := 0
	for i, st := range log.all {
		if st.State == client.StateAdmitted || (st.State == client.StateSoldOut && st.Final) ||
			st.State == client.StateClosed || st.State == client.StateNotSelected {
			break
		}
		if i >= len(waits) {
			t.Fatalf("status %d (%+v) was not followed by a wait; waits %v", i, st, waits)
		}
		want := max(st.RetryAfter, time.Second)
		if waits[i] < want {
			t.Fatalf("wait %d: %v after a status asking %v (%+v)", i, waits[i], want, st)
		}
		polled++
	}
	if polled == 0 {
		t.Fatalf("no poll was paced: statuses %+v, waits %v", log.all, waits)
	}
}

// TestWaiterWaitsItsTurn: from before the open, through a paced queue, to
// the admission, polling no sooner than asked and reporting the position
// as it falls; the admission it returns buys.
func TestWaiterWaitsItsTurn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("paced", func(s *client.NewSale) {
			s.OpensAt, s.AdmissionPerSecond = start.Add(20*time.Second), 1
		})
		for i := 0; i < 5; i++ {
			if _, err := h.shopper(fmt.Sprint("early-", i)).Ticket(ctx, "paced"); err != nil {
				t.Fatal(err)
			}
		}
		tk, err := h.shopper("zoe").Ticket(ctx, "paced")
		if err != nil || tk.Position < 6 || tk.RetryAfter <= 0 {
			t.Fatalf("ticket: %+v %v", tk, err)
		}
		h.onSleep = func(time.Duration) {
			if err := h.eng.Warmer.WarmOnce(ctx); err != nil {
				t.Error(err)
			}
			if err := h.eng.Pacer.TickOnce(ctx); err != nil {
				t.Error(err)
			}
		}
		log := &statusLog{}
		st, err := (&client.Waiter{Client: h.c, SKU: "paced", OnStatus: log.add}).Wait(ctx, tk.Token)
		if err != nil || st.State != client.StateAdmitted || st.AdmissionToken == "" || st.Token != tk.Token {
			t.Fatalf("wait: %+v %v", st, err)
		}
		states := log.states()
		if len(states) != 3 || states[0] != client.StateScheduled || states[1] != client.StateWaiting || states[2] != client.StateAdmitted {
			t.Fatalf("states seen: %v", states)
		}
		last := int64(1 << 62)
		for _, s := range log.all {
			if s.State == client.StateWaiting {
				if s.Position > last || s.Position < 1 {
					t.Fatalf("positions reported: %+v", log.all)
				}
				last = s.Position
			}
		}
		checkPacing(t, log, h.waits())
		if _, err := h.shopper("zoe").Reserve(ctx, "paced", client.ReserveRequest{AdmissionToken: st.AdmissionToken}); err != nil {
			t.Fatalf("reserve with the admission: %v", err)
		}
	})
}

// TestWaiterSolvesTheChallenge: a sale that asks a proof of work admits
// the Waiter after it solves it; with ReturnChallenge the caller gets the
// challenge, and a wrong nonce is challenge_failed; an admission whose
// answer is lost still ends admitted, the status telling so.
func TestWaiterSolvesTheChallenge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("pow", func(s *client.NewSale) { s.ChallengeBits = 8 })
		if pub, err := h.c.Sale(ctx, "pow"); err != nil || !pub.Policy.Challenge {
			t.Fatalf("sale: %+v %v", pub, err)
		}

		tk, _ := h.shopper("alice").Ticket(ctx, "pow")
		log := &statusLog{}
		st, err := (&client.Waiter{Client: h.c, SKU: "pow", OnStatus: log.add}).Wait(ctx, tk.Token)
		if err != nil || st.State != client.StateAdmitted || st.AdmissionToken == "" {
			t.Fatalf("wait: %+v %v", st, err)
		}
		if s := log.states(); len(s) != 2 || s[0] != client.StateChallenge || s[1] != client.StateAdmitted {
			t.Fatalf("states seen: %v", s)
		}
		if _, err := h.shopper("alice").Reserve(ctx, "pow", client.ReserveRequest{AdmissionToken: st.AdmissionToken}); err != nil {
			t.Fatalf("reserve: %v", err)
		}

		tk, _ = h.shopper("bob").Ticket(ctx, "pow")
		st, err = (&client.Waiter{Client: h.c, SKU: "pow", ReturnChallenge: true}).Wait(ctx, tk.Token)
		if err != nil || st.State != client.StateChallenge || st.Challenge == nil || st.Challenge.Algorithm != "sha256" ||
			st.Challenge.DifficultyBits != 8 || st.Challenge.ExpiresIn <= 0 {
			t.Fatalf("returned challenge: %+v %v", st, err)
		}
		nonce, err := client.SolveChallenge(ctx, *st.Challenge)
		if err != nil {
			t.Fatal(err)
		}
		wrong := "x" + nonce
		_, err = h.c.Admission(ctx, "pow", client.AdmissionRequest{Token: tk.Token, Salt: st.Challenge.Salt, Nonce: wrong})
		wantCode(t, "a wrong nonce", err, client.ErrChallengeFailed, 403)
		a, err := h.c.Admission(ctx, "pow", client.AdmissionRequest{Token: tk.Token, Salt: st.Challenge.Salt, Nonce: nonce})
		if err != nil || a.AdmissionToken == "" || a.ExpiresIn != 120 {
			t.Fatalf("admission: %+v %v", a, err)
		}

		// The answer to carol's admission is lost after the server made
		// it: the Waiter polls again and is told admitted.
		var lost sync.Once
		var dropped atomic.Bool
		h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.URL.Path != "/sale/pow/admission" {
				next.ServeHTTP(w, r)
				return
			}
			first := false
			lost.Do(func() { first = true })
			if !first {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			dropped.Store(rec.Code == http.StatusOK)
			hangUp(t, w)
		}
		tk, _ = h.shopper("carol").Ticket(ctx, "pow")
		log = &statusLog{}
		st, err = (&client.Waiter{Client: h.c, SKU: "pow", OnStatus: log.add}).Wait(ctx, tk.Token)
		if err != nil || st.State != client.StateAdmitted || !dropped.Load() {
			t.Fatalf("after a lost admission: %+v %v (the server admitted: %v)", st, err, dropped.Load())
		}
		if s := log.states(); len(s) != 2 || s[0] != client.StateChallenge || s[1] != client.StateAdmitted {
			t.Fatalf("states seen: %v", s)
		}
	})
}

// hangUp closes the connection without an answer.
func hangUp(t *testing.T, w http.ResponseWriter) {
	t.Helper()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

// TestWaiterKeepsThePlaceUntilSoldOutIsFinal: sold out while a hold is
// pending is not the end: the Waiter keeps polling, and is admitted when
// the hold lapses and its unit comes back; once the last hold is paid for,
// sold out is final and the Waiter returns it.
func TestWaiterKeepsThePlaceUntilSoldOutIsFinal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("one", func(s *client.NewSale) { s.InitialStock, s.HoldSeconds = 1, 60 })
		tickets := map[string]string{}
		for _, u := range []string{"bob", "carol"} {
			tk, err := h.shopper(u).Ticket(ctx, "one")
			if err != nil {
				t.Fatal(err)
			}
			tickets[u] = tk.Token
		}
		if _, err := h.shopper("alice").Reserve(ctx, "one", client.ReserveRequest{AdmissionToken: h.admit("one", "alice")}); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(200 * time.Millisecond) // the room's snapshot learns of it

		notFinal := func(log *statusLog) int {
			n := 0
			for _, s := range log.all {
				if s.State == client.StateSoldOut && !s.Final {
					n++
				}
			}
			return n
		}

		// Alice's hold lapses while bob keeps polling: he gets the unit.
		polls := 0
		h.onSleep = func(time.Duration) {
			if polls++; polls == 2 {
				h.clock.Advance(61 * time.Second)
				if _, err := h.eng.Sweeper.SweepOnce(ctx); err != nil {
					t.Error(err)
				}
			}
		}
		log := &statusLog{}
		st, err := (&client.Waiter{Client: h.c, SKU: "one", OnStatus: log.add}).Wait(ctx, tickets["bob"])
		if err != nil || st.State != client.StateAdmitted || notFinal(log) < 2 {
			t.Fatalf("bob's wait: %+v %v after %+v", st, err, log.all)
		}
		checkPacing(t, log, h.waits())
		bob := h.shopper("bob")
		res, err := bob.Reserve(ctx, "one", client.ReserveRequest{AdmissionToken: st.AdmissionToken})
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(200 * time.Millisecond)

		// Bob pays while carol polls: nothing can come back now.
		polls = 0
		h.onSleep = func(time.Duration) {
			if polls++; polls == 2 {
				if _, err := bob.Confirm(ctx, res.ReservationID, "pay"); err != nil {
					t.Error(err)
				}
			}
		}
		log = &statusLog{}
		st, err = (&client.Waiter{Client: h.c, SKU: "one", OnStatus: log.add}).Wait(ctx, tickets["carol"])
		if err != nil || st.State != client.StateSoldOut || !st.Final || notFinal(log) < 2 {
			t.Fatalf("carol's wait: %+v %v after %+v", st, err, log.all)
		}
		checkPacing(t, log, h.waits())
	})
}

// TestWaiterEndsWithTheSale: a shopper still waiting when the sale closes
// is told closed; one whose ticket is forged gets invalid_token.
func TestWaiterEndsWithTheSale(t *testing.T) {
	h := newHarness(t, backends[0])
	ctx := context.Background()
	h.createSale("brief", func(s *client.NewSale) {
		s.AdmissionPerSecond, s.ClosesAt = 1, start.Add(10*time.Second)
	})
	for i := 0; i < 50; i++ {
		if _, err := h.shopper(fmt.Sprint("ahead-", i)).Ticket(ctx, "brief"); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := h.shopper("last").Ticket(ctx, "brief")
	if err != nil {
		t.Fatal(err)
	}
	log := &statusLog{}
	st, err := (&client.Waiter{Client: h.c, SKU: "brief", OnStatus: log.add}).Wait(ctx, tk.Token)
	if err != nil || st.State != client.StateClosed {
		t.Fatalf("wait: %+v %v", st, err)
	}
	checkPacing(t, log, h.waits())
	_, err = (&client.Waiter{Client: h.c, SKU: "brief"}).Wait(ctx, "tkt_forged")
	wantCode(t, "a forged ticket", err, client.ErrInvalidToken, 401)
}

// TestLotteryThroughTheClient: register (and its window), the ticket of a
// shopper who did not register, the draw and its document, and a Waiter
// told not_selected or admitted, with the ticket the draw replaced.
func TestLotteryThroughTheClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		h.createSale("raffle", func(s *client.NewSale) {
			s.InitialStock, s.Fairness = 1, flashsale.FairnessLottery
			s.RegistrationClosesAt, s.OpensAt = start.Add(time.Minute), start.Add(2*time.Minute)
		})
		if err := h.eng.Warmer.WarmOnce(ctx); err != nil {
			t.Fatal(err)
		}
		pub, err := h.c.Sale(ctx, "raffle")
		if err != nil || pub.Policy.Fairness != flashsale.FairnessLottery || pub.SeedCommitment == "" ||
			pub.Policy.LotteryWinners == nil || *pub.Policy.LotteryWinners != 2 || pub.RegistrationClosesAt == nil {
			t.Fatalf("sale: %+v %v", pub, err)
		}
		_, err = h.shopper("nobody").Ticket(ctx, "raffle")
		wantCode(t, "a ticket before registering", err, client.ErrNotRegistered, 409)
		users := []string{"u0", "u1", "u2", "u3", "u4"}
		tickets := map[string]string{}
		for _, u := range users {
			for rep := 0; rep < 2; rep++ {
				if err := h.shopper(u).Register(ctx, "raffle"); err != nil {
					t.Fatalf("register %s: %v", u, err)
				}
			}
			tk, err := h.shopper(u).Ticket(ctx, "raffle")
			if err != nil {
				t.Fatal(err)
			}
			tickets[u] = tk.Token
		}
		_, err = h.c.Draw(ctx, "raffle")
		wantCode(t, "the draw before it ran", err, client.ErrNotFound, 404)

		h.clock.Set(start.Add(time.Minute))
		if err := h.eng.Warmer.WarmOnce(ctx); err != nil {
			t.Fatal(err)
		}
		err = h.shopper("late").Register(ctx, "raffle")
		wantCode(t, "registering after the window", err, client.ErrRegistrationClosed, 409)
		if err := h.eng.Drawer.DrawDue(ctx); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
		doc, err := h.c.Draw(ctx, "raffle")
		if err != nil || doc.SKU != "raffle" || doc.Winners != 2 || len(doc.Order) != len(users) || doc.Seed == "" ||
			doc.SeedCommitment != pub.SeedCommitment {
			t.Fatalf("draw: %+v %v", doc, err)
		}
		// The client's document is the server's, field for field: anyone
		// can recompute it (flashsale verify does).
		if err := (*waitroom.DrawDocument)(doc).Verify(); err != nil {
			t.Fatalf("the draw does not verify: %v", err)
		}

		h.onSleep = func(time.Duration) {
			if err := h.eng.Warmer.WarmOnce(ctx); err != nil {
				t.Error(err)
			}
			if err := h.eng.Pacer.TickOnce(ctx); err != nil {
				t.Error(err)
			}
		}
		outcome := map[client.State]int{}
		for _, u := range users {
			st, err := (&client.Waiter{Client: h.c, SKU: "raffle"}).Wait(ctx, tickets[u])
			if err != nil {
				t.Fatalf("wait of %s: %v", u, err)
			}
			outcome[st.State]++
			if st.State == client.StateAdmitted && st.Token == tickets[u] {
				t.Fatalf("%s admitted with the pre-queue ticket: the draw's new one was not kept", u)
			}
		}
		if outcome[client.StateAdmitted] != 2 || outcome[client.StateNotSelected] != 3 {
			t.Fatalf("outcomes: %v", outcome)
		}
	})
}

// scripted is a server that answers each request with the next of its
// answers, and records the requests.
type scripted struct {
	mu       sync.Mutex
	answers  []string // raw HTTP: "status\nheader: value\n\nbody"
	requests []*http.Request
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Clone(context.Background()))
	if len(s.answers) == 0 {
		s.mu.Unlock()
		http.Error(w, "script ran out", http.StatusTeapot)
		return
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	s.mu.Unlock()
	head, body, _ := strings.Cut(a, "\n\n")
	sc := bufio.NewScanner(strings.NewReader(head))
	sc.Scan()
	var status int
	fmt.Sscan(sc.Text(), &status)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

// TestWaiterPollsAtRetryAfterPlusJitter: each poll waits the answer's
// Retry-After plus the jitter, never less; an overloaded poll is repeated
// after its own Retry-After; the ticket the server replaces is the one
// polled with from then on.
func TestWaiterPollsAtRetryAfterPlusJitter(t *testing.T) {
	srv := &scripted{answers: []string{
		"200\nRetry-After: 3\n\n" + `{"state":"waiting","position":40,"estimatedWaitSeconds":30}`,
		"200\nRetry-After: 2\n\n" + `{"state":"waiting","position":12,"token":"t2"}`,
		"503\nRetry-After: 1\n\n" + `{"error":{"code":"overloaded","message":"later"}}`,
		"200\nRetry-After: 4\n\n" + `{"state":"sold_out","final":false}`,
		"200\n\n" + `{"state":"admitted","admissionToken":"adm","expiresIn":120}`,
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var waits []time.Duration
	c, err := client.New(ts.URL,
		client.WithSleep(func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }),
		client.WithJitter(func(d time.Duration) time.Duration { return d / 10 }))
	if err != nil {
		t.Fatal(err)
	}
	var positions []int64
	st, err := (&client.Waiter{Client: c, SKU: "s", OnStatus: func(s *client.Status) { positions = append(positions, s.Position) }}).
		Wait(context.Background(), "t1")
	if err != nil || st.State != client.StateAdmitted || st.AdmissionToken != "adm" || st.Token != "t2" {
		t.Fatalf("wait: %+v %v", st, err)
	}
	want := []time.Duration{3300 * time.Millisecond, 2200 * time.Millisecond, 1100 * time.Millisecond, 4400 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if fmt.Sprint(positions) != "[40 12 0 0]" {
		t.Fatalf("positions reported %v", positions)
	}
	var tokens []string
	for _, r := range srv.requests {
		tokens = append(tokens, r.URL.Query().Get("token"))
	}
	if fmt.Sprint(tokens) != "[t1 t1 t2 t2 t2]" {
		t.Fatalf("polled with %v", tokens)
	}
}

// TestDefaultJitterNeverShortens: the default jitter only ever adds, and
// spreads a crowd.
func TestDefaultJitterNeverShortens(t *testing.T) {
	srv := &scripted{}
	for i := 0; i < 200; i++ {
		srv.answers = append(srv.answers, "200\nRetry-After: 2\n\n"+`{"state":"waiting","position":5}`)
	}
	srv.answers = append(srv.answers, "200\n\n"+`{"state":"closed"}`)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var waits []time.Duration
	c, _ := client.New(ts.URL, client.WithSleep(func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }))
	if _, err := (&client.Waiter{Client: c, SKU: "s"}).Wait(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	for _, w := range waits {
		if w < 2*time.Second || w > 2*time.Second+2*time.Second/5+100*time.Millisecond {
			t.Fatalf("a wait of %v after Retry-After: 2", w)
		}
		seen[w] = true
	}
	if len(waits) != 200 || len(seen) < 100 {
		t.Fatalf("%d waits, %d distinct: the jitter does not spread", len(waits), len(seen))
	}
}

// TestSolveChallenge: the nonce found meets the difficulty; a bad
// algorithm or difficulty is refused; a cancelled context stops the work.
func TestSolveChallenge(t *testing.T) {
	ctx := context.Background()
	nonce, err := client.SolveChallenge(ctx, client.Challenge{Algorithm: "sha256", Salt: "abc", DifficultyBits: 12})
	if err != nil {
		t.Fatal(err)
	}
	if got := leadingZeros("abc" + nonce); got < 12 {
		t.Fatalf("nonce %s gives %d zero bits", nonce, got)
	}
	// The smallest nonce, as the server's own solver finds it.
	for _, salt := range []string{"a", "salt-1", "ünïcode", ""} {
		for _, bits := range []int{0, 1, 7, 10} {
			got, err := client.SolveChallenge(ctx, client.Challenge{Algorithm: "sha256", Salt: salt, DifficultyBits: bits})
			if want := challenge.Solve(salt, bits); err != nil || got != want || challenge.LeadingZeroBits(salt, got) < bits {
				t.Fatalf("salt %q, %d bits: %q %v, the server's solver %q", salt, bits, got, err, want)
			}
		}
	}
	if _, err := client.SolveChallenge(ctx, client.Challenge{Algorithm: "md5", Salt: "abc", DifficultyBits: 1}); err == nil {
		t.Fatal("md5 accepted")
	}
	if _, err := client.SolveChallenge(ctx, client.Challenge{Algorithm: "sha256", DifficultyBits: 257}); err == nil {
		t.Fatal("257 bits accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := client.SolveChallenge(cctx, client.Challenge{Algorithm: "sha256", Salt: "s", DifficultyBits: 200}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func leadingZeros(s string) int {
	sum := sha256.Sum256([]byte(s))
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}
