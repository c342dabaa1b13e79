package record

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// The transactional outbox: events are written by the same transaction as
// the change they report (the calls of InsertEvents above), and drained by
// relays (package outbox) through the work-queue statements below. Every
// statement that finishes a claim is fenced by the claim's token, so a
// relay whose claim lapsed and was taken over (a zombie) changes nothing.

// AppendEvents writes the events whose ids the outbox lacks, and reports
// how many it wrote.
func (s *Store) AppendEvents(ctx context.Context, events ...flashsale.Event) (int, error) {
	n, err := write(ctx, s, func(x Statements) (int, error) { return x.InsertEvents(ctx, events) })
	if err != nil {
		return 0, s.fail(err, "append events")
	}
	if n > 0 {
		s.eventsWritten()
	}
	return n, nil
}

// ClaimEvents claims a batch of due events with one statement: pending,
// due (next_attempt_at is both the backoff and the claim timeout: a claim
// pushes it to Now+Lease, so the events of a relay that died become due
// again when its lease lapses), not past MaxAttempts, oldest due first.
// The claim stamps its fresh token and counts the attempt before anything
// is tried. The events are returned in the order they were written.
func (s *Store) ClaimEvents(ctx context.Context, c flashsale.EventClaim) ([]*flashsale.OutboxEvent, error) {
	if c.Limit < 1 {
		return nil, nil
	}
	if c.Token == "" {
		return nil, errors.New(s.d.Name() + ": claim events: a claim token is required")
	}
	maxAttempts := c.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 1 << 30
	}
	var events []*flashsale.OutboxEvent
	err := s.d.Write(ctx, func(x Statements) error {
		events = nil
		return x.ClaimEvents(ctx, c, maxAttempts, collect(&events, s.scanEvent))
	})
	if err != nil {
		return nil, s.fail(err, "claim events")
	}
	// RETURNING has no order of its own.
	slices.SortFunc(events, func(a, b *flashsale.OutboxEvent) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return events, nil
}

// CompleteEvents marks published the events of ids that token still holds,
// fenced by the token: a relay whose claim lapsed and was taken over
// changes nothing.
func (s *Store) CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error) {
	if len(ids) == 0 || token == "" {
		return 0, nil
	}
	n, err := write(ctx, s, func(x Statements) (int, error) { return x.CompleteEvents(ctx, token, ids, at) })
	if err != nil {
		return 0, s.fail(err, "complete events")
	}
	return n, nil
}

// RetryEvent releases the event, fenced by token, to be claimed again at
// retryAt.
func (s *Store) RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error) {
	ok, err := write(ctx, s, func(x Statements) (bool, error) { return x.RetryEvent(ctx, token, id, retryAt, cause) })
	if err != nil {
		return false, s.fail(err, "retry event %s", id)
	}
	return ok, nil
}

// BuryEvent dead-letters the event, fenced by token.
func (s *Store) BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error) {
	ok, err := write(ctx, s, func(x Statements) (bool, error) { return x.BuryEvent(ctx, token, id, at, cause) })
	if err != nil {
		return false, s.fail(err, "bury event %s", id)
	}
	return ok, nil
}

// BuryAbandoned dead-letters the due events that used up their claims
// without an answer (their claims lapsed): ClaimEvents no longer takes
// them, so they would otherwise stay pending for ever.
func (s *Store) BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error) {
	n, err := write(ctx, s, func(x Statements) (int, error) { return x.BuryAbandoned(ctx, now, maxAttempts) })
	if err != nil {
		return 0, s.fail(err, "bury abandoned events")
	}
	return n, nil
}

// ReplayEvent makes a dead-lettered event pending again, due at at, with
// its attempts reset. Errors: ErrNotFound, CodeInvalidState (the event is
// not dead-lettered).
func (s *Store) ReplayEvent(ctx context.Context, id string, at time.Time) (*flashsale.OutboxEvent, error) {
	var e *flashsale.OutboxEvent
	err := s.d.Write(ctx, func(x Statements) error {
		var err error
		e, err = s.scanEvent(x.ReplayEvent(ctx, id, at))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := s.scanEvent(x.OutboxEvent(ctx, id))
		if errors.Is(err, sql.ErrNoRows) {
			return flashsale.ErrNotFound
		}
		if err != nil {
			return err
		}
		return flashsale.Errorf(flashsale.CodeInvalidState, "Event %s is not dead-lettered (published: %t).", cur.ID, !cur.PublishedAt.IsZero())
	})
	if err != nil {
		return nil, s.fail(err, "replay event %s", id)
	}
	s.eventsWritten()
	return e, nil
}

// OutboxEvent returns the event with the id, or ErrNotFound.
func (s *Store) OutboxEvent(ctx context.Context, id string) (*flashsale.OutboxEvent, error) {
	e, err := one(s.d.Reads().OutboxEvent(ctx, id), s.scanEvent)
	if err != nil {
		return nil, s.fail(err, "event %s", id)
	}
	return e, nil
}

// SaleEvents returns up to limit of the sale's events, oldest first.
func (s *Store) SaleEvents(ctx context.Context, saleID string, limit int) ([]*flashsale.OutboxEvent, error) {
	var events []*flashsale.OutboxEvent
	if err := s.d.Reads().SaleEvents(ctx, saleID, limit, collect(&events, s.scanEvent)); err != nil {
		return nil, s.fail(err, "events of sale %s", saleID)
	}
	return events, nil
}

// DeadEvents returns up to limit dead-lettered events, newest first.
func (s *Store) DeadEvents(ctx context.Context, limit int) ([]*flashsale.OutboxEvent, error) {
	var events []*flashsale.OutboxEvent
	if err := s.d.Reads().DeadEvents(ctx, limit, collect(&events, s.scanEvent)); err != nil {
		return nil, s.fail(err, "dead events")
	}
	return events, nil
}

// OutboxStats counts pending and dead events, of the sale or of all for
// saleID "".
func (s *Store) OutboxStats(ctx context.Context, saleID string) (flashsale.OutboxStats, error) {
	var st flashsale.OutboxStats
	if err := s.d.Reads().OutboxStats(ctx, saleID).Scan(&st.Pending, s.d.Time(&st.OldestPending), &st.Dead); err != nil {
		return flashsale.OutboxStats{}, s.fail(err, "outbox stats")
	}
	return st, nil
}

// PurgePublished deletes up to limit events published before before,
// oldest first.
func (s *Store) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := write(ctx, s, func(x Statements) (int, error) { return x.PurgePublished(ctx, before, limit) })
	if err != nil {
		return 0, s.fail(err, "purge published events")
	}
	return n, nil
}
