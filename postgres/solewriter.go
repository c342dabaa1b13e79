package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrNotSoleWriter is ClaimSoleWriter's answer when another process holds
// the claim on the same database and schema.
var ErrNotSoleWriter = errors.New("postgres: another process holds the sole writer's claim on this database")

// ClaimSoleWriter claims, for as long as the returned release is not
// called (or the process lives), the right to be the only process that
// writes what name names on this database and schema (the schema of the
// connection's search_path). It is a PostgreSQL session advisory lock
// held on a connection of its own: a process that dies gives it up with
// its connection, so a crash never leaves a claim behind.
//
// The engine claims "in-process gate" when it keeps the stock gate in its
// own memory over a shared record: a second such server would keep a
// second counter of the same stock and oversell, and is refused instead.
// Errors: ErrNotSoleWriter, or the connection's error.
func (s *Store) ClaimSoleWriter(ctx context.Context, name string) (release func() error, err error) {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	var got bool
	err = conn.QueryRow(ctx, `
		SELECT pg_try_advisory_lock(hashtextextended('flashsale sole writer: ' || $1 || ' in ' || current_schema(), 0))`,
		name).Scan(&got)
	if err == nil && !got {
		err = ErrNotSoleWriter
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return func() error { return conn.Close(context.Background()) }, nil
}
