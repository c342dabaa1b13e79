// Package postgres is the record (flashsale.Store) in PostgreSQL: the durable
// store of sales, reservations (holds) and orders, through a bounded pgx
// connection pool.
//
// The gate decides who wins; this package records the winners. Every state
// change of a hold is one conditional UPDATE whose rows-affected count is the
// answer, so that a hold's units go back to stock exactly once however many
// sweepers, retries and cancellations race for it. The schema
// (migrations/00001_init.sql) refuses impossible states with CHECK
// constraints and partial unique indexes, and is applied by Open.
//
// The SQL is written out in full in this package, so that what runs against
// the database can be read (and run in psql) as it is.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/flashsale/flashsale"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DefaultMaxConns bounds the connection pool unless WithMaxConns says
// otherwise. The record sees only the gate's winners, so a small pool
// suffices, and a bound keeps the sale from taking the connections the rest
// of the store needs.
const DefaultMaxConns = 16

// Option configures Open.
type Option func(*config)

type config struct {
	maxConns int32
	now      func() time.Time
	onEvents func()
}

// WithMaxConns bounds the pool at n connections (n >= 1).
func WithMaxConns(n int32) Option {
	return func(c *config) { c.maxConns = n }
}

// WithClock sets the clock UpdateSale stamps updated_at with, the one write
// whose method takes no time. The default (and nil) is time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithEventsHook sets fn to be called after every commit that wrote events
// to the outbox, so that a relay in this process can start on them at once
// rather than at its next poll (package outbox, Relay.Notify). fn must not
// block.
func WithEventsHook(fn func()) Option {
	return func(c *config) { c.onEvents = fn }
}

// Store is the record in PostgreSQL. It is safe for concurrent use by
// multiple goroutines; its zero value is not usable, call Open.
type Store struct {
	pool     *pgxpool.Pool
	now      func() time.Time
	onEvents func()
	// url is what Open was given, for Sibling.
	url string
}

var _ flashsale.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or DSN; a
// search_path in it applies to every connection, and to the migrations),
// applies the embedded migrations that are not yet applied, and returns the
// store. Concurrent Opens of one schema migrate it once: they take turns on
// a session advisory lock named for the schema.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg := config{maxConns: DefaultMaxConns, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxConns < 1 {
		return nil, fmt.Errorf("postgres: max conns must be at least 1, not %d", cfg.maxConns)
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	pcfg.MaxConns = cfg.maxConns
	if err := migrate(ctx, pcfg.ConnConfig); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	return &Store{pool: pool, now: cfg.now, onEvents: cfg.onEvents, url: url}, nil
}

// Sibling returns a Store on the same database with a pool of its own of at
// most maxConns connections, for a background service (the outbox relay)
// that must never take the connections the purchase path needs: the two
// pools are separate budgets. It does not migrate again. Close it apart
// from s.
func (s *Store) Sibling(ctx context.Context, maxConns int32) (*Store, error) {
	if maxConns < 1 {
		return nil, fmt.Errorf("postgres: max conns must be at least 1, not %d", maxConns)
	}
	pcfg, err := pgxpool.ParseConfig(s.url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	pcfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	return &Store{pool: pool, now: s.now, onEvents: s.onEvents, url: s.url}, nil
}

// growingTable, passed as a query's first argument, has PostgreSQL plan
// the query for its arguments every time it runs, on an unnamed statement,
// rather than from the plan pgx's statement cache keeps per connection.
// PostgreSQL settles a prepared statement on a generic plan after five
// runs, and keeps it until the table's statistics change: a plan made
// while a sale's outbox held a few rows scans the whole table for every
// batch a relay completes once it holds thousands, and statistics do not
// change during a sale when autovacuum lags (or is off). Measured on the
// rehearsal against a server: the relay's connection spent half a core on
// sequential scans of the outbox (BENCHMARKS.md, issue 7). It costs a plan
// per call, which the statements that take it (per batch, per operator
// view, never per shopper) can afford; statements on a unique key keep
// their cached plans, which cannot go wrong that way.
const growingTable = pgx.QueryExecModeExec

// eventsWritten tells the events hook that a commit wrote events.
func (s *Store) eventsWritten() {
	if s.onEvents != nil {
		s.onEvents()
	}
}

// migrate applies the embedded migrations through a database/sql handle on
// the same connection settings, so goose's version table lives in the same
// schema as the tables.
func migrate(ctx context.Context, cc *pgx.ConnConfig) error {
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	db.SetMaxOpenConns(2)

	var schema string
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&schema); err != nil {
		return fmt.Errorf("postgres: connect for migrations: %w", err)
	}
	// Advisory locks are database-wide; naming the lock for the schema lets
	// separate schemas (tenants, tests) migrate side by side.
	h := fnv.New64a()
	h.Write([]byte("flashsale migrations " + schema))
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64()&(1<<63-1))),
		lock.WithLockTimeout(1, 300),
	)
	if err != nil {
		return fmt.Errorf("postgres: migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrationFS(),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// migrationFS is the migrations directory as goose reads it.
func migrationFS() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // cannot happen: the directory is embedded at build time
	}
	return sub
}

// Pool returns the store's connection pool, for benchmarks and operator
// tools that measure beside the store. Writing through it bypasses the
// store's rules but not the schema's constraints.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer func() { err = unavailable(err) }()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Close closes every connection of the pool, waiting for those in use to be
// returned. It always returns nil.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// SQLSTATE codes this package classifies. A conflict is decided from row
// counts wherever a row count can say it; these codes are for the
// constraints that answer in the database's stead.
const (
	codeUniqueViolation = "23505"
)

// uniqueViolation returns the *pgconn.PgError if err is a unique violation.
func uniqueViolation(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation {
		return pgErr, true
	}
	return nil, false
}

// tx runs fn in a READ COMMITTED transaction and commits it if fn returns
// nil. Every method here is written for READ COMMITTED: a statement that
// waits on a row lock re-checks its WHERE against the row as committed.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
}

// nullTime is NULL for the zero time, which this package's structs use for
// "not set".
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// nullText is NULL for "", so that partial unique indexes ignore it.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// timeOf returns the instant of a nullable column in UTC, or the zero time
// for NULL.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// textOf returns a nullable text column, "" for NULL.
func textOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
