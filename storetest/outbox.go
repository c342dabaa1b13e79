package storetest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// The outbox as a work queue: the claims a relay makes, and what they
// guarantee whoever else claims at the same time.

// appendEvents writes n events of the sale, the i-th occurring at
// t0+i*step, and returns their ids in that order.
func (e *env) appendEvents(saleID string, n int, step time.Duration) []string {
	e.t.Helper()
	events := make([]flashsale.Event, n)
	ids := make([]string, n)
	for i := range events {
		events[i] = flashsale.NewEvent("", flashsale.EventSalePaused, saleID, "sku", t0.Add(time.Duration(i)*step),
			flashsale.SaleData{State: flashsale.SalePaused, Reason: fmt.Sprint(i)})
		ids[i] = events[i].ID
	}
	written, err := e.store.AppendEvents(e.ctx, events...)
	ok(e.t, "AppendEvents", err)
	if written != n {
		e.t.Fatalf("AppendEvents wrote %d of %d", written, n)
	}
	return ids
}

// claim claims up to limit events at now for a lease of a minute.
func (e *env) claim(token string, now time.Time, limit int) []*flashsale.OutboxEvent {
	e.t.Helper()
	evs, err := e.store.ClaimEvents(e.ctx, flashsale.EventClaim{Relay: "relay-" + token, Token: token, Now: now, Lease: time.Minute, Limit: limit})
	ok(e.t, "ClaimEvents", err)
	return evs
}

func eventIDs(evs []*flashsale.OutboxEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// Claims take the oldest due events first, never more than the limit,
// never an event that is not due, and count the attempt as they claim.
func testClaimOrderAndLimit(e *env) {
	t := e.t
	s := e.sale()
	ids := e.appendEvents(s.ID, 5, time.Second)
	now := t0.Add(3 * time.Second) // the fifth is not due yet

	if got := e.claim("a", now, 0); len(got) != 0 {
		t.Errorf("a claim of limit 0 took %d events", len(got))
	}
	first := e.claim("a", now, 2)
	if strings.Join(eventIDs(first), ",") != strings.Join(ids[:2], ",") {
		t.Errorf("first claim = %v, want the oldest two %v", eventIDs(first), ids[:2])
	}
	for _, ev := range first {
		if ev.Attempts != 1 || ev.ClaimToken != "a" || ev.ClaimedBy != "relay-a" || !ev.ClaimedAt.Equal(now) ||
			!ev.NextAttemptAt.Equal(now.Add(time.Minute)) || !ev.Pending() {
			t.Errorf("claimed event %+v: want attempt 1, token a, held until now+lease", ev)
		}
		stored, err := e.store.OutboxEvent(e.ctx, ev.ID)
		ok(t, "OutboxEvent", err)
		same(t, "claimed event as stored", *stored, *ev)
	}
	second := e.claim("b", now, 10)
	if strings.Join(eventIDs(second), ",") != strings.Join(ids[2:4], ",") {
		t.Errorf("second claim = %v, want the two still due and unclaimed %v", eventIDs(second), ids[2:4])
	}
	if got := e.claim("c", now, 10); len(got) != 0 {
		t.Errorf("a third claim took %v; everything due is held", eventIDs(got))
	}
	if got := e.claim("c", t0.Add(4*time.Second), 10); len(got) != 1 || got[0].ID != ids[4] {
		t.Errorf("claim once the fifth is due = %v, want %s", eventIDs(got), ids[4])
	}
}

// A claim that lapses (its relay died) is rescued by the next claim after
// the lease, with a new token and a new attempt; the old token then changes
// nothing, so the zombie relay cannot complete, retry or bury the event.
func testClaimLeaseAndFencing(e *env) {
	t := e.t
	s := e.sale()
	ids := e.appendEvents(s.ID, 2, 0)
	claimed := e.claim("dead", t0, 10)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d, want 2", len(claimed))
	}
	if got := e.claim("early", t0.Add(time.Minute-time.Microsecond), 10); len(got) != 0 {
		t.Errorf("a claim before the lease lapsed took %v", eventIDs(got))
	}
	rescued := e.claim("live", t0.Add(time.Minute), 10)
	if len(rescued) != 2 || rescued[0].Attempts != 2 || rescued[0].ClaimToken != "live" {
		t.Fatalf("rescue after the lease = %+v, want both events at attempt 2 under the new token", rescued)
	}

	at := t0.Add(2 * time.Minute)
	n, err := e.store.CompleteEvents(e.ctx, "dead", ids, at)
	ok(t, "CompleteEvents by the zombie", err)
	retried, err := e.store.RetryEvent(e.ctx, "dead", ids[0], at, "zombie")
	ok(t, "RetryEvent by the zombie", err)
	buried, err := e.store.BuryEvent(e.ctx, "dead", ids[1], at, "zombie")
	ok(t, "BuryEvent by the zombie", err)
	if n != 0 || retried || buried {
		t.Errorf("the zombie's token changed events: completed %d, retried %v, buried %v", n, retried, buried)
	}
	for i, id := range ids {
		ev, err := e.store.OutboxEvent(e.ctx, id)
		ok(t, "OutboxEvent", err)
		same(t, "event after the zombie's attempts", *ev, *rescued[i])
	}

	n, err = e.store.CompleteEvents(e.ctx, "live", append(ids, "evt_missing"), at)
	ok(t, "CompleteEvents", err)
	if n != 2 {
		t.Errorf("CompleteEvents by the holder marked %d, want 2", n)
	}
	for _, id := range ids {
		ev, err := e.store.OutboxEvent(e.ctx, id)
		ok(t, "OutboxEvent", err)
		if !ev.PublishedAt.Equal(at) || ev.ClaimToken != "" || ev.Pending() {
			t.Errorf("completed event %+v", ev)
		}
	}
	if got := e.claim("late", t0.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("published events were claimed again: %v", eventIDs(got))
	}
	n, err = e.store.CompleteEvents(e.ctx, "live", ids, at)
	ok(t, "CompleteEvents again", err)
	if n != 0 {
		t.Errorf("completing twice marked %d", n)
	}
}

// A failed delivery is retried at its backoff, not before; a buried event
// is not tried again until it is replayed.
func testRetryBuryReplay(e *env) {
	t := e.t
	s := e.sale()
	ids := e.appendEvents(s.ID, 2, 0)
	e.claim("a", t0, 10)
	retryAt := t0.Add(30 * time.Second)
	retried, err := e.store.RetryEvent(e.ctx, "a", ids[0], retryAt, "HTTP 503")
	ok(t, "RetryEvent", err)
	buried, err := e.store.BuryEvent(e.ctx, "a", ids[1], t0.Add(time.Second), "poison")
	ok(t, "BuryEvent", err)
	if !retried || !buried {
		t.Fatalf("RetryEvent %v, BuryEvent %v by the holder; want true, true", retried, buried)
	}
	ev, err := e.store.OutboxEvent(e.ctx, ids[0])
	ok(t, "OutboxEvent", err)
	if ev.ClaimToken != "" || !ev.NextAttemptAt.Equal(retryAt) || ev.LastError != "HTTP 503" || ev.Attempts != 1 || !ev.Pending() {
		t.Errorf("retried event %+v", ev)
	}
	if got := e.claim("b", retryAt.Add(-time.Microsecond), 10); len(got) != 0 {
		t.Errorf("claimed before its backoff: %v", eventIDs(got))
	}
	if got := e.claim("b", retryAt, 10); len(got) != 1 || got[0].ID != ids[0] || got[0].Attempts != 2 {
		t.Errorf("claim at the backoff = %+v, want the retried event at attempt 2", got)
	}
	if n, err := e.store.CompleteEvents(e.ctx, "b", ids[:1], retryAt); err != nil || n != 1 {
		t.Fatalf("CompleteEvents = %d, %v", n, err)
	}

	dead, err := e.store.DeadEvents(e.ctx, 10)
	ok(t, "DeadEvents", err)
	if len(dead) != 1 || dead[0].ID != ids[1] || dead[0].LastError != "poison" || !dead[0].DeadAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("DeadEvents = %+v, want the buried event", dead)
	}
	if got := e.claim("c", t0.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("a dead event was claimed: %v", eventIDs(got))
	}
	st, err := e.store.OutboxStats(e.ctx, s.ID)
	ok(t, "OutboxStats", err)
	if st.Dead != 1 || st.Pending != 0 {
		t.Errorf("OutboxStats = %+v, want 1 dead, none pending", st)
	}

	replayAt := t0.Add(2 * time.Hour)
	replayed, err := e.store.ReplayEvent(e.ctx, ids[1], replayAt)
	ok(t, "ReplayEvent", err)
	if !replayed.Pending() || replayed.Attempts != 0 || !replayed.NextAttemptAt.Equal(replayAt) || replayed.ClaimToken != "" {
		t.Errorf("replayed event %+v, want pending, due at %v, no attempts", replayed, replayAt)
	}
	if got := e.claim("d", replayAt, 10); len(got) != 1 || got[0].ID != ids[1] || got[0].Attempts != 1 {
		t.Errorf("claim after the replay = %+v", got)
	}
	_, err = e.store.ReplayEvent(e.ctx, ids[1], replayAt)
	wantCode(t, "replaying an event that is not dead", err, flashsale.CodeInvalidState)
	_, err = e.store.ReplayEvent(e.ctx, "evt_missing", replayAt)
	wantIs(t, "replaying a missing event", err, flashsale.ErrNotFound)
}

// An event whose claims all lapsed is not claimed past MaxAttempts;
// BuryAbandoned dead-letters it.
func testBuryAbandoned(e *env) {
	t := e.t
	s := e.sale()
	ids := e.appendEvents(s.ID, 1, 0)
	c := flashsale.EventClaim{Relay: "r", Now: t0, Lease: time.Minute, Limit: 10, MaxAttempts: 2}
	for i := range 2 {
		c.Token = fmt.Sprint("dies-", i)
		got, err := e.store.ClaimEvents(e.ctx, c)
		ok(t, "ClaimEvents", err)
		if len(got) != 1 {
			t.Fatalf("claim %d took %d events", i+1, len(got))
		}
		c.Now = c.Now.Add(time.Minute) // the relay died; its claim lapses
	}
	c.Token = "third"
	got, err := e.store.ClaimEvents(e.ctx, c)
	ok(t, "ClaimEvents", err)
	if len(got) != 0 {
		t.Errorf("a third claim with MaxAttempts 2 took %+v", got)
	}
	n, err := e.store.BuryAbandoned(e.ctx, c.Now.Add(-time.Second), 2)
	ok(t, "BuryAbandoned before the last claim lapsed", err)
	if n != 0 {
		t.Errorf("BuryAbandoned buried %d events still held", n)
	}
	n, err = e.store.BuryAbandoned(e.ctx, c.Now, 2)
	ok(t, "BuryAbandoned", err)
	if n != 1 {
		t.Fatalf("BuryAbandoned = %d, want 1", n)
	}
	ev, err := e.store.OutboxEvent(e.ctx, ids[0])
	ok(t, "OutboxEvent", err)
	if ev.DeadAt.IsZero() || ev.ClaimToken != "" || !strings.Contains(ev.LastError, "2 claims") {
		t.Errorf("abandoned event %+v, want dead, saying it used 2 claims", ev)
	}
}

// The outbox's figures, per sale and in all; published events older than
// the retention go, nothing else does.
func testOutboxStatsAndPurge(e *env) {
	t := e.t
	s, other := e.sale(), e.sale()
	ids := e.appendEvents(s.ID, 3, time.Second)
	e.appendEvents(other.ID, 1, time.Hour)

	st, err := e.store.OutboxStats(e.ctx, s.ID)
	ok(t, "OutboxStats", err)
	same(t, "sale stats", st, flashsale.OutboxStats{Pending: 3, OldestPending: t0})
	all, err := e.store.OutboxStats(e.ctx, "")
	ok(t, "OutboxStats(all)", err)
	if all.Pending != 4 || !all.OldestPending.Equal(t0) {
		t.Errorf("stats of all = %+v, want 4 pending since %v", all, t0)
	}
	if lag := st.Lag(t0.Add(5 * time.Second)); lag != 5*time.Second {
		t.Errorf("Lag = %v, want 5s", lag)
	}

	claimed := e.claim("a", t0.Add(time.Minute), 10)
	if len(claimed) != 4 {
		t.Fatalf("claimed %d, want 4", len(claimed))
	}
	_, err = e.store.CompleteEvents(e.ctx, "a", ids[:2], t0.Add(time.Minute))
	ok(t, "CompleteEvents", err)
	_, err = e.store.CompleteEvents(e.ctx, "a", ids[2:], t0.Add(2*time.Minute))
	ok(t, "CompleteEvents", err)
	st, err = e.store.OutboxStats(e.ctx, s.ID)
	ok(t, "OutboxStats", err)
	same(t, "stats once delivered", st, flashsale.OutboxStats{})

	n, err := e.store.PurgePublished(e.ctx, t0.Add(90*time.Second), 10)
	ok(t, "PurgePublished", err)
	if n != 2 {
		t.Errorf("PurgePublished = %d, want the two published before the cut", n)
	}
	left := e.outbox(s.ID)
	if len(left) != 1 || left[0].ID != ids[2] {
		t.Errorf("after the purge the sale has %v, want %s", eventIDs(left), ids[2])
	}
	if got := e.outbox(other.ID); len(got) != 1 {
		t.Errorf("the purge took another sale's pending event")
	}
}

// Concurrent claims never take one event twice, and none takes more than
// its limit: with PostgreSQL because of FOR UPDATE SKIP LOCKED over a
// materialized subquery, with SQLite because its one writer serialises
// claims.
func testConcurrentClaims(e *env) {
	t := e.t
	s := e.sale()
	const (
		events  = 300
		workers = 6
		limit   = 7
	)
	ids := e.appendEvents(s.ID, events, 0)
	var (
		mu     sync.Mutex
		seen   = map[string]int{}
		wg     sync.WaitGroup
		starts = make(chan struct{})
	)
	for w := range workers {
		wg.Go(func() {
			<-starts
			for i := 0; ; i++ {
				token := fmt.Sprintf("w%d-%d", w, i)
				got, err := e.store.ClaimEvents(e.ctx, flashsale.EventClaim{Relay: "w", Token: token, Now: t0, Lease: time.Hour, Limit: limit})
				if err != nil {
					t.Errorf("ClaimEvents: %v", err)
					return
				}
				if len(got) > limit {
					t.Errorf("a claim of limit %d took %d", limit, len(got))
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, ev := range got {
					seen[ev.ID]++
				}
				mu.Unlock()
			}
		})
	}
	close(starts)
	wg.Wait()
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("event %s was claimed %d times, want 1", id, seen[id])
		}
	}
}
