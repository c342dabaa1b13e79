package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// SalesChannel is the channel every change to a sale is notified on, in
// the transaction that makes it (migrations/00008_sale_notify.sql).
const SalesChannel = "flashsale_sales"

// SaleChange is one notification: the sale with ID Sale, of SKU, was
// written at Version.
type SaleChange struct {
	Schema  string `json:"schema"`
	SKU     string `json:"sku"`
	Sale    string `json:"sale"`
	Version int64  `json:"version"`
}

// ListenConfig configures a SaleListener. URL and Changed are required.
type ListenConfig struct {
	// URL is the database, as Open takes it; its search_path names the
	// schema whose sales are heard.
	URL string
	// Changed is called, one call at a time, for each change to a sale
	// of the schema committed by any server (this one included).
	Changed func(ctx context.Context, c SaleChange)
	// Relist is called after each LISTEN took, the first included: a
	// change committed while no connection listened was never heard, so
	// everything must be read again. It may be nil.
	Relist func(ctx context.Context)
	// MinBackoff and MaxBackoff bound the wait between attempts to
	// connect (defaults 100ms and 5s), doubling from the one to the
	// other, with jitter.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// SaleListener keeps a connection of its own (never one of a pool's)
// LISTENing on SalesChannel and hands every change to Changed. When the
// connection breaks it connects again, waiting longer after each failure,
// and calls Relist once it listens again. It needs a session of its own:
// a pooler in transaction mode (PgBouncer's default) does not carry
// notifications. Start and Stop are not safe for concurrent use with each
// other; the zero value is not usable, call NewSaleListener.
type SaleListener struct {
	cfg ListenConfig

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewSaleListener returns a listener; call Start to begin listening.
func NewSaleListener(cfg ListenConfig) *SaleListener {
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Relist == nil {
		cfg.Relist = func(context.Context) {}
	}
	return &SaleListener{cfg: cfg}
}

// Start listens in the background until Stop or ctx ends. A second Start
// without Stop does nothing.
func (l *SaleListener) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	l.done = done
	go func() {
		defer close(done)
		l.run(ctx)
	}()
}

// Stop stops listening, closes the connection and waits for the call to
// Changed or Relist in progress, if any.
func (l *SaleListener) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (l *SaleListener) run(ctx context.Context) {
	backoff := l.cfg.MinBackoff
	for ctx.Err() == nil {
		listened, err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			// It worked for a while: the next failure starts the
			// backoff afresh.
			backoff = l.cfg.MinBackoff
		}
		l.cfg.Logger.Warn("postgres: the sale listener lost its connection; changes made by other servers reach this one at the catalog's refresh until it is back",
			"err", err, "retry_in", backoff.String())
		// Up to half the wait again, so that a fleet whose database came
		// back does not reconnect all at once.
		wait := backoff + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, l.cfg.MaxBackoff)
	}
}

// listen connects, listens, relists and hands on notifications until the
// connection fails or ctx ends. listened reports whether LISTEN took.
func (l *SaleListener) listen(ctx context.Context) (listened bool, err error) {
	cc, err := pgx.ParseConfig(l.cfg.URL)
	if err != nil {
		return false, fmt.Errorf("parse url: %w", err)
	}
	connectCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.ConnectConfig(connectCtx, cc)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	var schema string
	if err := conn.QueryRow(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&schema); err != nil {
		return false, fmt.Errorf("read the schema: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+SalesChannel); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	// Listening now: whatever commits from here on is heard, so a read
	// of everything now misses nothing.
	l.cfg.Relist(ctx)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		var c SaleChange
		if err := json.Unmarshal([]byte(n.Payload), &c); err != nil {
			l.cfg.Logger.Warn("postgres: a notification on the sales channel that is not a sale change", "payload", n.Payload, "err", err)
			continue
		}
		if c.Schema != schema || c.SKU == "" {
			continue
		}
		l.cfg.Changed(ctx, c)
	}
}
