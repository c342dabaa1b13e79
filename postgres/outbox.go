package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

// The outbox's work queue: the claims take FOR UPDATE SKIP LOCKED, so
// concurrent relays step over each other's rows instead of queueing
// behind them; the relay's batch statements are planned afresh each time
// (see growingTable).

// eventArrays spreads events into the parallel arrays that unnest reads,
// so that any number of events is one INSERT.
func eventArrays(events []flashsale.Event) (ids, topics, sales, payloads []string, ats []time.Time) {
	n := len(events)
	ids, topics, sales, payloads = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats = make([]time.Time, n)
	for i, e := range events {
		ids[i], topics[i], sales[i], payloads[i], ats[i] = e.ID, string(e.Type), e.SaleID, string(e.Payload), e.OccurredAt
	}
	return
}

// insertEventsSQL writes events, due at once, skipping ids the outbox has.
const insertEventsSQL = `
	INSERT INTO outbox (event_id, topic, sale_id, payload, created_at, next_attempt_at)
	SELECT id, topic, sale_id, payload, at, at
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
	     AS e (id, topic, sale_id, payload, at)
	ON CONFLICT (event_id) DO NOTHING`

// InsertEvents writes any number of events with one INSERT.
func (x statements) InsertEvents(ctx context.Context, events []flashsale.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	ids, topics, sales, payloads, ats := eventArrays(events)
	n, err := affected(x.q.Exec(ctx, insertEventsSQL, ids, topics, sales, payloads, ats))
	if err != nil {
		return 0, fmt.Errorf("write events: %w", err)
	}
	return n, nil
}

// ClaimEvents picks the batch FOR UPDATE SKIP LOCKED, MATERIALIZED so that
// it runs once and the UPDATE can never take more than LIMIT rows (an
// inlined subquery may be re-evaluated).
//
// The UPDATE joins on the primary key alone. The rows are locked by the
// subquery, which re-checked the pending predicate on their latest
// version, so they cannot have moved; and repeating the predicate there
// lets the planner, misled by a young table's missing statistics, drive
// the join from the partial index instead (a nested loop over every
// pending row for each claimed one: seconds per claim at 20,000 pending).
func (x statements) ClaimEvents(ctx context.Context, c flashsale.EventClaim, maxAttempts int, fn record.Each) error {
	return each(x.q.Query(ctx, `
		WITH due AS MATERIALIZED (
			SELECT event_id FROM outbox
			WHERE published_at IS NULL AND dead_at IS NULL
			  AND next_attempt_at <= $1
			  AND attempts < $6
			ORDER BY next_attempt_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		)
		UPDATE outbox o
		SET claim_token = $3, claimed_by = $4, claimed_at = $1,
		    next_attempt_at = $5, attempts = o.attempts + 1
		FROM due
		WHERE o.event_id = due.event_id
		RETURNING `+prefixed("o.", record.EventColumns),
		c.Now, c.Limit, c.Token, c.Relay, c.Now.Add(c.Lease), maxAttempts))(fn)
}

// prefixed qualifies each column of a column list with p.
func prefixed(p, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

func (x statements) CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error) {
	return affected(x.q.Exec(ctx, `
		UPDATE outbox SET published_at = $3, claim_token = NULL
		WHERE event_id = ANY($2) AND claim_token = $1`, growingTable, token, ids, at))
}

func (x statements) RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error) {
	n, err := affected(x.q.Exec(ctx, `
		UPDATE outbox SET claim_token = NULL, next_attempt_at = $3, last_error = $4
		WHERE event_id = $2 AND claim_token = $1`, token, id, retryAt, cause))
	return n == 1, err
}

func (x statements) BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error) {
	n, err := affected(x.q.Exec(ctx, `
		UPDATE outbox SET claim_token = NULL, dead_at = $3, last_error = $4
		WHERE event_id = $2 AND claim_token = $1`, token, id, at, cause))
	return n == 1, err
}

func (x statements) BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error) {
	return affected(x.q.Exec(ctx, `
		UPDATE outbox
		SET dead_at = $1, claim_token = NULL,
		    last_error = 'no answer after ' || attempts || ' claims'
		                 || CASE WHEN last_error = '' THEN '' ELSE '; last error: ' || last_error END
		WHERE published_at IS NULL AND dead_at IS NULL
		  AND next_attempt_at <= $1 AND attempts >= $2`, now, maxAttempts))
}

func (x statements) ReplayEvent(ctx context.Context, id string, at time.Time) record.Row {
	return x.q.QueryRow(ctx, `
		UPDATE outbox SET dead_at = NULL, attempts = 0, next_attempt_at = $2, claim_token = NULL
		WHERE event_id = $1 AND dead_at IS NOT NULL
		RETURNING `+record.EventColumns, id, at)
}

func (x statements) OutboxEvent(ctx context.Context, id string) record.Row {
	return x.q.QueryRow(ctx, `SELECT `+record.EventColumns+` FROM outbox WHERE event_id = $1`, id)
}

func (x statements) SaleEvents(ctx context.Context, saleID string, limit int, fn record.Each) error {
	return each(x.q.Query(ctx, `
		SELECT `+record.EventColumns+` FROM outbox
		WHERE sale_id = $1
		ORDER BY created_at, event_id
		LIMIT $2`, saleID, limit))(fn)
}

func (x statements) DeadEvents(ctx context.Context, limit int, fn record.Each) error {
	return each(x.q.Query(ctx, `
		SELECT `+record.EventColumns+` FROM outbox
		WHERE dead_at IS NOT NULL
		ORDER BY dead_at DESC, event_id
		LIMIT $1`, limit))(fn)
}

// OutboxStats reads one partial index for each figure, planned afresh
// each time (see growingTable).
func (x statements) OutboxStats(ctx context.Context, saleID string) record.Row {
	return x.q.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND ($1 = '' OR sale_id = $1)),
			(SELECT min(created_at) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND ($1 = '' OR sale_id = $1)),
			(SELECT count(*) FROM outbox
			 WHERE dead_at IS NOT NULL AND ($1 = '' OR sale_id = $1))`, growingTable, saleID)
}

func (x statements) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	return affected(x.q.Exec(ctx, `
		DELETE FROM outbox WHERE event_id IN (
			SELECT event_id FROM outbox
			WHERE published_at IS NOT NULL AND published_at < $1
			ORDER BY published_at
			LIMIT $2)`, before, limit))
}
