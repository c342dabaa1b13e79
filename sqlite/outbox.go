package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// The transactional outbox: events are written by the same transaction as
// the change they report (see insertEvents and its callers), and drained by
// relays (package outbox) through the work-queue statements below.
//
// SQLite has one writer: every claim is a write transaction on the store's
// one write connection (BEGIN IMMEDIATE, and the file's lock across
// processes), so two claims never interleave and the claim's UPDATE sees
// every earlier claim. That gives what FOR UPDATE SKIP LOCKED gives the
// PostgreSQL record: no event is claimed twice at once. The rest (claim
// timeout, attempts counted at claim time, fencing by token, backoff,
// dead letters, the partial index) is the same SQL.

// outboxColumns is an outbox row in the order scanOutbox reads it.
const outboxColumns = `event_id, topic, sale_id, payload, created_at, attempts,
	next_attempt_at, claim_token, claimed_by, claimed_at, published_at,
	dead_at, last_error`

func scanOutbox(row scanner) (*flashsale.OutboxEvent, error) {
	var (
		e                         flashsale.OutboxEvent
		topic, payload            string
		created, next             int64
		token, by                 sql.NullString
		claimed, published, death sql.NullInt64
	)
	err := row.Scan(&e.ID, &topic, &e.SaleID, &payload, &created, &e.Attempts,
		&next, &token, &by, &claimed, &published,
		&death, &e.LastError)
	if err != nil {
		return nil, err
	}
	e.Type = flashsale.EventType(topic)
	e.Payload = []byte(payload)
	e.CreatedAt, e.OccurredAt = timeOf(created), timeOf(created)
	e.NextAttemptAt = timeOf(next)
	e.ClaimToken, e.ClaimedBy = token.String, by.String
	e.ClaimedAt, e.PublishedAt, e.DeadAt = nullTimeOf(claimed), nullTimeOf(published), nullTimeOf(death)
	return &e, nil
}

func collectOutbox(rows *sql.Rows) ([]*flashsale.OutboxEvent, error) {
	defer rows.Close()
	var events []*flashsale.OutboxEvent
	for rows.Next() {
		e, err := scanOutbox(rows)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, rows.Err()
}

// insertEvents writes events through tx, so that they commit with the
// change they report, skipping ids the outbox has; it reports how many
// were new.
func insertEvents(ctx context.Context, tx *wtx, events ...flashsale.Event) (int, error) {
	n := 0
	for _, e := range events {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO outbox (event_id, topic, sale_id, payload, created_at, next_attempt_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?5)
			ON CONFLICT (event_id) DO NOTHING`,
			e.ID, string(e.Type), e.SaleID, string(e.Payload), micros(e.OccurredAt))
		if err != nil {
			return n, fmt.Errorf("write event %s: %w", e.ID, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += int(k)
	}
	return n, nil
}

// AppendEvents writes the events whose ids the outbox lacks, in one
// transaction, and reports how many it wrote.
func (s *Store) AppendEvents(ctx context.Context, events ...flashsale.Event) (int, error) {
	var n int
	err := s.tx(ctx, func(tx *wtx) error {
		var err error
		n, err = insertEvents(ctx, tx, events...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	if n > 0 {
		s.eventsWritten()
	}
	return n, nil
}

// ClaimEvents claims a batch of due events with one UPDATE … RETURNING in
// a write transaction. The subquery picks the batch (pending, due — a claim
// pushes next_attempt_at to Now+Lease, so the events of a relay that died
// become due again when its lease lapses — not past MaxAttempts, oldest due
// first, LIMIT); the UPDATE stamps the claim's fresh token and counts the
// attempt before anything is tried. The single writer stands in for SKIP
// LOCKED: no other claim runs until this one commits.
func (s *Store) ClaimEvents(ctx context.Context, c flashsale.EventClaim) ([]*flashsale.OutboxEvent, error) {
	if c.Limit < 1 {
		return nil, nil
	}
	if c.Token == "" {
		return nil, errors.New("sqlite: claim events: a claim token is required")
	}
	maxAttempts := c.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 1 << 30
	}
	var events []*flashsale.OutboxEvent
	err := s.tx(ctx, func(tx *wtx) error {
		rows, err := tx.QueryContext(ctx, `
			UPDATE outbox
			SET claim_token = ?3, claimed_by = ?4, claimed_at = ?1,
			    next_attempt_at = ?5, attempts = attempts + 1
			WHERE event_id IN (
				SELECT event_id FROM outbox
				WHERE published_at IS NULL AND dead_at IS NULL
				  AND next_attempt_at <= ?1
				  AND attempts < ?6
				ORDER BY next_attempt_at
				LIMIT ?2)
			  AND published_at IS NULL AND dead_at IS NULL
			RETURNING `+outboxColumns,
			micros(c.Now), c.Limit, c.Token, c.Relay, micros(c.Now.Add(c.Lease)), maxAttempts)
		if err != nil {
			return err
		}
		events, err = collectOutbox(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim events: %w", err)
	}
	sortOutbox(events)
	return events, nil
}

// sortOutbox puts events in the order they were written: RETURNING has no
// order of its own.
func sortOutbox(events []*flashsale.OutboxEvent) {
	slices.SortFunc(events, func(a, b *flashsale.OutboxEvent) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// CompleteEvents marks published the events of ids that token still holds,
// fenced by the token: a relay whose claim lapsed and was taken over
// changes nothing.
func (s *Store) CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error) {
	if len(ids) == 0 || token == "" {
		return 0, nil
	}
	var n int64
	err := s.tx(ctx, func(tx *wtx) error {
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), statesChunk)]
			ids = ids[len(chunk):]
			args := make([]any, 0, len(chunk)+2)
			args = append(args, token, micros(at))
			for _, id := range chunk {
				args = append(args, id)
			}
			res, err := tx.ExecContext(ctx, `
				UPDATE outbox SET published_at = ?2, claim_token = NULL
				WHERE claim_token = ?1
				  AND event_id IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: complete events: %w", err)
	}
	return int(n), nil
}

// fenced runs one UPDATE of an event fenced by its claim token and reports
// whether it changed the row.
func (s *Store) fenced(ctx context.Context, query string, args ...any) (bool, error) {
	var n int64
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

// RetryEvent releases the event, fenced by token, to be claimed again at
// retryAt.
func (s *Store) RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error) {
	ok, err := s.fenced(ctx, `
		UPDATE outbox SET claim_token = NULL, next_attempt_at = ?3, last_error = ?4
		WHERE event_id = ?2 AND claim_token = ?1`, token, id, micros(retryAt), cause)
	if err != nil {
		return false, fmt.Errorf("sqlite: retry event %s: %w", id, err)
	}
	return ok, nil
}

// BuryEvent dead-letters the event, fenced by token.
func (s *Store) BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error) {
	ok, err := s.fenced(ctx, `
		UPDATE outbox SET claim_token = NULL, dead_at = ?3, last_error = ?4
		WHERE event_id = ?2 AND claim_token = ?1`, token, id, micros(at), cause)
	if err != nil {
		return false, fmt.Errorf("sqlite: bury event %s: %w", id, err)
	}
	return ok, nil
}

// BuryAbandoned dead-letters the due events that used up their claims
// without an answer (their claims lapsed): ClaimEvents no longer takes
// them, so they would otherwise stay pending for ever.
func (s *Store) BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE outbox
			SET dead_at = ?1, claim_token = NULL,
			    last_error = 'no answer after ' || attempts || ' claims'
			                 || CASE WHEN last_error = '' THEN '' ELSE '; last error: ' || last_error END
			WHERE published_at IS NULL AND dead_at IS NULL
			  AND next_attempt_at <= ?1 AND attempts >= ?2`, micros(now), maxAttempts)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: bury abandoned events: %w", err)
	}
	return int(n), nil
}

// ReplayEvent makes a dead-lettered event pending again, due at at, with
// its attempts reset.
func (s *Store) ReplayEvent(ctx context.Context, id string, at time.Time) (*flashsale.OutboxEvent, error) {
	var e *flashsale.OutboxEvent
	err := s.tx(ctx, func(tx *wtx) error {
		var err error
		e, err = scanOutbox(tx.QueryRowContext(ctx, `
			UPDATE outbox SET dead_at = NULL, attempts = 0, next_attempt_at = ?2, claim_token = NULL
			WHERE event_id = ?1 AND dead_at IS NOT NULL
			RETURNING `+outboxColumns, id, micros(at)))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := scanOutbox(tx.QueryRowContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE event_id = ?1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("event %s: %w", id, flashsale.ErrNotFound)
		}
		if err != nil {
			return err
		}
		return flashsale.Errorf(flashsale.CodeInvalidState, "Event %s is not dead-lettered (published: %t).", cur.ID, !cur.PublishedAt.IsZero())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: replay event %s: %w", id, err)
	}
	s.eventsWritten()
	return e, nil
}

// OutboxEvent returns the event with the id, or ErrNotFound.
func (s *Store) OutboxEvent(ctx context.Context, id string) (*flashsale.OutboxEvent, error) {
	e, err := scanOutbox(s.read.QueryRowContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE event_id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: event %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: event %s: %w", id, err)
	}
	return e, nil
}

// SaleEvents returns up to limit of the sale's events, oldest first.
func (s *Store) SaleEvents(ctx context.Context, saleID string, limit int) ([]*flashsale.OutboxEvent, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT `+outboxColumns+` FROM outbox
		WHERE sale_id = ?1
		ORDER BY created_at, event_id
		LIMIT ?2`, saleID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of sale %s: %w", saleID, err)
	}
	events, err := collectOutbox(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events of sale %s: %w", saleID, err)
	}
	return events, nil
}

// DeadEvents returns up to limit dead-lettered events, newest first.
func (s *Store) DeadEvents(ctx context.Context, limit int) ([]*flashsale.OutboxEvent, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT `+outboxColumns+` FROM outbox
		WHERE dead_at IS NOT NULL
		ORDER BY dead_at DESC, event_id
		LIMIT ?1`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: dead events: %w", err)
	}
	events, err := collectOutbox(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: dead events: %w", err)
	}
	return events, nil
}

// OutboxStats counts pending and dead events, of the sale or of all for
// saleID "". Each figure reads one partial index.
func (s *Store) OutboxStats(ctx context.Context, saleID string) (flashsale.OutboxStats, error) {
	var (
		st     flashsale.OutboxStats
		oldest sql.NullInt64
	)
	err := s.read.QueryRowContext(ctx, `
		SELECT
			(SELECT count(*) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND (?1 = '' OR sale_id = ?1)),
			(SELECT min(created_at) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND (?1 = '' OR sale_id = ?1)),
			(SELECT count(*) FROM outbox
			 WHERE dead_at IS NOT NULL AND (?1 = '' OR sale_id = ?1))`, saleID).
		Scan(&st.Pending, &oldest, &st.Dead)
	if err != nil {
		return st, fmt.Errorf("sqlite: outbox stats: %w", err)
	}
	st.OldestPending = nullTimeOf(oldest)
	return st, nil
}

// PurgePublished deletes up to limit events published before before,
// oldest first.
func (s *Store) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `
			DELETE FROM outbox WHERE event_id IN (
				SELECT event_id FROM outbox
				WHERE published_at IS NOT NULL AND published_at < ?1
				ORDER BY published_at
				LIMIT ?2)`, micros(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge published events: %w", err)
	}
	return int(n), nil
}
