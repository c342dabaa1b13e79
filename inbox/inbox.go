// Package inbox is the consumer's half of the outbox: a durable record of
// the event ids a consumer has processed, kept in the same transaction as
// the consumer's own effects, so that at-least-once delivery has
// exactly-once effects.
//
// The relay (package outbox) delivers every event at least once: a relay
// that published and died before it marked the event published sends it
// again, and a broker may redeliver what was not acknowledged. Every
// delivery carries the event's id, fixed when the event was written. A
// consumer processes a delivery with Process: the id is inserted into the
// inbox and the effect applied in one transaction, and a delivery whose id
// is already there is skipped. Acknowledge the delivery to the broker only
// after Process returns: a crash in between redelivers it, and the inbox
// drops it.
//
// The inbox is an SQLite file of the consumer's own (modernc.org/sqlite, no
// cgo), with one writer connection.
//
// Overselling is neither prevented nor caused here: it is the consumer's
// half of the events.
package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// schema is the inbox's table: one row per processed event id.
const schema = `
CREATE TABLE IF NOT EXISTS processed_events (
    event_id     TEXT PRIMARY KEY,
    type         TEXT NOT NULL,
    processed_at INTEGER NOT NULL
) STRICT;
`

// Inbox is a consumer's record of processed events. Safe for concurrent
// use; its zero value is not usable, call Open.
type Inbox struct {
	db  *sql.DB
	now func() time.Time
}

// Open opens (creating if need be) the inbox in the SQLite file at path.
func Open(ctx context.Context, path string) (*Inbox, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("inbox: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("inbox: create %s: %w", path, err)
	}
	return &Inbox{db: db, now: time.Now}, nil
}

// Close closes the inbox.
func (in *Inbox) Close() error { return in.db.Close() }

// Exec runs a statement outside Process, for a consumer setting up the
// tables its effects write.
func (in *Inbox) Exec(ctx context.Context, query string, args ...any) error {
	_, err := in.db.ExecContext(ctx, query, args...)
	return err
}

// QueryRow runs a query outside Process, for a consumer reading its own
// tables.
func (in *Inbox) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return in.db.QueryRowContext(ctx, query, args...)
}

// Process records the event id and applies the effect in one transaction,
// unless the id was processed before; it reports whether it applied the
// effect. If apply fails, nothing is recorded and the error is returned, so
// the delivery must not be acknowledged; it will come again.
func (in *Inbox) Process(ctx context.Context, eventID, eventType string, apply func(tx *sql.Tx) error) (bool, error) {
	if eventID == "" {
		return false, errors.New("inbox: an event without an id cannot be deduplicated")
	}
	tx, err := in.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("inbox: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `
		INSERT INTO processed_events (event_id, type, processed_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (event_id) DO NOTHING`, eventID, eventType, in.now().UnixMicro())
	if err != nil {
		return false, fmt.Errorf("inbox: record %s: %w", eventID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		// Processed before: a redelivery. Nothing to do but acknowledge.
		return false, err
	}
	if apply != nil {
		if err := apply(tx); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("inbox: commit %s: %w", eventID, err)
	}
	return true, nil
}

// Processed reports whether the event id was processed.
func (in *Inbox) Processed(ctx context.Context, eventID string) (bool, error) {
	var n int
	err := in.db.QueryRowContext(ctx, `SELECT count(*) FROM processed_events WHERE event_id = ?1`, eventID).Scan(&n)
	return n == 1, err
}

// Count returns how many events were processed.
func (in *Inbox) Count(ctx context.Context) (int, error) {
	var n int
	err := in.db.QueryRowContext(ctx, `SELECT count(*) FROM processed_events`).Scan(&n)
	return n, err
}
