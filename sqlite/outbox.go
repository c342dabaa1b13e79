package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

// The outbox's work queue. Every claim is a write transaction on the
// store's one write connection (BEGIN IMMEDIATE, and the file's lock
// across processes), so two claims never interleave and a claim's UPDATE
// sees every earlier claim: what FOR UPDATE SKIP LOCKED gives the
// PostgreSQL record, no event claimed twice at once. The rest (claim
// timeout, attempts counted at claim time, fencing by token, backoff, dead
// letters, the partial index) is the same SQL.

// InsertEvents writes the events one INSERT each, in the transaction it
// runs in.
func (x statements) InsertEvents(ctx context.Context, events []flashsale.Event) (int, error) {
	n := 0
	for _, e := range events {
		k, err := affected(x.q.ExecContext(ctx, `
			INSERT INTO outbox (event_id, topic, sale_id, payload, created_at, next_attempt_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?5)
			ON CONFLICT (event_id) DO NOTHING`,
			e.ID, string(e.Type), e.SaleID, string(e.Payload), micros(e.OccurredAt)))
		if err != nil {
			return n, fmt.Errorf("write event %s: %w", e.ID, err)
		}
		n += k
	}
	return n, nil
}

// ClaimEvents picks the batch in a subquery and claims it with one UPDATE
// … RETURNING, which re-checks that each event is still pending.
func (x statements) ClaimEvents(ctx context.Context, c flashsale.EventClaim, maxAttempts int, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
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
		RETURNING `+record.EventColumns,
		micros(c.Now), c.Limit, c.Token, c.Relay, micros(c.Now.Add(c.Lease)), maxAttempts))(fn)
}

func (x statements) CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error) {
	n := 0
	for len(ids) > 0 {
		var (
			args []any
			list string
		)
		args, list, ids = inList(ids, token, micros(at))
		k, err := affected(x.q.ExecContext(ctx, `
			UPDATE outbox SET published_at = ?2, claim_token = NULL
			WHERE claim_token = ?1 AND event_id IN `+list, args...))
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

func (x statements) RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error) {
	n, err := affected(x.q.ExecContext(ctx, `
		UPDATE outbox SET claim_token = NULL, next_attempt_at = ?3, last_error = ?4
		WHERE event_id = ?2 AND claim_token = ?1`, token, id, micros(retryAt), cause))
	return n == 1, err
}

func (x statements) BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error) {
	n, err := affected(x.q.ExecContext(ctx, `
		UPDATE outbox SET claim_token = NULL, dead_at = ?3, last_error = ?4
		WHERE event_id = ?2 AND claim_token = ?1`, token, id, micros(at), cause))
	return n == 1, err
}

func (x statements) BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error) {
	return affected(x.q.ExecContext(ctx, `
		UPDATE outbox
		SET dead_at = ?1, claim_token = NULL,
		    last_error = 'no answer after ' || attempts || ' claims'
		                 || CASE WHEN last_error = '' THEN '' ELSE '; last error: ' || last_error END
		WHERE published_at IS NULL AND dead_at IS NULL
		  AND next_attempt_at <= ?1 AND attempts >= ?2`, micros(now), maxAttempts))
}

func (x statements) ReplayEvent(ctx context.Context, id string, at time.Time) record.Row {
	return x.q.QueryRowContext(ctx, `
		UPDATE outbox SET dead_at = NULL, attempts = 0, next_attempt_at = ?2, claim_token = NULL
		WHERE event_id = ?1 AND dead_at IS NOT NULL
		RETURNING `+record.EventColumns, id, micros(at))
}

func (x statements) OutboxEvent(ctx context.Context, id string) record.Row {
	return x.q.QueryRowContext(ctx, `SELECT `+record.EventColumns+` FROM outbox WHERE event_id = ?1`, id)
}

func (x statements) SaleEvents(ctx context.Context, saleID string, limit int, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT `+record.EventColumns+` FROM outbox
		WHERE sale_id = ?1
		ORDER BY created_at, event_id
		LIMIT ?2`, saleID, limit))(fn)
}

func (x statements) DeadEvents(ctx context.Context, limit int, fn record.Each) error {
	return each(x.q.QueryContext(ctx, `
		SELECT `+record.EventColumns+` FROM outbox
		WHERE dead_at IS NOT NULL
		ORDER BY dead_at DESC, event_id
		LIMIT ?1`, limit))(fn)
}

// OutboxStats reads one partial index for each figure.
func (x statements) OutboxStats(ctx context.Context, saleID string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT
			(SELECT count(*) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND (?1 = '' OR sale_id = ?1)),
			(SELECT min(created_at) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND (?1 = '' OR sale_id = ?1)),
			(SELECT count(*) FROM outbox
			 WHERE dead_at IS NOT NULL AND (?1 = '' OR sale_id = ?1))`, saleID)
}

func (x statements) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	return affected(x.q.ExecContext(ctx, `
		DELETE FROM outbox WHERE event_id IN (
			SELECT event_id FROM outbox
			WHERE published_at IS NOT NULL AND published_at < ?1
			ORDER BY published_at
			LIMIT ?2)`, micros(before), limit))
}
