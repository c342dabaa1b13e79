package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/storetest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "record.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) flashsale.Store { return openTemp(t) },
		storetest.Faults{BreakOutbox: breakOutbox})
}

// breakOutbox installs a trigger that aborts, inside its transaction, every
// insert into the outbox of an event of type typ.
func breakOutbox(t *testing.T, st flashsale.Store, typ flashsale.EventType) {
	s := st.(*Store)
	name := "break_" + strings.NewReplacer(".", "_").Replace(string(typ))
	_, err := s.db.write.ExecContext(t.Context(), `
		CREATE TRIGGER `+name+` BEFORE INSERT ON outbox
		WHEN NEW.topic = '`+string(typ)+`'
		BEGIN SELECT RAISE(ABORT, 'injected fault: the outbox refuses `+string(typ)+`'); END`)
	if err != nil {
		t.Fatalf("install the fault: %v", err)
	}
}

func TestOpenCreatesDirectoryAndSetsPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "record.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open in a directory that does not exist: %v", err)
	}
	defer s.Close()
	for _, c := range []struct {
		db     *sql.DB
		pragma string
		want   string
	}{
		{s.db.write, "journal_mode", "wal"},
		{s.db.write, "foreign_keys", "1"},
		{s.db.write, "synchronous", "1"}, // NORMAL
		{s.db.write, "busy_timeout", "10000"},
		{s.db.read, "query_only", "1"},
		{s.db.read, "busy_timeout", "10000"},
	} {
		var got string
		if err := c.db.QueryRowContext(t.Context(), "PRAGMA "+c.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", c.pragma, err)
		}
		if got != c.want {
			t.Errorf("PRAGMA %s = %s, want %s", c.pragma, got, c.want)
		}
	}
}

func TestOpenRefusesNonPaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if s, err := Open(t.Context(), p); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

func TestMigrationsAreIdempotent(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "record.db")
	first, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	sale := &flashsale.Sale{
		ID: "sale_1", SKU: "sku-1", InitialStock: 1, OpensAt: time.Unix(100, 0), HoldSeconds: 60,
		PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1, State: flashsale.SaleOpen,
		CreatedAt: time.Unix(50, 0),
	}
	if err := first.CreateSale(ctx, sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	// A second store on the same file while the first is open, then again
	// after both are closed: the schema is migrated once, the data stays.
	second, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	if _, err := second.Sale(ctx, "sale_1"); err != nil {
		t.Errorf("Sale through the second store: %v", err)
	}
	second.Close()
	first.Close()
	third, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("third Open: %v", err)
	}
	defer third.Close()
	if _, err := third.Sale(ctx, "sale_1"); err != nil {
		t.Errorf("Sale after reopening: %v", err)
	}
	var applied int
	if err := third.db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM goose_db_version WHERE version_id = 1`).Scan(&applied); err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	if applied != 1 {
		t.Errorf("migration 1 recorded %d times, want 1", applied)
	}
}

// TestConstraintsRefuseImpossibleStates writes around the store, as a
// second program or an operator might: the schema itself must refuse.
func TestConstraintsRefuseImpossibleStates(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	const sale = `INSERT INTO sale_events (sale_id, sku, active_sku, initial_stock, opens_at, closes_at,
		hold_seconds, per_user_limit, fairness, registration_closes_at, state, paused_at, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, 1000, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 0, 0)`
	const res = `INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state,
		payment_fingerprint, idempotency_key, epoch, created_at, expires_at, restocked_at, confirmed_at)
		VALUES (?1, 'sale_ok', ?2, ?3, ?4, ?5, ?6, 1, ?7, ?8, ?9, ?10)`
	const ord = `INSERT INTO orders (order_id, reservation_id, sale_id, user_id, quantity, state,
		created_at, updated_at, shipped_at)
		VALUES (?1, 'res_ok', 'sale_ok', 'u', ?2, ?3, 0, 0, ?4)`
	const move = `INSERT INTO order_events (order_id, from_state, to_state, actor, version, at, event_id)
		VALUES ('ord_ok', ?1, ?2, ?3, ?4, 0, 'evt')`
	const event = `INSERT INTO outbox (event_id, topic, sale_id, payload, created_at, next_attempt_at,
		attempts, claim_token, claimed_at, published_at, dead_at)
		VALUES (?1, ?2, 'sale_ok', ?3, 0, 0, ?4, ?5, ?6, ?7, ?8)`
	exec := func(q string, args ...any) error {
		return s.db.tx(ctx, func(tx *wtx) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		})
	}
	must := func(what, q string, args ...any) {
		t.Helper()
		if err := exec(q, args...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("a valid sale", sale, "sale_ok", "sku-ok", "sku-ok", 10, nil, 60, 1, "fifo", nil, "open", nil)
	must("a valid hold", res, "res_ok", "u", 1, "pending", nil, nil, 0, 10, nil, nil)
	must("a valid order", ord, "ord_ok", 1, "confirmed", nil)
	must("the hold of a cancelled order", res, "res_c", "uc", 1, "cancelled", nil, nil, 0, 10, 5, 5)
	must("a valid move", move, "confirmed", "shipped", "op", 2)
	must("a valid event", event, "evt_ok", "t", "{}", 0, nil, nil, nil, nil)

	for _, c := range []struct {
		what string
		q    string
		args []any
		code int
	}{
		{"negative initial stock", sale, []any{"s1", "sku-1", "sku-1", -1, nil, 60, 1, "fifo", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"hold of 0 seconds", sale, []any{"s2", "sku-2", "sku-2", 1, nil, 0, 1, "fifo", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"per-user limit 0", sale, []any{"s3", "sku-3", "sku-3", 1, nil, 60, 0, "fifo", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"unknown fairness", sale, []any{"s4", "sku-4", "sku-4", 1, nil, 60, 1, "fastest", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"lottery without registration", sale, []any{"s5", "sku-5", "sku-5", 1, nil, 60, 1, "lottery", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"closes before it opens", sale, []any{"s6", "sku-6", "sku-6", 1, 1000, 60, 1, "fifo", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"paused without paused_at", sale, []any{"s7", "sku-7", "sku-7", 1, nil, 60, 1, "fifo", nil, "paused", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"paused_at while open", sale, []any{"s8", "sku-8", "sku-8", 1, nil, 60, 1, "fifo", nil, "open", 5}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"closed yet active", sale, []any{"s9", "sku-9", "sku-9", 1, nil, 60, 1, "fifo", nil, "closed", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"active for another SKU", sale, []any{"s10", "sku-10", "sku-11", 1, nil, 60, 1, "fifo", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"unknown sale state", sale, []any{"s11", "sku-12", "sku-12", 1, nil, 60, 1, "fifo", nil, "running", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"two active sales of a SKU", sale, []any{"s12", "sku-ok", "sku-ok", 1, nil, 60, 1, "fifo", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_UNIQUE},
		{"stock as text", sale, []any{"s13", "sku-13", "sku-13", "many", nil, 60, 1, "fifo", nil, "open", nil}, sqlite3.SQLITE_CONSTRAINT_DATATYPE},

		{"quantity 0", res, []any{"r1", "u1", 0, "pending", nil, nil, 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"expired, never restocked", res, []any{"r2", "u2", 1, "expired", nil, nil, 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"cancelled, never restocked", res, []any{"r3", "u3", 1, "cancelled", nil, nil, 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"voided, never restocked", res, []any{"r4", "u4", 1, "voided", nil, nil, 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"pending yet restocked", res, []any{"r5", "u5", 1, "pending", nil, nil, 0, 10, 5, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"confirmed without confirmed_at", res, []any{"r6", "u6", 1, "confirmed", nil, nil, 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"confirmed_at while pending", res, []any{"r7", "u7", 1, "pending", nil, nil, 0, 10, nil, 5}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"expires when created", res, []any{"r8", "u8", 1, "pending", nil, nil, 10, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"empty instrument", res, []any{"r9", "u9", 1, "pending", "", nil, 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"empty idempotency key", res, []any{"r10", "u10", 1, "pending", nil, "", 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"unknown hold state", res, []any{"r11", "u11", 1, "held", nil, nil, 0, 10, 5, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"second live hold of a shopper", res, []any{"r12", "u", 1, "pending", nil, nil, 0, 10, nil, nil}, sqlite3.SQLITE_CONSTRAINT_UNIQUE},

		{"order of quantity 0", ord, []any{"o1", 0, "confirmed", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"shipped without shipped_at", ord, []any{"o2", 1, "shipped", nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"second order of a hold", ord, []any{"o3", 1, "confirmed", nil}, sqlite3.SQLITE_CONSTRAINT_UNIQUE},
		{"confirmed_at on an expired hold", res, []any{"r13", "u13", 1, "expired", nil, nil, 0, 10, 5, 5}, sqlite3.SQLITE_CONSTRAINT_CHECK},

		{"a move by nobody", move, []any{"confirmed", "shipped", "", 2}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"a move that stays", move, []any{"shipped", "shipped", "op", 2}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"a move to nowhere", move, []any{"confirmed", "lost", "op", 2}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"a move of no order", `INSERT INTO order_events (order_id, to_state, actor, version, at, event_id)
			VALUES ('ord_missing', 'shipped', 'op', 1, 0, 'e')`, nil, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY},

		{"an event of no type", event, []any{"e1", "", "{}", 0, nil, nil, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"an empty event", event, []any{"e2", "t", "", 0, nil, nil, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"negative attempts", event, []any{"e3", "t", "{}", -1, nil, nil, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"published and dead", event, []any{"e4", "t", "{}", 1, nil, 1, 2, 2}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"published yet claimed", event, []any{"e5", "t", "{}", 1, "tok", 1, 2, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"claimed, never", event, []any{"e7", "t", "{}", 1, "tok", nil, nil, nil}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"one event id twice", event, []any{"evt_ok", "t", "{}", 0, nil, nil, nil, nil}, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY},
	} {
		err := exec(c.q, c.args...)
		if got := resultCode(err); got != c.code {
			t.Errorf("%s: error %v (code %d), want code %d", c.what, err, got, c.code)
		}
	}

	// A hold of a sale that does not exist.
	err := exec(`INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state, epoch, created_at, expires_at)
		VALUES ('r_orphan', 'sale_missing', 'u', 1, 'pending', 1, 0, 10)`)
	if got := resultCode(err); got != sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		t.Errorf("a hold of no sale: error %v (code %d), want SQLITE_CONSTRAINT_FOREIGNKEY", err, got)
	}
}

func TestReadersDoNotWrite(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	_, err := s.db.read.ExecContext(context.Background(), `DELETE FROM sale_events`)
	if err == nil {
		t.Errorf("a read connection wrote")
	}
}

// TestMigrationRebuildKeepsTheRecord: migration 2 rebuilds the reservations
// table (SQLite cannot alter a CHECK constraint). A record written under
// migration 1 keeps every hold, its order still points at it, the new
// constraint lets an order's hold be cancelled, and foreign keys are on
// again afterwards.
func TestMigrationRebuildKeepsTheRecord(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "record.db")
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatalf("migrate to 1: %v", err)
	}
	for _, q := range []string{
		`INSERT INTO sale_events (sale_id, sku, active_sku, initial_stock, opens_at, hold_seconds, per_user_limit,
			fairness, state, created_at, updated_at) VALUES ('sale_1', 'sku-1', 'sku-1', 10, 0, 60, 1, 'fifo', 'open', 0, 0)`,
		`INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state, idempotency_key, epoch,
			created_at, expires_at, confirmed_at) VALUES ('res_1', 'sale_1', 'u-1', 2, 'confirmed', 'k1', 1, 0, 100, 50)`,
		`INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state, idempotency_key, epoch,
			created_at, expires_at) VALUES ('res_2', 'sale_1', 'u-2', 1, 'pending', 'k2', 1, 0, 100)`,
		`INSERT INTO orders (order_id, reservation_id, sale_id, user_id, quantity, state, created_at, updated_at)
			VALUES ('ord_1', 'res_1', 'sale_1', 'u-1', 2, 'confirmed', 50, 50)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open (migrating to the latest): %v", err)
	}
	defer s.Close()
	var fk int
	if err := s.db.write.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Errorf("PRAGMA foreign_keys after the migration = %d, %v; want 1", fk, err)
	}
	if r, err := s.Reservation(ctx, "res_1"); err != nil || r.State != flashsale.ReservationConfirmed || r.OrderID != "ord_1" ||
		r.Quantity != 2 || r.IdempotencyKey != "k1" {
		t.Errorf("res_1 after the migration = %+v, %v", r, err)
	}
	if r, err := s.ReservationByKey(ctx, "sale_1", "u-2", "k2"); err != nil || r.ID != "res_2" {
		t.Errorf("res_2 by its key after the migration = %+v, %v", r, err)
	}
	// The partial unique index came back with the table.
	dup := &flashsale.Reservation{ID: "res_3", SaleID: "sale_1", UserID: "u-2", Quantity: 1, Epoch: 1,
		CreatedAt: time.UnixMicro(0), ExpiresAt: time.UnixMicro(100)}
	if err := s.CreateReservation(ctx, dup); !errors.Is(err, flashsale.ErrDuplicate) {
		t.Errorf("a second live hold after the migration: %v, want ErrDuplicate", err)
	}
	o, restocked, err := s.ChangeOrder(ctx, flashsale.OrderChange{OrderID: "ord_1", Version: 1, To: flashsale.OrderCancelled,
		Actor: "operator", At: time.UnixMicro(200)})
	if err != nil || !restocked || o.State != flashsale.OrderCancelled {
		t.Fatalf("cancel an order written before the migration = %+v, %v, %v", o, restocked, err)
	}
	var violations int
	if err := s.db.read.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&violations); err != nil || violations != 0 {
		t.Errorf("foreign key violations after the migration: %d, %v", violations, err)
	}
}

// A write transaction's statements are prepared after their first run and
// reused by the next transactions, with the same results.
func TestStatementsPreparedOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "stmts.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const q = `SELECT COUNT(*) FROM reservations WHERE sale_id = ?1`
	count := func() (n int, missed int) {
		t.Helper()
		err := s.db.tx(ctx, func(tx *wtx) error {
			err := tx.QueryRowContext(ctx, q, "sale_x").Scan(&n)
			missed = len(tx.missed)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, missed
	}
	if n, missed := count(); n != 0 || missed != 1 {
		t.Fatalf("first run: %d rows, %d statements unprepared; want 0 and 1", n, missed)
	}
	if _, ok := s.db.stmts.Load(q); !ok {
		t.Fatal("the statement was not prepared after its first transaction")
	}
	if n, missed := count(); n != 0 || missed != 0 {
		t.Fatalf("second run: %d rows, %d statements unprepared; want 0 and 0", n, missed)
	}
}

// TestGroupCommit: transactions that queue behind a commit share the next
// one, and one that fails (a second live hold of a shopper) is undone
// alone while the rest of its group commits.
func TestGroupCommit(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	defer s.Close()
	t0 := time.Date(2030, 3, 1, 10, 0, 0, 0, time.UTC)
	sale := &flashsale.Sale{ID: "sale_group", SKU: "group", Name: "Group", InitialStock: 100, OpensAt: t0,
		HoldSeconds: 600, PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1, State: flashsale.SaleOpen,
		Epoch: 1, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatal(err)
	}
	hold := func(id, user string) *flashsale.Reservation {
		return &flashsale.Reservation{ID: id, SaleID: sale.ID, UserID: user, Quantity: 1, Epoch: 1,
			CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute)}
	}

	// A transaction holds the writer while the others queue behind it.
	started, release := make(chan struct{}), make(chan struct{})
	blocker := make(chan error, 1)
	go func() {
		blocker <- s.db.tx(ctx, func(*wtx) error { close(started); <-release; return nil })
	}()
	<-started
	const n = 20
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", i)
			if i == n {
				user = "u0" // a second live hold of u0: refused
			}
			errs[i] = s.CreateReservation(ctx, hold(fmt.Sprintf("res_%d", i), user))
		}()
	}
	// And one that writes, then fails: its write must not stand.
	wg.Add(1)
	var failedAfterWriting error
	go func() {
		defer wg.Done()
		failedAfterWriting = s.db.tx(ctx, func(w *wtx) error {
			if _, err := w.ExecContext(ctx, `UPDATE sale_events SET name = 'renamed' WHERE sale_id = ?1`, sale.ID); err != nil {
				return err
			}
			return errors.New("fails after writing")
		})
	}()
	for queued := 0; queued < n+2; {
		s.db.group.Lock()
		queued = len(s.db.queue)
		s.db.group.Unlock()
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}

	if failedAfterWriting == nil || failedAfterWriting.Error() != "fails after writing" {
		t.Fatalf("the failing transaction: %v", failedAfterWriting)
	}
	if got, err := s.Sale(ctx, sale.ID); err != nil || got.Name != "Group" {
		t.Fatalf("a failed transaction's write stood in its group: %v", err)
	}
	refused := 0
	for i, err := range errs {
		switch {
		case errors.Is(err, flashsale.ErrDuplicate):
			refused++
		case err != nil:
			t.Errorf("hold %d: %v", i, err)
		}
	}
	if refused != 1 {
		t.Fatalf("%d holds refused, want exactly one of u0's two", refused)
	}
	if got := s.db.grouped.Load(); got < 2 {
		t.Fatalf("%d transactions shared a commit, want the queued ones grouped", got)
	}
	totals, err := s.SaleTotals(ctx, sale.ID)
	if err != nil || totals.Pending != n {
		t.Fatalf("pending %d, %v; want %d committed", totals.Pending, err, n)
	}
}

// TestGroupCommitSkipsEndedContexts: a transaction whose caller gave up
// while it queued does not run, and its group commits without it.
func TestGroupCommitSkipsEndedContexts(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	started, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.db.tx(t.Context(), func(*wtx) error { close(started); <-release; return nil })
	}()
	<-started
	gone, cancel := context.WithCancel(t.Context())
	ran := make(chan bool, 2)
	done := make(chan error, 2)
	go func() { done <- s.db.tx(gone, func(*wtx) error { ran <- true; return nil }) }()
	go func() { done <- s.db.tx(t.Context(), func(*wtx) error { ran <- false; return nil }) }()
	for queued := 0; queued < 2; {
		s.db.group.Lock()
		queued = len(s.db.queue)
		s.db.group.Unlock()
		runtime.Gosched()
	}
	cancel()
	close(release)
	var failed int
	for range 2 {
		if err := <-done; errors.Is(err, context.Canceled) {
			failed++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if failed != 1 || len(ran) != 1 || <-ran {
		t.Fatalf("%d failed; the ended transaction ran or the other did not", failed)
	}
}
