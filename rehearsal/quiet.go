package rehearsal

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
)

// QuietFigures is the isolation check: a quiet sale's reserves and a plain
// query, measured while the engine was idle and while the big sale ran.
type QuietFigures struct {
	Lines []QuietLine
	// Note says where the probe ran, beside the crowd or apart from it.
	Note string `json:",omitempty"`
	// Failed counts the counted rounds (idle and during) whose quiet
	// shopper got no ticket, was not admitted at once, or was refused its
	// reserve: a latency measured on refusals would flatter the server.
	Failed int64 `json:",omitempty"`
}

// QuietLine is one probe's p99, idle and during the big sale (over N
// rounds), and in the rush: while the crowd arrived, the busiest seconds of
// the sale, over RushN of those rounds. Rush is zero where the probe was
// not told when the crowd arrived (in process, where time is compressed).
type QuietLine struct {
	Name         string
	Idle, During time.Duration
	N            int64
	Rush         time.Duration `json:",omitempty"`
	RushN        int64         `json:",omitempty"`
}

// quietProbe runs a shopper of a quiet sale (ticket, status, reserve, then
// cancel so that the stock lasts) and a plain query, a few times a second
// in wall time, into one histogram while idle and another afterwards, and
// a third while rush is set.
type quietProbe struct {
	c      client
	conn   *pgx.Conn
	n      atomic.Int64
	during atomic.Bool
	// rush is set while the crowd arrives.
	rush     atomic.Bool
	reserve  [3]hist // idle, during, rush (a part of during)
	query    [3]hist
	failures atomic.Int64
	stopped  chan struct{}
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

// The quiet probe's pace, how long the idle baseline lasts, and how many
// of the probe's first rounds are not counted: they open its connections
// and warm the server's caches for the quiet sale, which the big sale's
// shoppers have done for theirs by the time it is measured.
const (
	quietEvery = 20 * time.Millisecond
	quietIdle  = 5 * time.Second
	quietWarm  = 25
)

func startQuietInProcess(ctx context.Context, cfg Config, e *engine.Engine, clock *vclock) (*quietProbe, error) {
	sku := "quiet-" + strconv.FormatUint(cfg.Seed%1e9, 36)
	sale, err := e.Control.Create(ctx, &flashsale.Sale{SKU: sku, Name: "Quiet sale", InitialStock: 1000,
		OpensAt: clock.Now().Add(-time.Second), ClosesAt: clock.Now().Add(24 * time.Hour), HoldSeconds: 600, PerUserLimit: 1})
	if err != nil {
		return nil, fmt.Errorf("create the quiet sale: %w", err)
	}
	return startQuiet(ctx, cfg, &procClient{e: e, sku: sku, sale: sale})
}

func startQuiet(ctx context.Context, cfg Config, c client) (*quietProbe, error) {
	q := &quietProbe{c: c, stopped: make(chan struct{})}
	url := cfg.PlainQueryURL
	if url == "" {
		url = cfg.DatabaseURL
	}
	if url != "" {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("the plain query's connection: %w", err)
		}
		q.conn = conn
	}
	ctx, q.cancel = context.WithCancel(ctx)
	q.wg.Add(1)
	go q.loop(ctx)
	// The idle baseline, before the big sale starts.
	select {
	case <-time.After(quietIdle):
	case <-ctx.Done():
	}
	q.during.Store(true)
	return q, nil
}

func (q *quietProbe) loop(ctx context.Context) {
	defer q.wg.Done()
	t := time.NewTicker(quietEvery)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		phase := 0
		switch {
		case i < quietWarm:
			phase = -1
		case q.during.Load():
			phase = 1
		}
		q.once(ctx, phase)
	}
}

// once is one round of the probe, counted in phase 0 (idle) or 1 (during
// the big sale, and in the rush too while rush is set), or not at all
// (phase -1).
func (q *quietProbe) once(ctx context.Context, phase int) {
	rush := phase == 1 && q.rush.Load()
	record := func(h *[3]hist, d time.Duration) {
		if phase >= 0 {
			h[phase].add(d)
		}
		if rush {
			h[2].add(d)
		}
	}
	fail := func() {
		if phase >= 0 && ctx.Err() == nil {
			q.failures.Add(1)
		}
	}
	n := q.n.Add(1)
	who := persona{user: "quiet-" + strconv.FormatInt(n, 10), created: time.Unix(0, 0), card: "quiet-card-" + strconv.FormatInt(n, 10)}
	sh := &shopper{}
	if rep := q.c.ticket(ctx, who, sh); rep.code == "" {
		if st := q.c.status(ctx, who, sh, rep.ticket); st.state == "admitted" {
			sh.x().admission = st.admission
			start := time.Now()
			rep := q.c.reserve(ctx, who, sh, "quiet-"+strconv.FormatInt(n, 10))
			record(&q.reserve, time.Since(start))
			if rep.code == "" {
				sh.x().resID = rep.id
				q.c.cancel(ctx, who, sh)
			} else {
				fail()
			}
		} else {
			fail()
		}
	} else {
		fail()
	}
	if q.conn != nil {
		var count int64
		start := time.Now()
		if err := q.conn.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_class").Scan(&count); err == nil {
			record(&q.query, time.Since(start))
		}
	}
}

func (q *quietProbe) stop() {
	q.cancel()
	q.wg.Wait()
	if q.conn != nil {
		_ = q.conn.Close(context.Background())
	}
}

func (q *quietProbe) figures() *QuietFigures {
	line := func(name string, h *[3]hist) QuietLine {
		return QuietLine{Name: name, Idle: h[0].quantile(0.99), During: h[1].quantile(0.99), N: h[1].count(),
			Rush: h[2].quantile(0.99), RushN: h[2].count()}
	}
	f := &QuietFigures{Lines: []QuietLine{line("quiet sale: reserve", &q.reserve)}, Failed: q.failures.Load()}
	if q.conn != nil {
		f.Lines = append(f.Lines, line("plain query (PostgreSQL)", &q.query))
	}
	return f
}
