package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/flashsale"
)

// The transactional outbox: events are written by the same transaction as
// the change they report (see insertEvents and its callers), and drained by
// relays (package outbox) through the work-queue statements below.

// outboxColumns is an outbox row in the order scanOutbox reads it.
const outboxColumns = `event_id, topic, sale_id, payload, created_at, attempts,
	next_attempt_at, claim_token, claimed_by, claimed_at, published_at,
	dead_at, last_error`

func scanOutbox(row pgx.Row) (*flashsale.OutboxEvent, error) {
	var (
		e                         flashsale.OutboxEvent
		topic, payload            string
		created, next             time.Time
		token, by                 *string
		claimed, published, death *time.Time
	)
	err := row.Scan(&e.ID, &topic, &e.SaleID, &payload, &created, &e.Attempts,
		&next, &token, &by, &claimed, &published,
		&death, &e.LastError)
	if err != nil {
		return nil, err
	}
	e.Type = flashsale.EventType(topic)
	e.Payload = []byte(payload)
	e.CreatedAt, e.OccurredAt = created.UTC(), created.UTC()
	e.NextAttemptAt = next.UTC()
	e.ClaimToken, e.ClaimedBy = textOf(token), textOf(by)
	e.ClaimedAt, e.PublishedAt, e.DeadAt = timeOf(claimed), timeOf(published), timeOf(death)
	return &e, nil
}

func collectOutbox(rows pgx.Rows) ([]*flashsale.OutboxEvent, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*flashsale.OutboxEvent, error) { return scanOutbox(row) })
}

// execer is what both the pool and a transaction can do to write.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

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

// insertEvents writes events through q (a transaction, so that they commit
// with the change they report) and reports how many were new.
func insertEvents(ctx context.Context, q execer, events ...flashsale.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	ids, topics, sales, payloads, ats := eventArrays(events)
	tag, err := q.Exec(ctx, insertEventsSQL, ids, topics, sales, payloads, ats)
	if err != nil {
		return 0, fmt.Errorf("write events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// AppendEvents writes the events whose ids the outbox lacks, in one
// statement, and reports how many it wrote.
func (s *Store) AppendEvents(ctx context.Context, events ...flashsale.Event) (int, error) {
	n, err := insertEvents(ctx, s.pool, events...)
	if err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	if n > 0 {
		s.eventsWritten()
	}
	return n, nil
}

// ClaimEvents claims a batch of due events with one UPDATE … RETURNING.
//
// The subquery picks the batch: pending, due (next_attempt_at is both the
// backoff and the claim timeout: a claim pushes it to Now+Lease, so the
// events of a relay that died become due again when its lease lapses), not
// past MaxAttempts, oldest due first, FOR UPDATE SKIP LOCKED so that
// concurrent relays step over each other's rows instead of queueing behind
// them. MATERIALIZED makes it run once, so the UPDATE can never take more
// than LIMIT rows (an inlined subquery may be re-evaluated). The UPDATE
// stamps the claim's fresh token and counts the attempt, before anything
// is tried.
//
// The UPDATE joins on the primary key alone. The rows are locked by the
// subquery, which re-checked the pending predicate on their latest
// version, so they cannot have moved; and repeating the predicate there
// lets the planner, misled by a young table's missing statistics, drive
// the join from the partial index instead (a nested loop over every
// pending row for each claimed one: seconds per claim at 20,000 pending).
func (s *Store) ClaimEvents(ctx context.Context, c flashsale.EventClaim) ([]*flashsale.OutboxEvent, error) {
	if c.Limit < 1 {
		return nil, nil
	}
	if c.Token == "" {
		return nil, errors.New("postgres: claim events: a claim token is required")
	}
	maxAttempts := c.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 1 << 30
	}
	rows, err := s.pool.Query(ctx, `
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
		RETURNING `+prefixed("o.", outboxColumns),
		c.Now, c.Limit, c.Token, c.Relay, c.Now.Add(c.Lease), maxAttempts)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim events: %w", err)
	}
	events, err := collectOutbox(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim events: %w", err)
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

// prefixed qualifies each column of a column list with p.
func prefixed(p, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// CompleteEvents marks published the events of ids that token still holds,
// in one UPDATE fenced by the token: a relay whose claim lapsed and was
// taken over changes nothing.
func (s *Store) CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error) {
	if len(ids) == 0 || token == "" {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE outbox SET published_at = $3, claim_token = NULL
		WHERE event_id = ANY($2) AND claim_token = $1`, growingTable, token, ids, at)
	if err != nil {
		return 0, fmt.Errorf("postgres: complete events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// RetryEvent releases the event, fenced by token, to be claimed again at
// retryAt.
func (s *Store) RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE outbox SET claim_token = NULL, next_attempt_at = $3, last_error = $4
		WHERE event_id = $2 AND claim_token = $1`, token, id, retryAt, cause)
	if err != nil {
		return false, fmt.Errorf("postgres: retry event %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// BuryEvent dead-letters the event, fenced by token.
func (s *Store) BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE outbox SET claim_token = NULL, dead_at = $3, last_error = $4
		WHERE event_id = $2 AND claim_token = $1`, token, id, at, cause)
	if err != nil {
		return false, fmt.Errorf("postgres: bury event %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// BuryAbandoned dead-letters the due events that used up their claims
// without an answer (their claims lapsed): ClaimEvents no longer takes
// them, so they would otherwise stay pending for ever.
func (s *Store) BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE outbox
		SET dead_at = $1, claim_token = NULL,
		    last_error = 'no answer after ' || attempts || ' claims'
		                 || CASE WHEN last_error = '' THEN '' ELSE '; last error: ' || last_error END
		WHERE published_at IS NULL AND dead_at IS NULL
		  AND next_attempt_at <= $1 AND attempts >= $2`, now, maxAttempts)
	if err != nil {
		return 0, fmt.Errorf("postgres: bury abandoned events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ReplayEvent makes a dead-lettered event pending again, due at at, with
// its attempts reset.
func (s *Store) ReplayEvent(ctx context.Context, id string, at time.Time) (*flashsale.OutboxEvent, error) {
	e, err := scanOutbox(s.pool.QueryRow(ctx, `
		UPDATE outbox SET dead_at = NULL, attempts = 0, next_attempt_at = $2, claim_token = NULL
		WHERE event_id = $1 AND dead_at IS NOT NULL
		RETURNING `+outboxColumns, id, at))
	if err == nil {
		s.eventsWritten()
		return e, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: replay event %s: %w", id, err)
	}
	cur, err := s.OutboxEvent(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, flashsale.Errorf(flashsale.CodeInvalidState, "Event %s is not dead-lettered (published: %t).", cur.ID, !cur.PublishedAt.IsZero())
}

// OutboxEvent returns the event with the id, or ErrNotFound.
func (s *Store) OutboxEvent(ctx context.Context, id string) (*flashsale.OutboxEvent, error) {
	e, err := scanOutbox(s.pool.QueryRow(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE event_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: event %s: %w", id, flashsale.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: event %s: %w", id, err)
	}
	return e, nil
}

// SaleEvents returns up to limit of the sale's events, oldest first.
func (s *Store) SaleEvents(ctx context.Context, saleID string, limit int) ([]*flashsale.OutboxEvent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+outboxColumns+` FROM outbox
		WHERE sale_id = $1
		ORDER BY created_at, event_id
		LIMIT $2`, saleID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: events of sale %s: %w", saleID, err)
	}
	events, err := collectOutbox(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: events of sale %s: %w", saleID, err)
	}
	return events, nil
}

// DeadEvents returns up to limit dead-lettered events, newest first.
func (s *Store) DeadEvents(ctx context.Context, limit int) ([]*flashsale.OutboxEvent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+outboxColumns+` FROM outbox
		WHERE dead_at IS NOT NULL
		ORDER BY dead_at DESC, event_id
		LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: dead events: %w", err)
	}
	events, err := collectOutbox(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: dead events: %w", err)
	}
	return events, nil
}

// OutboxStats counts pending and dead events, of the sale or of all for
// saleID "". Each figure reads one partial index (planned afresh each
// time: see growingTable).
func (s *Store) OutboxStats(ctx context.Context, saleID string) (flashsale.OutboxStats, error) {
	var (
		st     flashsale.OutboxStats
		oldest *time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND ($1 = '' OR sale_id = $1)),
			(SELECT min(created_at) FROM outbox
			 WHERE published_at IS NULL AND dead_at IS NULL AND ($1 = '' OR sale_id = $1)),
			(SELECT count(*) FROM outbox
			 WHERE dead_at IS NOT NULL AND ($1 = '' OR sale_id = $1))`, growingTable, saleID).
		Scan(&st.Pending, &oldest, &st.Dead)
	if err != nil {
		return st, fmt.Errorf("postgres: outbox stats: %w", err)
	}
	st.OldestPending = timeOf(oldest)
	return st, nil
}

// PurgePublished deletes up to limit events published before before,
// oldest first.
func (s *Store) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM outbox WHERE event_id IN (
			SELECT event_id FROM outbox
			WHERE published_at IS NOT NULL AND published_at < $1
			ORDER BY published_at
			LIMIT $2)`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: purge published events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
