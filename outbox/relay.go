// Package outbox relays the events of the record's transactional outbox to
// a sink: a webhook (package webhook), NATS JetStream (package jetstream) or
// the log (LogSink).
//
// There is no transaction that spans the record and a broker, so every
// change writes its event to the outbox table in its own transaction (the
// record's packages do that), and a Relay publishes it afterwards. The
// outbox is a work queue in a table, and every clause of its claim is
// load-bearing:
//
//   - a relay claims a batch with one UPDATE … RETURNING over a FOR UPDATE
//     SKIP LOCKED subquery that is MATERIALIZED, so concurrent relays take
//     different events and no claim takes more than its LIMIT (SQLite, with
//     its one writer, serialises the claims instead);
//   - the attempt is counted when the event is claimed, before it is
//     tried, so a relay that dies mid-delivery still uses one up;
//   - a claim holds its events for a lease (the claim timeout): the events
//     of a relay that died become due again when it lapses;
//   - each claim writes a fresh token, and completing or failing an event
//     is UPDATE … WHERE id = $ AND claim_token = $: a relay whose lease
//     lapsed and was taken over (a zombie) changes nothing;
//   - a failed delivery is retried after an exponential backoff with
//     jitter; after MaxAttempts it is dead-lettered, for an operator to
//     list and replay;
//   - a partial index holds exactly the pending events, so the queue stays
//     small however many events were ever published, and published events
//     are deleted after the retention.
//
// Delivery is at least once: a relay can publish and die before it marks
// the event published, and the event goes again. Every delivery carries the
// event's id, fixed when the event was written, so consumers deduplicate
// on it (package inbox). Events are not ordered across relays.
//
// Overselling is neither prevented nor caused here: events report changes,
// they never make them.
package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mathrand "math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/metrics"
)

// Store is the part of the record a relay uses. Package postgres and
// package sqlite implement it (it is part of flashsale.OutboxStore).
type Store interface {
	ClaimEvents(ctx context.Context, c flashsale.EventClaim) ([]*flashsale.OutboxEvent, error)
	CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error)
	RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error)
	BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error)
	BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error)
	OutboxStats(ctx context.Context, saleID string) (flashsale.OutboxStats, error)
	PurgePublished(ctx context.Context, before time.Time, limit int) (int, error)
}

// Sink delivers events to the world outside the record.
type Sink interface {
	// Publish delivers the events, each with its id so that the receiver
	// can deduplicate. It returns nil if it delivered every one, or a
	// slice as long as events whose nil entries were delivered and whose
	// other entries say why the event was not. It must give up by ctx's
	// deadline: the relay's lease on the events ends soon after, and
	// another relay may then deliver them.
	Publish(ctx context.Context, events []*flashsale.OutboxEvent) []error
	// Name names the sink in metrics and logs.
	Name() string
}

// Config configures a Relay. Store and Sink are required; every other
// field has a default.
type Config struct {
	Store Store
	Sink  Sink
	// Name names the relay in the outbox (claimed_by) and the log
	// (default host/pid/random).
	Name string
	Now  func() time.Time
	// Batch is how many events one claim takes (default 500).
	Batch int
	// Interval is how long an idle relay waits before it looks again
	// (default 250ms); Notify wakes it sooner.
	Interval time.Duration
	// Lease is the claim timeout (default 30s): events a relay claimed and
	// did not finish are claimed again after it.
	Lease time.Duration
	// PublishTimeout bounds one Publish (default Lease/3), so that a live
	// relay has finished with its events long before its lease lapses and
	// two relays never deliver one event at the same time.
	PublishTimeout time.Duration
	// MaxAttempts is how many claims an event gets before it is
	// dead-lettered (default 10).
	MaxAttempts int
	// BaseBackoff and MaxBackoff bound the wait before a failed event is
	// tried again: BaseBackoff·2^(attempts−1), at most MaxBackoff, half of
	// it random (defaults 1s and 10m).
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// Jitter returns a number in [0, 1) (default math/rand/v2).
	Jitter func() float64
	// Retention is how long published events are kept (default 24h).
	Retention time.Duration
	// HousekeepingInterval is how often the relay buries abandoned events,
	// purges published ones and refreshes its metrics (default 10s).
	HousekeepingInterval time.Duration
	// PurgeBatch bounds one purge statement (default 5000).
	PurgeBatch int
	Logger     *slog.Logger
	Metrics    *metrics.Metrics

	// Test hooks, instead of sleeps. afterClaim runs after a claim and
	// afterPublish after Publish returned, before the outcome is written;
	// returning true abandons the batch there, as a relay killed at that
	// point would.
	afterClaim   func([]*flashsale.OutboxEvent) bool
	afterPublish func([]*flashsale.OutboxEvent, []error) bool
}

// Relay drains the outbox into its sink. It is a background service (Start,
// Stop) whose steps (RelayOnce, Drain, Housekeep) tests and tools may also
// call directly. Safe for concurrent use; any number of relays, in this
// process or others, may drain one outbox.
type Relay struct {
	cfg  Config
	wake chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Relay with cfg's defaults filled in.
func New(cfg Config) *Relay {
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), newToken()[:6])
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.PublishTimeout <= 0 || cfg.PublishTimeout > cfg.Lease/2 {
		cfg.PublishTimeout = cfg.Lease / 3
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Minute
	}
	if cfg.Jitter == nil {
		cfg.Jitter = mathrand.Float64
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 24 * time.Hour
	}
	if cfg.HousekeepingInterval <= 0 {
		cfg.HousekeepingInterval = 10 * time.Second
	}
	if cfg.PurgeBatch <= 0 {
		cfg.PurgeBatch = 5000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Name returns the relay's name as it claims events.
func (r *Relay) Name() string { return r.cfg.Name }

// Notify wakes the relay if it is waiting, so that events just committed
// go out now rather than at its next poll. It never blocks; the record's
// events hook calls it (postgres.WithEventsHook, sqlite.WithEventsHook).
func (r *Relay) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start runs the relay in the background until Stop: it drains the outbox,
// waits for Notify or Interval, and keeps house every HousekeepingInterval.
func (r *Relay) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.cancel, r.done = cancel, make(chan struct{})
	r.mu.Unlock()
	go func() {
		defer close(r.done)
		poll := time.NewTicker(r.cfg.Interval)
		defer poll.Stop()
		house := time.NewTicker(r.cfg.HousekeepingInterval)
		defer house.Stop()
		if err := r.Housekeep(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("outbox: housekeeping", "relay", r.cfg.Name, "err", err)
		}
		for {
			if _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("outbox: relay", "relay", r.cfg.Name, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-house.C:
				if err := r.Housekeep(ctx); err != nil && ctx.Err() == nil {
					r.cfg.Logger.Error("outbox: housekeeping", "relay", r.cfg.Name, "err", err)
				}
			case <-r.wake:
			case <-poll.C:
			}
		}
	}()
}

// Stop stops the relay and waits for its batch in flight to be finished
// (published and marked, or released for another relay).
func (r *Relay) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Drain relays batch after batch until a claim comes back short, and
// reports how many events it delivered.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	total := 0
	for {
		n, claimed, err := r.relayOnce(ctx)
		total += n
		if err != nil || claimed < r.cfg.Batch || ctx.Err() != nil {
			return total, err
		}
	}
}

// RelayOnce claims one batch of due events, publishes it, and writes the
// outcome: published for those the sink took, a retry after the backoff
// (or the dead letter, after MaxAttempts) for the others. It reports how
// many events it delivered.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	n, _, err := r.relayOnce(ctx)
	return n, err
}

// errAbandoned is what a batch abandoned by a test hook returns.
var errAbandoned = errors.New("outbox: batch abandoned (test hook)")

func (r *Relay) relayOnce(ctx context.Context) (delivered, claimed int, err error) {
	token := newToken()
	batch, err := r.cfg.Store.ClaimEvents(ctx, flashsale.EventClaim{
		Relay: r.cfg.Name, Token: token, Now: r.cfg.Now(), Lease: r.cfg.Lease,
		Limit: r.cfg.Batch, MaxAttempts: r.cfg.MaxAttempts,
	})
	if err != nil || len(batch) == 0 {
		return 0, 0, err
	}
	if r.cfg.afterClaim != nil && r.cfg.afterClaim(batch) {
		return 0, len(batch), errAbandoned
	}

	// The sink is asked under a deadline well inside the lease; the
	// outcome is written even if ctx ends meanwhile (the relay is
	// stopping), so that a stopped relay leaves no claim to time out.
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	errs := r.cfg.Sink.Publish(pctx, batch)
	cancel()
	if errs != nil && len(errs) != len(batch) {
		err := fmt.Errorf("outbox: sink %s returned %d errors for %d events", r.cfg.Sink.Name(), len(errs), len(batch))
		errs = make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
	}
	if r.cfg.afterPublish != nil && r.cfg.afterPublish(batch, errs) {
		return 0, len(batch), errAbandoned
	}

	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	defer wcancel()
	now := r.cfg.Now()
	ids := make([]string, 0, len(batch))
	var failures []error
	for i, ev := range batch {
		if errs == nil || errs[i] == nil {
			ids = append(ids, ev.ID)
			r.cfg.Metrics.OutboxDelivered(r.cfg.Sink.Name(), now.Sub(ev.CreatedAt))
			continue
		}
		if err := r.fail(wctx, token, ev, errs[i], now); err != nil {
			failures = append(failures, err)
		}
	}
	if _, err := r.cfg.Store.CompleteEvents(wctx, token, ids, now); err != nil {
		// Delivered but not marked: they go again after the lease, and
		// consumers drop the duplicates by id.
		failures = append(failures, err)
	}
	return len(ids), len(batch), errors.Join(failures...)
}

// fail writes the outcome of an event the sink did not take: dead after
// MaxAttempts, else a retry after the backoff.
func (r *Relay) fail(ctx context.Context, token string, ev *flashsale.OutboxEvent, cause error, now time.Time) error {
	msg := cause.Error()
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	if ev.Attempts >= r.cfg.MaxAttempts {
		buried, err := r.cfg.Store.BuryEvent(ctx, token, ev.ID, now, msg)
		if buried {
			r.cfg.Metrics.OutboxDeadLettered(r.cfg.Sink.Name())
			r.cfg.Logger.Error("outbox: event dead-lettered", "relay", r.cfg.Name, "event", ev.ID, "type", ev.Type,
				"attempts", ev.Attempts, "err", cause)
		}
		return err
	}
	retryAt := now.Add(r.Backoff(ev.Attempts))
	retried, err := r.cfg.Store.RetryEvent(ctx, token, ev.ID, retryAt, msg)
	if retried {
		r.cfg.Metrics.OutboxRetried(r.cfg.Sink.Name())
		r.cfg.Logger.Warn("outbox: delivery failed; will retry", "relay", r.cfg.Name, "event", ev.ID, "type", ev.Type,
			"attempts", ev.Attempts, "retryAt", retryAt, "err", cause)
	}
	return err
}

// Backoff is how long an event waits after its attempts-th failed attempt:
// BaseBackoff·2^(attempts−1), at most MaxBackoff, of which the second half
// is random, so that events that failed together do not return together.
func (r *Relay) Backoff(attempts int) time.Duration {
	d := float64(r.cfg.BaseBackoff) * math.Pow(2, float64(max(attempts, 1)-1))
	d = min(d, float64(r.cfg.MaxBackoff))
	return time.Duration(d/2 + r.cfg.Jitter()*d/2)
}

// Housekeep dead-letters events whose claims all lapsed without an answer,
// deletes published events older than the retention, and refreshes the
// outbox metrics (pending, lag, dead letters).
func (r *Relay) Housekeep(ctx context.Context) error {
	now := r.cfg.Now()
	var errs []error
	buried, err := r.cfg.Store.BuryAbandoned(ctx, now, r.cfg.MaxAttempts)
	if err != nil {
		errs = append(errs, err)
	}
	for range buried {
		r.cfg.Metrics.OutboxDeadLettered(r.cfg.Sink.Name())
	}
	if buried > 0 {
		r.cfg.Logger.Error("outbox: events dead-lettered after their claims lapsed", "relay", r.cfg.Name, "events", buried)
	}
	for {
		n, err := r.cfg.Store.PurgePublished(ctx, now.Add(-r.cfg.Retention), r.cfg.PurgeBatch)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if n < r.cfg.PurgeBatch {
			break
		}
	}
	st, err := r.cfg.Store.OutboxStats(ctx, "")
	if err != nil {
		errs = append(errs, err)
	} else {
		r.cfg.Metrics.Outbox(st.Pending, st.Lag(now), st.Dead)
	}
	return errors.Join(errs...)
}

// newToken returns a fresh claim token: 128 random bits.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LogSink publishes every event to a structured log, one line each: the
// sink of the embedded demo, and a record of what would have been sent.
// It never fails. Safe for concurrent use.
type LogSink struct {
	Logger *slog.Logger
}

var _ Sink = LogSink{}

// Name returns "log".
func (LogSink) Name() string { return "log" }

// Publish writes one log line per event, at Info.
func (s LogSink) Publish(ctx context.Context, events []*flashsale.OutboxEvent) []error {
	for _, ev := range events {
		s.Logger.LogAttrs(ctx, slog.LevelInfo, "event",
			slog.String("id", ev.ID), slog.String("type", string(ev.Type)),
			slog.String("sale", ev.SaleID), slog.Int("attempt", ev.Attempts),
			slog.String("payload", string(ev.Payload)))
	}
	return nil
}
