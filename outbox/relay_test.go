package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inbox"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/sqlite"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

// record is the outbox as a test sees it: the relay's view and the rest.
type record interface {
	Store
	AppendEvents(ctx context.Context, events ...flashsale.Event) (int, error)
	OutboxEvent(ctx context.Context, id string) (*flashsale.OutboxEvent, error)
	ReplayEvent(ctx context.Context, id string, at time.Time) (*flashsale.OutboxEvent, error)
}

// engines runs a scenario on the SQLite record and on the PostgreSQL one.
func engines(t *testing.T, scenario func(t *testing.T, rec record)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		scenario(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(t.Context(), testenv.Postgres(t), postgres.WithMaxConns(8))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		scenario(t, st)
	})
}

// seed writes n events, all due at t0, and returns their ids.
func seed(t *testing.T, rec record, n int) []string {
	t.Helper()
	events := make([]flashsale.Event, n)
	ids := make([]string, n)
	for i := range events {
		events[i] = flashsale.NewEvent("", flashsale.EventOrderShipped, "sale_1", "sku-1", t0,
			flashsale.OrderData{OrderID: fmt.Sprintf("ord_%d", i), To: flashsale.OrderShipped, Version: 2, Actor: "test"})
		ids[i] = events[i].ID
	}
	if written, err := rec.AppendEvents(t.Context(), events...); err != nil || written != n {
		t.Fatalf("AppendEvents = %d, %v; want %d", written, err, n)
	}
	return ids
}

// consumer is a sink that processes each delivery through an inbox, as
// the project's example consumer does, and counts deliveries and effects.
type consumer struct {
	t     *testing.T
	inbox *inbox.Inbox

	mu         sync.Mutex
	deliveries map[string]int
	applied    map[string]int
	// deliverFirst, when positive, makes the next Publish deliver only
	// that many events and fail the rest: a relay dying mid-batch.
	deliverFirst int
}

func newConsumer(t *testing.T) *consumer {
	in, err := inbox.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return &consumer{t: t, inbox: in, deliveries: map[string]int{}, applied: map[string]int{}}
}

func (c *consumer) Name() string { return "consumer" }

func (c *consumer) Publish(ctx context.Context, events []*flashsale.OutboxEvent) []error {
	c.mu.Lock()
	k := c.deliverFirst
	c.deliverFirst = 0
	c.mu.Unlock()
	var errs []error
	for i, ev := range events {
		if k > 0 && i >= k {
			if errs == nil {
				errs = make([]error, len(events))
			}
			errs[i] = errors.New("the relay died mid-batch")
			continue
		}
		c.mu.Lock()
		c.deliveries[ev.ID]++
		c.mu.Unlock()
		did, err := c.inbox.Process(ctx, ev.ID, string(ev.Type), func(*sql.Tx) error { return nil })
		if err != nil {
			c.t.Errorf("inbox: %v", err)
		}
		if did {
			c.mu.Lock()
			c.applied[ev.ID]++
			c.mu.Unlock()
		}
	}
	return errs
}

// TestRelayKilledMidBatchLosesNothing: relays are killed at random points
// (after the claim, and after delivering part or all of a batch but before
// marking it), and new ones start over once the dead relays' leases lapse.
// Every event reaches the consumer; those delivered twice are processed
// once.
func TestRelayKilledMidBatchLosesNothing(t *testing.T) {
	engines(t, func(t *testing.T, rec record) {
		ids := seed(t, rec, 300)
		clock := testenv.NewClock(t0)
		sink := newConsumer(t)
		rng := rand.New(rand.NewPCG(4, 2))
		kills := 0
		for round := 0; ; round++ {
			if round > 1000 {
				t.Fatal("the outbox did not drain")
			}
			relay := New(Config{Store: rec, Sink: sink, Now: clock.Now, Batch: 16, Lease: time.Minute, MaxAttempts: 1000,
				afterClaim: func([]*flashsale.OutboxEvent) bool {
					if rng.IntN(5) == 0 {
						kills++
						return true // killed before publishing anything
					}
					if rng.IntN(3) == 0 {
						sink.deliverFirst = 1 + rng.IntN(15) // will die mid-batch
					}
					return false
				},
				afterPublish: func(_ []*flashsale.OutboxEvent, _ []error) bool {
					if rng.IntN(3) == 0 {
						kills++
						return true // delivered, killed before marking
					}
					return false
				}})
			n, err := relay.Drain(t.Context())
			if err == nil && n == 0 {
				st, err := rec.OutboxStats(t.Context(), "")
				if err != nil {
					t.Fatal(err)
				}
				if st.Pending == 0 {
					break
				}
			}
			// The dead relay's claims lapse; its successor rescues them.
			clock.Advance(time.Minute)
		}
		if kills == 0 {
			t.Fatal("no relay was killed; the test proves nothing")
		}
		redelivered := 0
		for _, id := range ids {
			if sink.applied[id] != 1 {
				t.Errorf("event %s was processed %d times, want exactly 1", id, sink.applied[id])
			}
			if sink.deliveries[id] > 1 {
				redelivered++
			}
			ev, err := rec.OutboxEvent(t.Context(), id)
			if err != nil || ev.PublishedAt.IsZero() || !ev.DeadAt.IsZero() {
				t.Errorf("event %s is not published: %+v, %v", id, ev, err)
			}
		}
		if redelivered == 0 {
			t.Error("no event was delivered twice; the consumer's deduplication was not exercised")
		}
		if n, _ := sink.inbox.Count(t.Context()); n != len(ids) {
			t.Errorf("the inbox holds %d events, want %d", n, len(ids))
		}
		t.Logf("%d kills, %d of %d events redelivered and deduplicated", kills, redelivered, len(ids))
	})
}

// exclusive is a sink that fails the test if one event is ever being
// delivered by two relays at the same moment.
type exclusive struct {
	t          *testing.T
	mu         sync.Mutex
	inFlight   map[string]string
	deliveries map[string]int
	overlaps   atomic.Int64
}

func (x *exclusive) Name() string { return "exclusive" }

func (x *exclusive) Publish(ctx context.Context, events []*flashsale.OutboxEvent) []error {
	relay := events[0].ClaimedBy
	x.mu.Lock()
	for _, ev := range events {
		if other, busy := x.inFlight[ev.ID]; busy {
			x.overlaps.Add(1)
			x.t.Errorf("event %s delivered by %s while %s is delivering it", ev.ID, relay, other)
		}
		x.inFlight[ev.ID] = relay
		x.deliveries[ev.ID]++
	}
	x.mu.Unlock()
	// Let the other relays run while this batch is in flight.
	for range 20 {
		runtime.Gosched()
	}
	x.mu.Lock()
	for _, ev := range events {
		delete(x.inFlight, ev.ID)
	}
	x.mu.Unlock()
	return nil
}

// TestRelaysNeverDeliverOneEventAtOnce: eight relays drain one outbox at
// once; no event is ever in two deliveries at the same time, and (no relay
// dying) each is delivered exactly once.
func TestRelaysNeverDeliverOneEventAtOnce(t *testing.T) {
	engines(t, func(t *testing.T, rec record) {
		ids := seed(t, rec, 800)
		sink := &exclusive{t: t, inFlight: map[string]string{}, deliveries: map[string]int{}}
		var wg sync.WaitGroup
		for i := range 8 {
			relay := New(Config{Store: rec, Sink: sink, Name: fmt.Sprint("relay-", i), Now: func() time.Time { return t0 }, Batch: 20})
			wg.Go(func() {
				for {
					n, err := relay.Drain(t.Context())
					if err != nil {
						t.Errorf("%s: %v", relay.Name(), err)
						return
					}
					if n == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			if sink.deliveries[id] != 1 {
				t.Errorf("event %s delivered %d times, want 1", id, sink.deliveries[id])
			}
		}
	})
}

// TestZombieRelayChangesNothing: a relay stalls after its claim until its
// lease lapses; another relay takes the events over and delivers them.
// When the stalled one (the zombie) wakes, its deliveries are duplicates
// that the consumer drops, and its completion, fenced by its stale token,
// writes nothing.
func TestZombieRelayChangesNothing(t *testing.T) {
	engines(t, func(t *testing.T, rec record) {
		ids := seed(t, rec, 10)
		clock := testenv.NewClock(t0)
		sink := newConsumer(t)
		stalled, resume := make(chan struct{}), make(chan struct{})
		zombie := New(Config{Store: rec, Sink: sink, Name: "zombie", Now: clock.Now, Lease: time.Minute,
			afterClaim: func([]*flashsale.OutboxEvent) bool {
				close(stalled)
				<-resume
				return false
			}})
		done := make(chan error)
		go func() {
			_, err := zombie.RelayOnce(t.Context())
			done <- err
		}()
		<-stalled
		clock.Advance(time.Minute)
		live := New(Config{Store: rec, Sink: sink, Name: "live", Now: clock.Now, Lease: time.Minute})
		if n, err := live.Drain(t.Context()); err != nil || n != len(ids) {
			t.Fatalf("the live relay delivered %d, %v; want %d", n, err, len(ids))
		}
		publishedAt := clock.Now()
		clock.Advance(time.Minute)
		close(resume)
		if err := <-done; err != nil {
			t.Fatalf("the zombie: %v", err)
		}
		for _, id := range ids {
			ev, err := rec.OutboxEvent(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !ev.PublishedAt.Equal(publishedAt) || ev.ClaimedBy != "live" || ev.Attempts != 2 {
				t.Errorf("event %s after the zombie woke: %+v; want published by the live relay at %v", id, ev, publishedAt)
			}
			if sink.deliveries[id] != 2 || sink.applied[id] != 1 {
				t.Errorf("event %s: %d deliveries, %d effects; want 2 and 1", id, sink.deliveries[id], sink.applied[id])
			}
		}
	})
}

// poisoned is a sink that refuses one event, always.
type poisoned struct {
	poison   string
	mu       sync.Mutex
	attempts map[string]int
}

func (p *poisoned) Name() string { return "poisoned" }

func (p *poisoned) Publish(_ context.Context, events []*flashsale.OutboxEvent) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for i, ev := range events {
		p.attempts[ev.ID]++
		if ev.ID == p.poison {
			if errs == nil {
				errs = make([]error, len(events))
			}
			errs[i] = errors.New("HTTP 422: the receiver cannot parse this event")
		}
	}
	return errs
}

// TestPoisonEventIsDeadLettered: an event the sink always refuses is tried
// MaxAttempts times, each after its backoff (never sooner), then
// dead-lettered; the others are delivered once; an operator's replay gives
// it a new life.
func TestPoisonEventIsDeadLettered(t *testing.T) {
	engines(t, func(t *testing.T, rec record) {
		ids := seed(t, rec, 20)
		const maxAttempts = 4
		clock := testenv.NewClock(t0)
		sink := &poisoned{poison: ids[7], attempts: map[string]int{}}
		m := metrics.New()
		relay := New(Config{Store: rec, Sink: sink, Now: clock.Now, MaxAttempts: maxAttempts,
			BaseBackoff: time.Second, MaxBackoff: time.Minute, Jitter: func() float64 { return 0.5 }, Metrics: m})
		for attempt := 1; attempt <= maxAttempts; attempt++ {
			if _, err := relay.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			if sink.attempts[sink.poison] != attempt {
				t.Fatalf("after round %d the poison was tried %d times", attempt, sink.attempts[sink.poison])
			}
			ev, err := rec.OutboxEvent(t.Context(), sink.poison)
			if err != nil {
				t.Fatal(err)
			}
			if attempt == maxAttempts {
				if ev.DeadAt.IsZero() || ev.Attempts != maxAttempts || !strings.Contains(ev.LastError, "HTTP 422") {
					t.Fatalf("after %d attempts the poison is %+v, want dead with its last error", attempt, ev)
				}
				break
			}
			wait := relay.Backoff(attempt)
			if want := time.Duration(float64(time.Second) * float64(int(1)<<(attempt-1)) * 0.75); wait != want {
				t.Errorf("backoff after attempt %d = %v, want %v", attempt, wait, want)
			}
			if !ev.NextAttemptAt.Equal(clock.Now().Add(wait)) || !ev.DeadAt.IsZero() {
				t.Fatalf("after attempt %d the poison is %+v, want due again at now+%v", attempt, ev, wait)
			}
			// Not before its backoff...
			clock.Advance(wait - time.Millisecond)
			if _, err := relay.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			if sink.attempts[sink.poison] != attempt {
				t.Fatalf("the poison was tried before its backoff")
			}
			clock.Advance(time.Millisecond) // ...and at it.
		}
		for _, id := range ids {
			if id != sink.poison && sink.attempts[id] != 1 {
				t.Errorf("event %s delivered %d times, want 1", id, sink.attempts[id])
			}
		}
		clock.Advance(time.Hour)
		if _, err := relay.Drain(t.Context()); err != nil || sink.attempts[sink.poison] != maxAttempts {
			t.Fatalf("a dead letter was tried again: %d attempts, %v", sink.attempts[sink.poison], err)
		}
		if err := relay.Housekeep(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := gauge(t, m, "flashsale_outbox_dead_events"); got != 1 {
			t.Errorf("flashsale_outbox_dead_events = %v, want 1", got)
		}
		if got := gauge(t, m, "flashsale_outbox_pending_events"); got != 0 {
			t.Errorf("flashsale_outbox_pending_events = %v, want 0", got)
		}

		if _, err := rec.ReplayEvent(t.Context(), sink.poison, clock.Now()); err != nil {
			t.Fatal(err)
		}
		sink.poison = "" // the receiver was fixed
		if n, err := relay.Drain(t.Context()); err != nil || n != 1 {
			t.Fatalf("after the replay the relay delivered %d, %v; want the replayed event", n, err)
		}
	})
}

// TestAbandonedClaimsAreBuried: an event whose relays all die holding it
// is not claimed past MaxAttempts; housekeeping dead-letters it.
func TestAbandonedClaimsAreBuried(t *testing.T) {
	engines(t, func(t *testing.T, rec record) {
		ids := seed(t, rec, 1)
		clock := testenv.NewClock(t0)
		sink := newConsumer(t)
		dies := New(Config{Store: rec, Sink: sink, Now: clock.Now, Lease: time.Minute, MaxAttempts: 2,
			afterClaim: func([]*flashsale.OutboxEvent) bool { return true }})
		for range 2 {
			if _, err := dies.RelayOnce(t.Context()); !errors.Is(err, errAbandoned) {
				t.Fatalf("RelayOnce = %v, want the batch abandoned", err)
			}
			clock.Advance(time.Minute)
		}
		healthy := New(Config{Store: rec, Sink: sink, Now: clock.Now, MaxAttempts: 2})
		if n, err := healthy.RelayOnce(t.Context()); err != nil || n != 0 {
			t.Fatalf("an event past its attempts was claimed: %d, %v", n, err)
		}
		if err := healthy.Housekeep(t.Context()); err != nil {
			t.Fatal(err)
		}
		ev, err := rec.OutboxEvent(t.Context(), ids[0])
		if err != nil || ev.DeadAt.IsZero() {
			t.Fatalf("the abandoned event is %+v, %v; want dead", ev, err)
		}
	})
}

// TestHousekeepPurgesAndMeasures: published events older than the
// retention are deleted; the metrics show the pending events and the age
// of the oldest.
func TestHousekeepPurgesAndMeasures(t *testing.T) {
	engines(t, func(t *testing.T, rec record) {
		ids := seed(t, rec, 5)
		clock := testenv.NewClock(t0.Add(10 * time.Second))
		m := metrics.New()
		relay := New(Config{Store: rec, Sink: newConsumer(t), Now: clock.Now, Retention: time.Hour, Metrics: m, Batch: 3})
		if err := relay.Housekeep(t.Context()); err != nil {
			t.Fatal(err)
		}
		if p, lag := gauge(t, m, "flashsale_outbox_pending_events"), gauge(t, m, "flashsale_outbox_lag_seconds"); p != 5 || lag != 10 {
			t.Errorf("pending %v, lag %vs; want 5 and 10s", p, lag)
		}
		if n, err := relay.RelayOnce(t.Context()); err != nil || n != 3 {
			t.Fatalf("RelayOnce = %d, %v", n, err)
		}
		clock.Advance(time.Hour + time.Second)
		if n, err := relay.RelayOnce(t.Context()); err != nil || n != 2 {
			t.Fatalf("RelayOnce = %d, %v", n, err)
		}
		if err := relay.Housekeep(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The first three were published over an hour ago: gone. The last two
		// were published now: kept.
		for i, id := range ids {
			_, err := rec.OutboxEvent(t.Context(), id)
			if gone := errors.Is(err, flashsale.ErrNotFound); gone != (i < 3) {
				t.Errorf("event %d: gone %v after the purge, %v", i, gone, err)
			}
		}
		if p, lag := gauge(t, m, "flashsale_outbox_pending_events"), gauge(t, m, "flashsale_outbox_lag_seconds"); p != 0 || lag != 0 {
			t.Errorf("pending %v, lag %vs after delivery; want 0 and 0", p, lag)
		}
	})
}

// signal is a sink that reports each batch on a channel.
type signal chan []*flashsale.OutboxEvent

func (s signal) Name() string { return "signal" }
func (s signal) Publish(_ context.Context, events []*flashsale.OutboxEvent) []error {
	s <- events
	return nil
}

// TestNotifyWakesTheRelay: a started relay whose poll interval is an hour
// delivers events written after it started as soon as it is notified.
func TestNotifyWakesTheRelay(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sink := make(signal, 10)
	relay := New(Config{Store: st, Sink: sink, Now: func() time.Time { return t0 }, Interval: time.Hour, HousekeepingInterval: time.Hour})
	relay.Start(t.Context())
	defer relay.Stop()
	ids := seed(t, st, 3)
	relay.Notify()
	got := 0
	timeout := time.After(10 * time.Second)
	for got < len(ids) {
		select {
		case batch := <-sink:
			got += len(batch)
		case <-timeout:
			t.Fatalf("the notified relay delivered %d of %d events within 10s", got, len(ids))
		}
	}
}

// TestBackoff: exponential, capped, half of it jitter.
func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		jitter   float64
		attempts int
		want     time.Duration
	}{
		{0, 1, 500 * time.Millisecond},
		{0.999999, 1, time.Second},
		{0, 4, 4 * time.Second},
		{0.5, 4, 6 * time.Second},
		{0, 30, 5 * time.Minute},
		{1, 30, 10 * time.Minute},
	} {
		r := New(Config{BaseBackoff: time.Second, MaxBackoff: 10 * time.Minute, Jitter: func() float64 { return c.jitter }})
		if got := r.Backoff(c.attempts); got.Round(time.Millisecond) != c.want {
			t.Errorf("Backoff(%d) with jitter %v = %v, want %v", c.attempts, c.jitter, got, c.want)
		}
	}
}

// gauge reads a gauge of the metrics by name.
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
