// Package record is the record (flashsale.Store) above its engines: the
// rules of sales, holds, orders and the outbox, written once.
//
// The gate decides who wins; the record keeps the winners, and decides
// when a hold is over, which is when its units may go back to stock.
// Every state change of a hold is one conditional statement whose answer
// (the row it changed, or none) is the decision, so that however many
// sweepers, retries and cancellations race for a hold, exactly one of them
// is told to give its units back. This package holds what those answers
// mean: the transitions and their refusals (a confirm of an expired hold,
// a cancel of a confirmed one, an order moved at a stale version), the
// event each transition writes in its transaction, the epoch fence of a
// new hold, the defaults of a new sale.
//
// An engine implements Driver: its connections and transactions, one
// method per statement with its SQL in its own package, and the
// translation of its errors. It decides nothing. The engines are package
// sqlite and package postgres; both pass the conformance suite in package
// storetest.
//
// Overselling is not prevented here but in the gate (packages memory and
// redis); the record sees only the gate's winners. What the record decides
// is the other half: which hold is over, exactly once (restocked_at set by a
// conditional update), so that package restock gives its units back once.
// CHECK constraints and unique indexes back the gate's per-shopper and
// per-instrument limits.
package record

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// Config configures a Store.
type Config struct {
	// Now is the clock UpdateSale stamps updated_at with, the one write
	// whose method takes no time. Nil is time.Now.
	Now func() time.Time
	// OnEvents, if set, is called after every commit that wrote events to
	// the outbox, so that a relay in this process can start on them at
	// once rather than at its next poll (package outbox, Relay.Notify).
	// It must not block.
	OnEvents func()
}

// Store is the record over one engine. It is safe for concurrent use by
// multiple goroutines (as its Driver is); its zero value is not usable,
// call New.
type Store struct {
	d        Driver
	now      func() time.Time
	onEvents func()
}

var _ flashsale.Store = (*Store)(nil)

// New returns the record over the engine d.
func New(d Driver, cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{d: d, now: cfg.Now, onEvents: cfg.OnEvents}
}

// Ping reports whether the engine answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.d.Ping(ctx); err != nil {
		return s.fail(err, "ping")
	}
	return nil
}

// Close closes the engine's connections; writes in progress finish first.
func (s *Store) Close() error { return s.d.Close() }

// fail returns err as the Store's error of the operation what: prefixed
// with the engine's name, and marked unavailable when the engine did not
// answer.
func (s *Store) fail(err error, what string, args ...any) error {
	return s.d.Classify(fmt.Errorf("%s: %s: %w", s.d.Name(), fmt.Sprintf(what, args...), err))
}

// eventsWritten tells the events hook that a commit wrote events.
func (s *Store) eventsWritten() {
	if s.onEvents != nil {
		s.onEvents()
	}
}

// write runs one statement through the Driver's Write and returns its
// answer.
func write[T any](ctx context.Context, s *Store, statement func(Statements) (T, error)) (T, error) {
	var v T
	err := s.d.Write(ctx, func(x Statements) error {
		var err error
		v, err = statement(x)
		return err
	})
	return v, err
}
