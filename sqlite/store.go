// Package sqlite is the record (flashsale.Store) in one SQLite file, through
// the pure-Go modernc.org/sqlite driver: the durable store of sales,
// reservations (holds) and orders for a single server, a demo or a test.
//
// The record's rules (what each state change means, when it is refused,
// which event it writes) are package record's; this package is its SQLite
// engine (a record.Driver): the connections, one method per statement with
// its SQL written out in full, and SQLite's error codes. The schema
// (migrations/00001_init.sql) is the PostgreSQL record's, with times as
// INTEGER microseconds since the Unix epoch (UTC), and is applied by Open.
//
// # Concurrency and durability
//
// SQLite allows one writer at a time. The store keeps one connection for
// writing, and every write is a BEGIN IMMEDIATE transaction on it, so
// writers queue for that connection (and, across processes, wait out
// busy_timeout for the file's write lock) instead of failing when a read
// transaction tries to become a write one. Reads go through a separate pool
// of read-only connections, which WAL mode lets run beside the writer.
// One writer is also what makes each statement's answer final: no other
// write interleaves between a conditional UPDATE and the read that
// explains its refusal, and two claims never take the same row.
//
// The file is in WAL mode with synchronous=NORMAL: a commit survives the
// process crashing, but a power loss or an operating-system crash may lose
// the last commits (never corrupt the file). A deployment that must keep
// every acknowledged hold through a power loss uses the PostgreSQL record.
//
// Overselling: as package record says, the record decides once which hold is
// over (package restock then gives back), and is not where stock is counted;
// the gate is (packages memory and redis).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DefaultReadConns bounds the pool of read connections: four readers
// beside the one writer.
const DefaultReadConns = 4

// busyTimeout is how long a connection waits for another process's lock on
// the file before giving up with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// mmapSize is how much of the database file each connection maps (256
// MiB): a sale's record fits many times over.
const mmapSize = 256 << 20

// Option configures Open.
type Option func(*config)

type config struct {
	// record is the record's own configuration.
	record record.Config
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

// Store is the record in an SQLite file: package record's rules over this
// package's statements. It is safe for concurrent use by multiple
// goroutines; its zero value is not usable, call Open.
type Store struct {
	*record.Store
	db *db
}

// db is the SQLite engine of the record (a record.Driver): the file's
// connections and its statements.
type db struct {
	// write is one connection; every write is a BEGIN IMMEDIATE
	// transaction on it (see tx).
	write *sql.DB
	// read is a pool of query_only connections.
	read *sql.DB
	// stmts holds the write transactions' prepared statements, by query.
	stmts    sync.Map
	prepared atomic.Int32

	// group guards the transactions queued for the next commit (see tx)
	// and whether one of their callers is committing.
	group   sync.Mutex
	queue   []*txJob
	leading bool
	grouped atomic.Int64 // transactions that shared a commit, for tests
	// groupMax is maxGroup; benchmarks set 1 to measure commits alone.
	groupMax int
}

var (
	_ flashsale.Store = (*Store)(nil)
	_ record.Driver   = (*db)(nil)
)

// Open opens the SQLite file at path, creating it and its parent directory
// if need be, applies the embedded migrations that are not yet applied, and
// returns the store. Opening a file another Store (in this or another
// process) has open is allowed; their writes take turns on the file's lock.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") || strings.Contains(path, ":memory:") {
		return nil, fmt.Errorf("sqlite: %q is not a plain file path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// Reads map the file instead of copying pages in with a system call
	// each: a write by the other connection empties a reader's page cache,
	// so during a sale every read would otherwise fetch its pages again.
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=mmap_size(%d)", busyTimeout.Milliseconds(), mmapSize)

	// _txlock=immediate makes every BeginTx a BEGIN IMMEDIATE.
	write, err := sql.Open("sqlite", path+"?"+busy+
		"&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := migrate(ctx, write); err != nil {
		write.Close()
		return nil, err
	}

	read, err := sql.Open("sqlite", path+"?"+busy+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	read.SetMaxOpenConns(DefaultReadConns)
	read.SetMaxIdleConns(DefaultReadConns)
	if err := read.PingContext(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	d := &db{write: write, read: read, groupMax: maxGroup}
	return &Store{Store: record.New(d, cfg.record), db: d}, nil
}

// migrate applies the embedded migrations on the writer.
func migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// Name is the prefix of the store's errors.
func (d *db) Name() string { return "sqlite" }

// Reads returns the statements on the read connections.
func (d *db) Reads() record.Statements { return statements{d.read} }

// Write runs fn in a write transaction: the one writer makes every write
// a transaction of its own anyway.
func (d *db) Write(ctx context.Context, fn func(record.Statements) error) error {
	return d.Tx(ctx, fn)
}

// Tx runs fn in a write transaction on the writer (see tx).
func (d *db) Tx(ctx context.Context, fn func(record.Statements) error) error {
	return d.tx(ctx, func(w *wtx) error { return fn(statements{w}) })
}

// Time reads an INTEGER of microseconds since the Unix epoch, or NULL.
func (d *db) Time(t *time.Time) any { return (*microTime)(t) }

// Classify returns err as it is: SQLite is a file in this process, with
// no connection to a server that could be lost.
func (d *db) Classify(err error) error { return err }

// Ping reports whether the file answers, to the writer and to a reader.
func (d *db) Ping(ctx context.Context) error {
	if err := d.write.PingContext(ctx); err != nil {
		return err
	}
	return d.read.PingContext(ctx)
}

// Close closes the store's connections; writes in progress finish first.
func (d *db) Close() error {
	d.stmts.Range(func(_, v any) bool {
		_ = v.(*sql.Stmt).Close()
		return true
	})
	return errors.Join(d.read.Close(), d.write.Close())
}

// tx runs fn in a BEGIN IMMEDIATE transaction on the writer and commits it
// if fn returns nil. fn must not use d.write (the one connection is fn's).
//
// Transactions are committed in groups: while one commits, the ones that
// arrive queue, and the next commit takes up to maxGroup of them in one
// transaction, each inside its own savepoint, so that a failed one is
// undone alone and the others commit together. A commit writes every page
// the transaction touched, and a sale's reservations touch the same few
// (the table's last leaf and its indexes'): a group writes them once for
// all. A transaction that finds none in flight commits at once, alone, as
// before; nothing waits for a group to fill.
//
// fn's result is final: every caller waits for its group's commit, and a
// transaction whose context ended before its turn does not run.
func (d *db) tx(ctx context.Context, fn func(*wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := &txJob{ctx: ctx, fn: fn, done: make(chan txResult, 1)}
	d.group.Lock()
	d.queue = append(d.queue, j)
	lead := !d.leading
	d.leading = true
	d.group.Unlock()
	for {
		if lead {
			d.lead()
		}
		r := <-j.done
		if !r.lead {
			return r.err
		}
		lead = true
	}
}

// maxGroup bounds the transactions of one commit.
const maxGroup = 64

// txJob is one transaction waiting for its group.
type txJob struct {
	ctx  context.Context
	fn   func(*wtx) error
	done chan txResult // buffered: one result, or the lead
}

// txResult is a transaction's outcome, or (lead) the turn to commit the
// next group, which holds this transaction.
type txResult struct {
	err  error
	lead bool
}

// lead commits the next group of the queue, then hands the lead to the
// first transaction still queued, so that no caller commits for others
// without end.
func (d *db) lead() {
	d.group.Lock()
	n := min(len(d.queue), d.groupMax)
	batch := d.queue[:n:n]
	d.queue = d.queue[n:]
	d.group.Unlock()

	errs := d.commitGroup(batch)

	d.group.Lock()
	if len(d.queue) == 0 {
		d.leading = false
		d.queue = nil
	} else {
		d.queue[0].done <- txResult{lead: true}
	}
	d.group.Unlock()
	for i, j := range batch {
		j.done <- txResult{err: errs[i]}
	}
}

// endSavepoint ends a grouped transaction's savepoint, undoing what it did
// first if it failed.
func (d *db) endSavepoint(tx *sql.Tx, undo bool) error {
	if undo {
		if _, err := tx.Exec("ROLLBACK TO grouped"); err != nil {
			return err
		}
	}
	_, err := tx.Exec("RELEASE grouped")
	return err
}

// commitGroup runs the group's transactions in one and commits it; it
// returns each one's error. A transaction alone runs without a savepoint.
func (d *db) commitGroup(batch []*txJob) []error {
	errs := make([]error, len(batch))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	// The group outlives any one caller: each fn's statements carry its
	// own context.
	tx, err := d.write.BeginTx(context.Background(), nil)
	if err != nil {
		return fail(err)
	}
	w := &wtx{Tx: tx, db: d}
	defer func() { d.prepare(w.missed) }()
	alone := len(batch) == 1
	for i, j := range batch {
		if err := j.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if alone {
			errs[i] = j.fn(w)
			continue
		}
		if _, err := tx.Exec("SAVEPOINT grouped"); err != nil {
			_ = tx.Rollback()
			return fail(err)
		}
		errs[i] = j.fn(w)
		if err := d.endSavepoint(tx, errs[i] != nil); err != nil {
			// The transaction itself failed (an I/O error, an
			// interrupt): nothing of the group stands.
			_ = tx.Rollback()
			return fail(err)
		}
		d.grouped.Add(1)
	}
	if alone && errs[0] != nil {
		_ = tx.Rollback()
		return errs
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return errs
}

// wtx is a write transaction whose statements are prepared once and
// reused: parsing the SQL of every statement of every transaction was a
// third of a confirm's time. A statement not prepared yet runs as is and
// is prepared after the transaction, when the one connection is free.
type wtx struct {
	*sql.Tx
	db     *db
	missed []string
}

// maxStatements bounds the statements kept prepared (the package's
// queries are a few dozen fixed texts).
const maxStatements = 256

func (t *wtx) stmt(ctx context.Context, query string) *sql.Stmt {
	if v, ok := t.db.stmts.Load(query); ok {
		return t.Tx.StmtContext(ctx, v.(*sql.Stmt))
	}
	t.missed = append(t.missed, query)
	return nil
}

func (t *wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

func (t *wtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// prepare prepares the statements a transaction ran unprepared, for the
// next ones. Best effort: a statement that fails to prepare runs as is.
func (d *db) prepare(queries []string) {
	for _, q := range queries {
		if _, ok := d.stmts.Load(q); ok || d.prepared.Load() >= maxStatements {
			continue
		}
		st, err := d.write.Prepare(q)
		if err != nil {
			continue
		}
		if _, loaded := d.stmts.LoadOrStore(q, st); loaded {
			_ = st.Close()
			continue
		}
		d.prepared.Add(1)
	}
}

// resultCode returns the extended SQLite result code of err, or 0.
func resultCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY
// constraint failure.
func isUniqueViolation(err error) bool {
	c := resultCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// querier is what both the read pool and a write transaction can do.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// statements are the record's statements (record.Statements) in SQLite's
// SQL, on the read pool or in a write transaction.
type statements struct{ q querier }

// each returns the function that calls fn for each of a query's rows,
// then closes them (a write transaction's next statement needs the
// connection back): each(q.QueryContext(…))(fn).
func each(rows *sql.Rows, err error) func(record.Each) error {
	return func(fn record.Each) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		return record.ForEach(rows, fn)
	}
}

// affected returns how many rows a statement changed.
func affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// micros is t as the schema stores it: microseconds since the Unix epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

// nullMicros is NULL for the zero time, which the domain's structs use for
// "not set".
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// microTime scans a time column: INTEGER microseconds since the Unix
// epoch, in UTC, or NULL as the zero time.
type microTime time.Time

// Scan implements sql.Scanner.
func (m *microTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*m = microTime{}
	case int64:
		*m = microTime(time.UnixMicro(v).UTC())
	default:
		return fmt.Errorf("sqlite: a time column holds %T, not INTEGER microseconds", src)
	}
	return nil
}
