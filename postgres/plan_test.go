package postgres

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/record"
)

// The relay's statements keep to the outbox's indexes as the outbox grows
// during a sale, on a connection that ran them while it was nearly empty
// and with statistics that never caught up (as when autovacuum lags, or is
// off): a plan cached while the table was small must not become a
// sequential scan of thousands of rows for every batch completed.
//
// The plans are read as PostgreSQL runs them, from auto_explain, loaded
// into the store's one connection and reporting every plan to the client.
func TestOutboxPlansFollowItsGrowth(t *testing.T) {
	ctx := t.Context()
	url := testenv.Postgres(t)
	migrated, err := Open(ctx, url, WithMaxConns(1))
	if err != nil {
		t.Fatal(err)
	}
	migrated.Close()

	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns = 1
	rp := pcfg.ConnConfig.RuntimeParams
	rp["session_preload_libraries"] = "auto_explain"
	rp["auto_explain.log_min_duration"] = "0"
	rp["auto_explain.log_level"] = "notice"
	var (
		mu    sync.Mutex
		plans []string
	)
	pcfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(pool, url, record.Config{})
	t.Cleanup(func() { s.Close() })
	if err := pool.Ping(ctx); err != nil {
		testenv.Unavailable(t, "auto_explain in PostgreSQL", err)
	}
	insert := func(from, to int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `
			INSERT INTO outbox (event_id, topic, sale_id, payload, created_at, next_attempt_at, published_at)
			SELECT 'ev-' || i, 'reservation.created', 'sale-1', repeat('x', 200), now(), now(), now()
			FROM generate_series($1::int, $2::int) AS i`, from, to); err != nil {
			t.Fatal(err)
		}
	}
	exercise := func() {
		t.Helper()
		if _, err := s.CompleteEvents(ctx, "token", []string{"ev-1", "ev-2"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.OutboxStats(ctx, "sale-1"); err != nil {
			t.Fatal(err)
		}
	}
	// While the outbox is nearly empty, more times than PostgreSQL takes
	// to settle a prepared statement on its generic plan.
	insert(1, 3)
	for range 8 {
		exercise()
	}
	insert(4, 20_000)
	mu.Lock()
	plans = nil
	mu.Unlock()
	exercise()

	mu.Lock()
	defer mu.Unlock()
	if len(plans) == 0 {
		testenv.Unavailable(t, "auto_explain's plans as notices", nil)
	}
	for _, p := range plans {
		if strings.Contains(p, "Seq Scan on outbox") {
			t.Errorf("a relay statement scans the whole outbox of 20,000 events:\n%s", p)
		}
	}
}
