package engine

// The record: SQLite or PostgreSQL, its pools, and how they are named in errors.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/sqlite"
)

func (e *Engine) openStore(ctx context.Context) error {
	cfg := e.Config
	if cfg.DatabaseURL != "" {
		if !strings.HasPrefix(cfg.DatabaseURL, "postgres://") && !strings.HasPrefix(cfg.DatabaseURL, "postgresql://") {
			return errors.New("--database-url must be a postgres:// URL")
		}
		opts := []postgres.Option{postgres.WithClock(cfg.Now), postgres.WithEventsHook(e.eventsWritten)}
		if cfg.DatabaseMaxConns > 0 {
			opts = append(opts, postgres.WithMaxConns(cfg.DatabaseMaxConns))
		}
		st, err := postgres.Open(ctx, withConnectTimeout(cfg.DatabaseURL), opts...)
		if err != nil {
			return fmt.Errorf("--database-url: PostgreSQL at %s: %w", hostOf(cfg.DatabaseURL), err)
		}
		e.Store = st
		e.closers = append(e.closers, st.Close)
		if cfg.RedisURL == "" {
			// The in-process gate is this process's own counter of the
			// stock: a second server keeping one over the same record
			// would sell the stock twice. Refuse it rather than oversell.
			release, err := st.ClaimSoleWriter(ctx, "in-process gate")
			if errors.Is(err, postgres.ErrNotSoleWriter) {
				return errors.New("--redis-url: another server keeps its stock gate in process over this PostgreSQL; servers that share a record must share the gate in Redis (give each --redis-url)")
			}
			if err != nil {
				return fmt.Errorf("--database-url: PostgreSQL at %s: %w", hostOf(cfg.DatabaseURL), err)
			}
			e.closers = append(e.closers, release)
		}
		e.Metrics.RecordPool("purchase", poolStat(st))
		conns := cfg.BackgroundMaxConns
		if conns <= 0 {
			conns = DefaultBackgroundMaxConns
		}
		bg, err := st.Sibling(ctx, conns)
		if err != nil {
			return fmt.Errorf("open the background PostgreSQL pool: %w", err)
		}
		e.Background = bg
		e.closers = append(e.closers, bg.Close)
		e.Metrics.RecordPool("background", poolStat(bg))
		// The catalog's reads of a sale another server changed take a
		// connection of their own: behind the background work's rounds
		// in its pool, news of a pause waited up to a few hundred
		// milliseconds on a busy machine (BenchmarkFleetPropagation).
		sr, err := st.Sibling(ctx, 1)
		if err != nil {
			return fmt.Errorf("open the catalog's PostgreSQL connection: %w", err)
		}
		e.saleReader = sr
		e.closers = append(e.closers, sr.Close)
		if cfg.EventsSink != "none" {
			conns := cfg.OutboxMaxConns
			if conns <= 0 {
				conns = 2
			}
			rs, err := st.Sibling(ctx, conns)
			if err != nil {
				return fmt.Errorf("open the relay's PostgreSQL pool: %w", err)
			}
			e.relayStore = rs
			e.closers = append(e.closers, rs.Close)
			e.Metrics.RecordPool("relay", poolStat(rs))
		}
		return nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "flashsale.db"), sqlite.WithClock(cfg.Now), sqlite.WithEventsHook(e.eventsWritten))
	if err != nil {
		return fmt.Errorf("--data-dir: open SQLite in %s: %w", cfg.DataDir, err)
	}
	e.Store = st
	e.closers = append(e.closers, st.Close)
	// SQLite has one writer, which no second pool could multiply: the
	// background work shares the store, and its writes queue for the
	// writer with the purchase path's. What isolates the sale here is the
	// bound on purchase requests in flight (openInFlight), which keeps the
	// writer's queue short.
	e.Background = st
	// SQLite has one writer: the relay's claims queue for it with every
	// other write, one statement per batch, so it shares the store.
	e.relayStore = st
	return nil
}

// DefaultBackgroundMaxConns is the size of the background work's own
// PostgreSQL pool unless Config.BackgroundMaxConns says otherwise: enough
// for the sweeper, the watcher, the warmer and an operator at once.
const DefaultBackgroundMaxConns = 4

// poolStat reads a PostgreSQL pool's connections in use and its bound, for
// the pool gauges.
func poolStat(st *postgres.Store) func() (int32, int32) {
	return func() (int32, int32) {
		s := st.Pool().Stat()
		return s.AcquiredConns(), s.MaxConns()
	}
}

// DatabaseConnectTimeout bounds each connection to PostgreSQL the engine
// opens, unless the URL's connect_timeout says otherwise: without one, a
// server that drops packets holds the start (and, later, a pool's new
// connection) for as long as the system's TCP retries last, minutes.
const DatabaseConnectTimeout = 5 * time.Second

// withConnectTimeout returns a postgres:// URL with connect_timeout set to
// DatabaseConnectTimeout, unless it sets one itself.
func withConnectTimeout(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // pgx says what is wrong with it
	}
	q := u.Query()
	if q.Has("connect_timeout") {
		return raw
	}
	q.Set("connect_timeout", strconv.Itoa(int(DatabaseConnectTimeout/time.Second)))
	u.RawQuery = q.Encode()
	return u.String()
}

// hostOf returns the host:port of a server's URL for an error message:
// never its user, password or parameters.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the address given"
	}
	return u.Host
}
