// Package postgres is the record (flashsale.Store) in PostgreSQL: the durable
// store of sales, reservations (holds) and orders, through a bounded pgx
// connection pool.
//
// The record's rules (what each state change means, when it is refused,
// which event it writes) are package record's; this package is its
// PostgreSQL engine (a record.Driver): the pool, one method per statement,
// the SQLSTATE codes. Every statement is written for READ COMMITTED, where
// one that waits on a row lock re-checks its WHERE against the row as
// committed: that, FOR SHARE and FOR UPDATE on the sale row, and SKIP
// LOCKED in the claims, are what make each answer final with many servers
// writing at once. The schema (migrations/00001_init.sql) refuses
// impossible states with CHECK constraints and partial unique indexes, and
// is applied by Open.
//
// The SQL is written out in full in this package, so that what runs against
// the database can be read (and run in psql) as it is.
//
// Overselling: as package record says, the record decides once which hold is
// over (package restock then gives back), and is not where stock is counted;
// the gate is (packages memory and redis).
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
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
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
	// record is the record's own configuration.
	record record.Config
}

// WithMaxConns bounds the pool at n connections (n >= 1).
func WithMaxConns(n int32) Option {
	return func(c *config) { c.maxConns = n }
}

// WithClock sets the clock UpdateSale stamps updated_at with, the one write
// whose method takes no time (record.Config.Now). The default (and nil) is
// time.Now.
func WithClock(now func() time.Time) Option { return func(c *config) { c.record.Now = now } }

// WithEventsHook sets fn to be called after every commit that wrote events
// to the outbox (record.Config.OnEvents), so that a relay in this process
// can start on them at once rather than at its next poll (package outbox,
// Relay.Notify). fn must not block.
func WithEventsHook(fn func()) Option { return func(c *config) { c.record.OnEvents = fn } }

// Store is the record in PostgreSQL: package record's rules over this
// package's statements. It is safe for concurrent use by multiple
// goroutines; its zero value is not usable, call Open.
type Store struct {
	*record.Store
	db  *db
	cfg record.Config
	// url is what Open was given, for Sibling.
	url string
}

// db is the PostgreSQL engine of the record (a record.Driver): a pool and
// the statements.
type db struct {
	pool *pgxpool.Pool
}

var (
	_ flashsale.Store = (*Store)(nil)
	_ record.Driver   = (*db)(nil)
)

// newStore returns the record over pool.
func newStore(pool *pgxpool.Pool, url string, cfg record.Config) *Store {
	d := &db{pool: pool}
	return &Store{Store: record.New(d, cfg), db: d, cfg: cfg, url: url}
}

// Open connects to the database at url (a postgres:// URL or DSN; a
// search_path in it applies to every connection, and to the migrations),
// applies the embedded migrations that are not yet applied, and returns the
// store. Concurrent Opens of one schema migrate it once: they take turns on
// a session advisory lock named for the schema.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg := config{maxConns: DefaultMaxConns}
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
	return newStore(pool, url, cfg.record), nil
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
	return newStore(pool, s.url, s.cfg), nil
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
// sequential scans of the outbox (docs/benchmarks.md, issue 7). It costs a plan
// per call, which the statements that take it (per batch, per operator
// view, never per shopper) can afford; statements on a unique key keep
// their cached plans, which cannot go wrong that way.
const growingTable = pgx.QueryExecModeExec

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
func (s *Store) Pool() *pgxpool.Pool { return s.db.pool }

// Name is the prefix of the store's errors.
func (d *db) Name() string { return "postgres" }

// Reads returns the statements on the pool.
func (d *db) Reads() record.Statements { return statements{d.pool} }

// Write runs fn's statements on the pool, each committed on its own.
func (d *db) Write(_ context.Context, fn func(record.Statements) error) error {
	return fn(statements{d.pool})
}

// Tx runs fn in a READ COMMITTED transaction and commits it if fn returns
// nil.
func (d *db) Tx(ctx context.Context, fn func(record.Statements) error) error {
	return pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		return fn(statements{tx})
	})
}

// Time reads a timestamptz, or NULL.
func (d *db) Time(t *time.Time) any { return (*pgTime)(t) }

// Classify marks the errors of a database that did not answer (see
// unavailable).
func (d *db) Classify(err error) error { return unavailable(err) }

// Ping reports whether the database answers.
func (d *db) Ping(ctx context.Context) error { return d.pool.Ping(ctx) }

// Close closes every connection of the pool, waiting for those in use to be
// returned. It always returns nil.
func (d *db) Close() error {
	d.pool.Close()
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

// querier is what both the pool and a transaction can do.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// statements are the record's statements (record.Statements) in
// PostgreSQL's SQL, on the pool or in a transaction.
type statements struct{ q querier }

// each returns the function that calls fn for each of a query's rows,
// then closes them: each(q.Query(…))(fn).
func each(rows pgx.Rows, err error) func(record.Each) error {
	return func(fn record.Each) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		return record.ForEach(rows, fn)
	}
}

// affected returns how many rows a statement changed.
func affected(tag pgconn.CommandTag, err error) (int, error) {
	return int(tag.RowsAffected()), err
}

// pgTime scans a timestamptz, in UTC, or NULL as the zero time.
type pgTime time.Time

// ScanTimestamptz implements pgtype.TimestamptzScanner, which pgx scans
// timestamptz into without a detour through database/sql.
func (p *pgTime) ScanTimestamptz(v pgtype.Timestamptz) error {
	*p = pgTime{}
	if v.Valid {
		*p = pgTime(v.Time.UTC())
	}
	return nil
}

// nullTime is NULL for the zero time, which the domain's structs use for
// "not set".
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// duplicate is flashsale.ErrDuplicate, naming the constraint that said so.
func duplicate(pgErr *pgconn.PgError) error {
	return fmt.Errorf("%w (%s)", flashsale.ErrDuplicate, pgErr.ConstraintName)
}

// errRow is a row that is only an error: a statement that failed before
// its last query.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
