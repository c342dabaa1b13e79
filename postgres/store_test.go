package postgres

import (
	"context"
	"errors"
	"strings"

	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/storetest"
)

// testMaxConns keeps each test's pool small: the suite's subtests run in
// parallel, each with a store of its own, against one server.
const testMaxConns = 8

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), testenv.Postgres(t), WithMaxConns(testMaxConns))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) flashsale.Store { return openTest(t) },
		storetest.Faults{BreakOutbox: breakOutbox})
}

// breakOutbox installs a trigger that raises, inside its transaction, on
// every insert into the outbox of an event of type typ.
func breakOutbox(t *testing.T, st flashsale.Store, typ flashsale.EventType) {
	s := st.(*Store)
	name := "break_" + strings.NewReplacer(".", "_").Replace(string(typ))
	_, err := s.db.pool.Exec(t.Context(), `
		CREATE FUNCTION `+name+`() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE EXCEPTION 'injected fault: the outbox refuses %', NEW.topic;
		END $$;
		CREATE TRIGGER `+name+` BEFORE INSERT ON outbox
		FOR EACH ROW WHEN (NEW.topic = '`+string(typ)+`')
		EXECUTE FUNCTION `+name+`();`)
	if err != nil {
		t.Fatalf("install the fault: %v", err)
	}
}

func TestMigrationsAreIdempotent(t *testing.T) {
	ctx := t.Context()
	url := testenv.Postgres(t)
	// Concurrent Opens of one schema take turns on its migration lock.
	stores := make([]*Store, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, url, WithMaxConns(2)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	sale := &flashsale.Sale{
		ID: "sale_1", SKU: "sku-1", InitialStock: 1, OpensAt: time.Unix(100, 0), HoldSeconds: 60,
		PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1, State: flashsale.SaleOpen,
		CreatedAt: time.Unix(50, 0),
	}
	if err := stores[0].CreateSale(ctx, sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	again, err := Open(ctx, url, WithMaxConns(2))
	if err != nil {
		t.Fatalf("Open again: %v", err)
	}
	defer again.Close()
	if _, err := again.Sale(ctx, "sale_1"); err != nil {
		t.Errorf("Sale after reopening: %v", err)
	}
	var applied int
	if err := again.db.pool.QueryRow(ctx, `SELECT COUNT(*) FROM goose_db_version WHERE version_id = 1`).Scan(&applied); err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	if applied != 1 {
		t.Errorf("migration 1 recorded %d times, want 1", applied)
	}
}

// TestConstraintsRefuseImpossibleStates writes around the store, as a
// second program or an operator in psql might: the schema itself must
// refuse.
func TestConstraintsRefuseImpossibleStates(t *testing.T) {
	s := openTest(t)
	defer s.Close()
	ctx := t.Context()
	const (
		sale = `INSERT INTO sale_events (sale_id, sku, active_sku, initial_stock, opens_at, closes_at,
			hold_seconds, per_user_limit, fairness, registration_closes_at, state, paused_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $12, $5, $6, $7, $8, $9, $10, $11, $12, $12)`
		res = `INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state,
			payment_fingerprint, idempotency_key, epoch, created_at, expires_at, restocked_at, confirmed_at)
			VALUES ($1, 'sale_ok', $2, $3, $4, $5, $6, 1, $7, $8, $9, $10)`
		ord = `INSERT INTO orders (order_id, reservation_id, sale_id, user_id, quantity, state,
			created_at, updated_at, shipped_at)
			VALUES ($1, 'res_ok', 'sale_ok', 'u', $2, $3, $5, $5, $4)`
		move = `INSERT INTO order_events (order_id, from_state, to_state, actor, version, at, event_id)
			VALUES ('ord_ok', $1, $2, $3, $4, $5, 'evt')`
		event = `INSERT INTO outbox (event_id, topic, sale_id, payload, created_at, next_attempt_at,
			attempts, claim_token, claimed_at, published_at, dead_at)
			VALUES ($1, $2, 'sale_ok', $3, now(), now(), $4, $5, $6, $7, $8)`
	)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	var none *time.Time
	must := func(what, q string, args ...any) {
		t.Helper()
		if _, err := s.db.pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("a valid sale", sale, "sale_ok", "sku-ok", "sku-ok", 10, none, 60, 1, "fifo", none, "open", none, t0)
	must("a valid hold", res, "res_ok", "u", 1, "pending", nil, nil, t0, t1, none, none)
	must("a valid order", ord, "ord_ok", 1, "confirmed", none, t0)
	must("the hold of a cancelled order", res, "res_c", "uc", 1, "cancelled", nil, nil, t0, t1, t1, t1)
	must("a valid move", move, "confirmed", "shipped", "op", 2, t0)
	must("a valid event", event, "evt_ok", "t", "{}", 0, nil, none, none, none)

	const (
		check  = "23514"
		unique = "23505"
	)
	for _, c := range []struct {
		what       string
		q          string
		args       []any
		code       string
		constraint string
	}{
		{"negative initial stock", sale, []any{"s1", "sku-1", "sku-1", -1, none, 60, 1, "fifo", none, "open", none, t0}, check, "sale_events_initial_stock_check"},
		{"hold of 0 seconds", sale, []any{"s2", "sku-2", "sku-2", 1, none, 0, 1, "fifo", none, "open", none, t0}, check, "sale_events_hold_seconds_check"},
		{"hold of more than a day", sale, []any{"s2b", "sku-2b", "sku-2b", 1, none, 86401, 1, "fifo", none, "open", none, t0}, check, "sale_events_hold_seconds_check"},
		{"per-user limit 0", sale, []any{"s3", "sku-3", "sku-3", 1, none, 60, 0, "fifo", none, "open", none, t0}, check, "sale_events_per_user_limit_check"},
		{"unknown fairness", sale, []any{"s4", "sku-4", "sku-4", 1, none, 60, 1, "fastest", none, "open", none, t0}, check, "sale_events_fairness_check"},
		{"lottery without registration", sale, []any{"s5", "sku-5", "sku-5", 1, none, 60, 1, "lottery", none, "open", none, t0}, check, "sale_events_lottery_registers"},
		{"closes when it opens", sale, []any{"s6", "sku-6", "sku-6", 1, t0, 60, 1, "fifo", none, "open", none, t0}, check, "sale_events_closes_after_opens"},
		{"paused without paused_at", sale, []any{"s7", "sku-7", "sku-7", 1, none, 60, 1, "fifo", none, "paused", none, t0}, check, "sale_events_paused_iff_paused_at"},
		{"paused_at while open", sale, []any{"s8", "sku-8", "sku-8", 1, none, 60, 1, "fifo", none, "open", t1, t0}, check, "sale_events_paused_iff_paused_at"},
		{"closed yet active", sale, []any{"s9", "sku-9", "sku-9", 1, none, 60, 1, "fifo", none, "closed", none, t0}, check, "sale_events_closed_not_active"},
		{"active for another SKU", sale, []any{"s10", "sku-10", "sku-11", 1, none, 60, 1, "fifo", none, "open", none, t0}, check, "sale_events_active_sku_is_sku"},
		{"unknown sale state", sale, []any{"s11", "sku-12", "sku-12", 1, none, 60, 1, "fifo", none, "running", none, t0}, check, "sale_events_state_check"},
		{"two active sales of a SKU", sale, []any{"s12", "sku-ok", "sku-ok", 1, none, 60, 1, "fifo", none, "open", none, t0}, unique, "sale_events_active_sku_key"},

		{"quantity 0", res, []any{"r1", "u1", 0, "pending", nil, nil, t0, t1, none, none}, check, "reservations_quantity_check"},
		{"expired, never restocked", res, []any{"r2", "u2", 1, "expired", nil, nil, t0, t1, none, none}, check, "reservations_restocked_iff_over"},
		{"cancelled, never restocked", res, []any{"r3", "u3", 1, "cancelled", nil, nil, t0, t1, none, none}, check, "reservations_restocked_iff_over"},
		{"voided, never restocked", res, []any{"r4", "u4", 1, "voided", nil, nil, t0, t1, none, none}, check, "reservations_restocked_iff_over"},
		{"pending yet restocked", res, []any{"r5", "u5", 1, "pending", nil, nil, t0, t1, t1, none}, check, "reservations_restocked_iff_over"},
		{"confirmed without confirmed_at", res, []any{"r6", "u6", 1, "confirmed", nil, nil, t0, t1, none, none}, check, "reservations_confirmed_has_confirmed_at"},
		{"confirmed_at while pending", res, []any{"r7", "u7", 1, "pending", nil, nil, t0, t1, none, t1}, check, "reservations_confirmed_at_only_if_confirmed"},
		{"confirmed_at on an expired hold", res, []any{"r7b", "u7b", 1, "expired", nil, nil, t0, t1, t1, t1}, check, "reservations_confirmed_at_only_if_confirmed"},
		{"expires when created", res, []any{"r8", "u8", 1, "pending", nil, nil, t0, t0, none, none}, check, "reservations_expires_after_created"},
		{"empty instrument", res, []any{"r9", "u9", 1, "pending", "", nil, t0, t1, none, none}, check, "reservations_fingerprint_not_empty"},
		{"empty idempotency key", res, []any{"r10", "u10", 1, "pending", nil, "", t0, t1, none, none}, check, "reservations_idempotency_key_not_empty"},
		{"unknown hold state", res, []any{"r11", "u11", 1, "held", nil, nil, t0, t1, t1, none}, check, "reservations_state_check"},
		{"second live hold of a shopper", res, []any{"r12", "u", 1, "pending", nil, nil, t0, t1, none, none}, unique, "reservations_live_user_key"},

		{"order of quantity 0", ord, []any{"o1", 0, "confirmed", none, t0}, check, "orders_quantity_check"},
		{"shipped without shipped_at", ord, []any{"o2", 1, "shipped", none, t0}, check, "orders_shipped_has_shipped_at"},
		{"second order of a hold", ord, []any{"o3", 1, "confirmed", none, t0}, unique, "orders_reservation_id_key"},

		{"a move by nobody", move, []any{"confirmed", "shipped", "", 2, t0}, check, "order_events_actor_not_empty"},
		{"a move that stays", move, []any{"shipped", "shipped", "op", 2, t0}, check, "order_events_moves"},
		{"a move to nowhere", move, []any{"confirmed", "lost", "op", 2, t0}, check, "order_events_to_check"},
		{"a move at version 0", move, []any{"confirmed", "shipped", "op", 0, t0}, check, "order_events_version_check"},

		{"an event of no type", event, []any{"e1", "", "{}", 0, nil, none, none, none}, check, "outbox_topic_not_empty"},
		{"an empty event", event, []any{"e2", "t", "", 0, nil, none, none, none}, check, "outbox_payload_not_empty"},
		{"negative attempts", event, []any{"e3", "t", "{}", -1, nil, none, none, none}, check, "outbox_attempts_check"},
		{"published and dead", event, []any{"e4", "t", "{}", 1, nil, t0, t1, t1}, check, "outbox_published_or_dead"},
		{"published yet claimed", event, []any{"e5", "t", "{}", 1, "tok", t0, t1, none}, check, "outbox_finished_unclaimed"},
		{"dead yet claimed", event, []any{"e6", "t", "{}", 1, "tok", t0, none, t1}, check, "outbox_finished_unclaimed"},
		{"claimed, never", event, []any{"e7", "t", "{}", 1, "tok", none, none, none}, check, "outbox_claim_has_claimed_at"},
		{"one event id twice", event, []any{"evt_ok", "t", "{}", 0, nil, none, none, none}, unique, "outbox_pkey"},
	} {
		_, err := s.db.pool.Exec(ctx, c.q, c.args...)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != c.code || pgErr.ConstraintName != c.constraint {
			t.Errorf("%s: error %v, want SQLSTATE %s on %s", c.what, err, c.code, c.constraint)
		}
	}

	_, err := s.db.pool.Exec(ctx, `INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state, epoch, created_at, expires_at)
		VALUES ('r_orphan', 'sale_missing', 'u', 1, 'pending', 1, $1, $2)`, t0, t1)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Errorf("a hold of no sale: error %v, want a foreign key violation", err)
	}
}

func testSale(id string) *flashsale.Sale {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return &flashsale.Sale{
		ID: id, SKU: "sku-" + id, InitialStock: 1000, OpensAt: t0, HoldSeconds: 60,
		PerUserLimit: 1, Fairness: flashsale.FairnessFIFO, Shards: 1, State: flashsale.SaleOpen,
		CreatedAt: t0,
	}
}

func testHold(sale *flashsale.Sale, user string, expires time.Time) *flashsale.Reservation {
	return &flashsale.Reservation{
		ID: flashsale.NewID("res_"), SaleID: sale.ID, UserID: user, Quantity: 1, Epoch: sale.Epoch,
		CreatedAt: sale.CreatedAt, ExpiresAt: expires,
	}
}

// TestExpireDueNeverClaimsMoreThanLimit runs many sweepers at once, each
// call with a small limit, on a pool wide enough that they all run in the
// database at the same time.
func TestExpireDueNeverClaimsMoreThanLimit(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, testenv.Postgres(t), WithMaxConns(12))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	sale := testSale("sale_sweep")
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	const holds = 300
	// One INSERT for all the holds: the test is about claiming them.
	if _, err := s.db.pool.Exec(ctx, `
		INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state, epoch, created_at, expires_at)
		SELECT 'res_' || i, $1, 'u-' || i, 1, 'pending', 1, $2::timestamptz, $2::timestamptz + (i % 17) * interval '1 second' + interval '1 second'
		FROM generate_series(1, $3) AS i`, sale.ID, sale.CreatedAt, holds); err != nil {
		t.Fatalf("insert holds: %v", err)
	}
	now := sale.CreatedAt.Add(time.Hour)
	const workers, limit = 10, 3
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		calls int
		wg    sync.WaitGroup
		gate  = make(chan struct{})
	)
	for range workers {
		wg.Go(func() {
			<-gate
			for {
				due, err := s.ExpireDue(ctx, now, limit)
				if err != nil {
					t.Errorf("ExpireDue: %v", err)
					return
				}
				if len(due) > limit {
					t.Errorf("ExpireDue(limit %d) claimed %d holds", limit, len(due))
				}
				mu.Lock()
				calls++
				for _, r := range due {
					seen[r.ID]++
				}
				mu.Unlock()
				if len(due) == 0 {
					return
				}
			}
		})
	}
	close(gate)
	wg.Wait()
	if len(seen) != holds {
		t.Errorf("claimed %d distinct holds, want %d", len(seen), holds)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s claimed %d times", id, n)
		}
	}
	t.Logf("%d calls of ExpireDue by %d sweepers", calls, workers)
}

// TestBeginRebuildWaitsForInsertInFlight holds a CreateReservation's
// statement open in a transaction of its own and shows that BeginRebuild
// waits for it, then counts the hold.
func TestBeginRebuildWaitsForInsertInFlight(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	defer s.Close()
	sale := testSale("sale_rebuild")
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}

	// The insert in flight: CreateReservation's statement, not yet committed.
	inflight, err := s.db.pool.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	defer inflight.Rollback(context.Background())
	if _, err := inflight.Exec(ctx, `
		INSERT INTO reservations (reservation_id, sale_id, user_id, quantity, state, epoch, created_at, expires_at)
		SELECT 'res_inflight', sale_id, 'u-inflight', 1, 'pending', epoch, $2, $3
		FROM sale_events WHERE sale_id = $1 AND epoch = 1
		FOR SHARE`, sale.ID, sale.CreatedAt, sale.CreatedAt.Add(time.Minute)); err != nil {
		t.Fatalf("insert in flight: %v", err)
	}
	var inflightPID int
	if err := inflight.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&inflightPID); err != nil {
		t.Fatalf("pid: %v", err)
	}

	type result struct {
		epoch int64
		holds []flashsale.Hold
		err   error
	}
	done := make(chan result, 1)
	go func() {
		epoch, holds, err := s.BeginRebuild(ctx, sale.ID, sale.CreatedAt.Add(time.Minute))
		done <- result{epoch, holds, err}
	}()

	// Wait until the rebuild is blocked on the in-flight insert's lock.
	for blocked := false; !blocked; {
		select {
		case r := <-done:
			t.Fatalf("BeginRebuild returned while an insert was in flight: %+v", r)
		default:
		}
		if err := s.db.pool.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid)))`,
			inflightPID).Scan(&blocked); err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
	}
	if err := inflight.Commit(ctx); err != nil {
		t.Fatalf("commit the insert in flight: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("BeginRebuild: %v", r.err)
	}
	if r.epoch != 2 || len(r.holds) != 1 || r.holds[0].ReservationID != "res_inflight" {
		t.Errorf("BeginRebuild = epoch %d, holds %+v; want 2 and the hold that was in flight", r.epoch, r.holds)
	}
	late := testHold(sale, "u-late", sale.CreatedAt.Add(time.Minute))
	if err := s.CreateReservation(ctx, late); !errors.Is(err, flashsale.ErrStaleEpoch) {
		t.Errorf("CreateReservation at the old epoch after the rebuild: %v, want ErrStaleEpoch", err)
	}
}

// TestCreateReservationWaitsForRebuild is the other order: a rebuild in
// flight holds the sale row, and an insert under the old epoch waits for it
// and is then refused.
func TestCreateReservationWaitsForRebuild(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	defer s.Close()
	sale := testSale("sale_rebuild2")
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	rebuild, err := s.db.pool.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	defer rebuild.Rollback(context.Background())
	if _, err := rebuild.Exec(ctx, `SELECT epoch FROM sale_events WHERE sale_id = $1 FOR UPDATE`, sale.ID); err != nil {
		t.Fatalf("lock: %v", err)
	}
	if _, err := rebuild.Exec(ctx, `UPDATE sale_events SET epoch = epoch + 1 WHERE sale_id = $1`, sale.ID); err != nil {
		t.Fatalf("bump: %v", err)
	}
	var rebuildPID int
	if err := rebuild.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&rebuildPID); err != nil {
		t.Fatalf("pid: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.CreateReservation(ctx, testHold(sale, "u-1", sale.CreatedAt.Add(time.Minute))) }()
	for blocked := false; !blocked; {
		select {
		case err := <-done:
			t.Fatalf("CreateReservation returned while a rebuild was in flight: %v", err)
		default:
		}
		if err := s.db.pool.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid)))`,
			rebuildPID).Scan(&blocked); err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
	}
	if err := rebuild.Commit(ctx); err != nil {
		t.Fatalf("commit the rebuild: %v", err)
	}
	if err := <-done; !errors.Is(err, flashsale.ErrStaleEpoch) {
		t.Errorf("CreateReservation under the old epoch: %v, want ErrStaleEpoch", err)
	}
}

func TestOpenBadURL(t *testing.T) {
	if _, err := Open(t.Context(), "postgres://%zz"); err == nil {
		t.Errorf("Open of a malformed URL succeeded")
	}
	if _, err := Open(t.Context(), testenv.DatabaseURL(), WithMaxConns(0)); err == nil {
		t.Errorf("Open with MaxConns 0 succeeded")
	}
}

// TestExpireDueSkipsLockedHolds: a sweeper steps over a hold another
// transaction has locked (a confirm in flight, another sweeper's claim)
// rather than queueing behind it. The deadline only bounds a failure.
func TestExpireDueSkipsLockedHolds(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	defer s.Close()
	sale := testSale("sale_skip")
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	ends := sale.CreatedAt.Add(time.Minute)
	locked, free := testHold(sale, "u-locked", ends), testHold(sale, "u-free", ends.Add(time.Second))
	for _, r := range []*flashsale.Reservation{locked, free} {
		if err := s.CreateReservation(ctx, r); err != nil {
			t.Fatalf("CreateReservation: %v", err)
		}
	}
	tx, err := s.db.pool.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM reservations WHERE reservation_id = $1 FOR UPDATE`, locked.ID); err != nil {
		t.Fatalf("lock: %v", err)
	}

	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	due, err := s.ExpireDue(bounded, ends.Add(time.Hour), 10)
	if err != nil {
		t.Fatalf("ExpireDue beside a locked hold: %v", err)
	}
	if len(due) != 1 || due[0].ID != free.ID {
		t.Errorf("ExpireDue beside a locked hold = %d holds, want only %s", len(due), free.ID)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	due, err = s.ExpireDue(ctx, ends.Add(time.Hour), 10)
	if err != nil || len(due) != 1 || due[0].ID != locked.ID {
		t.Errorf("ExpireDue after the lock = %d holds, %v; want %s", len(due), err, locked.ID)
	}
}
