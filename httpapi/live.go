package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/control"
	"github.com/flashsale/flashsale/internal/loop"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/waitroom"
)

// The live feed: GET /admin/sales/{sku}/live, one sale's figures as
// server-sent events, and GET /admin/live, every live sale's summary.
//
// One producer per process (liveHub) builds each tracked sale's figures
// once a round (a second), from what the waiting room and the background
// services already keep: the room's snapshot (the gate's counter, the
// queue's places), the gate's own snapshot (units taken), the invariant
// watcher's last check, the pacer's state, and this process's counts of
// reserves and rejections. It encodes each sale's event once, and every
// subscriber is handed the same bytes: a subscriber costs a channel send
// and a write, never a read of the record (docs/benchmarks/live-feed.md).
// While a sale has subscribers, the round also reads the record's totals
// and the sale's outbox, once for all of them.
//
// Sales are tracked while they are not closed, and for as long as someone
// watches them: the round feeds the per-sale gauges (metrics.Sale) and a
// history of the last minutes, so that a console opened mid-sale draws the
// sale from its start.
//
// Several servers behind a load balancer each run their own producer over
// the same gate, queue and record: the units, places, admissions, wins,
// totals and invariant are the sale's, the same on every server; reserves
// a second and rejections by code are this server's own share of the
// traffic (each server counts what it answered). An event's id is the
// round's time in milliseconds, so a client that reconnects to another
// server with Last-Event-ID resumes from that server's rounds after it.

// The live feed's pace and memory.
const (
	// liveInterval is a round's period: the contract's "at least once a
	// second".
	liveInterval = time.Second
	// liveResume is how many of each sale's last events are kept for a
	// client that reconnects with Last-Event-ID (two minutes' worth).
	liveResume = 120
	// liveHistory is how many points of each sale are kept for the charts
	// (a quarter of an hour at one a second): about 100 bytes each.
	liveHistory = 900
	// liveRateSeconds is the window the rates are measured over.
	liveRateSeconds = 5
	// liveActiveEvery is how often the round asks the catalog which sales
	// are active (a read of the record's list of sales).
	liveActiveEvery = 5 * time.Second
	// liveHeartbeat is how long a stream stays silent before a comment
	// keeps it (and the proxies in between) awake.
	liveHeartbeat = 15 * time.Second
	// liveBuffer is how many events a subscriber may fall behind before it
	// is let go: it reconnects with Last-Event-ID and catches up from the
	// kept events, and the producer never waits for a slow reader.
	liveBuffer = 16
	// liveWriteTimeout bounds one write to a subscriber.
	liveWriteTimeout = 10 * time.Second
	// liveSpark is how many points of units left the list's sparklines
	// carry.
	liveSpark = 60
)

// errStreamsClosed answers a subscription after CloseStreams.
var errStreamsClosed = &flashsale.Error{Code: flashsale.CodeUnavailable,
	Message: "This server is shutting down; connect again.", RetryAfter: time.Second}

// liveHub produces the live figures. Safe for concurrent use; its zero
// value is not usable (newLiveHub).
type liveHub struct {
	s        *Server
	interval time.Duration
	loop     loop.Loop
	// round serializes rounds, whether the loop's or a subscriber's.
	round sync.Mutex

	mu     sync.Mutex
	sales  map[string]*liveSale // by SKU
	lists  map[*liveSub]struct{}
	lastID int64
	// active is the SKUs of the sales that were not closed at activeAt
	// (wall time).
	active   map[string]bool
	activeAt time.Time
	// roundAt is when the last round ended (wall time).
	roundAt time.Time
	closed  bool
	done    chan struct{}

	reserves sync.Map // SKU → *atomic.Int64: reserve requests answered
}

// liveSale is one tracked sale. Guarded by liveHub.mu, but for build.
type liveSale struct {
	sku  string
	subs map[*liveSub]struct{}
	// frames are the last events, oldest first; points the history.
	frames []*liveFrame
	points []livePoint
	// samples are the cumulative counts of the last rounds, oldest first,
	// for the rates.
	samples []liveSample
	// soldOutAt is when the counter last reached zero; soldOutLooked says
	// the gate's audit log was asked when it was first seen there.
	soldOutAt     time.Time
	soldOutLooked bool
	// draw is the sale's draw once drawn (it never changes after).
	draw *flashsale.Draw
	// summary is the sale's line in the list.
	summary liveSummary
	// builtAt is when a round last built the sale (wall time).
	builtAt time.Time
	// build serializes the builds of this sale.
	build sync.Mutex
}

// liveSub is one open stream.
type liveSub struct {
	ch chan *liveFrame
	// gone is closed when the hub lets the subscriber go (too slow, the
	// sale vanished, or the streams are closing).
	gone chan struct{}
	once sync.Once
}

func (sub *liveSub) close() { sub.once.Do(func() { close(sub.gone) }) }

// liveFrame is one event, encoded once for every subscriber.
type liveFrame struct {
	id   int64
	data []byte // "id: …\nevent: …\ndata: …\n\n"
}

// liveSample is a sale's cumulative counts at one round.
type liveSample struct {
	at         time.Time
	admitted   int64
	won        int64
	epoch      int64
	reserves   int64
	rejections map[string]int64
}

// livePoint is one round of a sale's history: what the charts draw.
type livePoint struct {
	At time.Time `json:"at"`
	// UnitsLeft is null while the gate holds no counter.
	UnitsLeft *int64 `json:"unitsLeft"`
	Waiting   int64  `json:"waiting"`
	Pending   int64  `json:"pending"`
	Confirmed int64  `json:"confirmed"`
	// The rates of the round: admissions, reserve requests, units taken
	// and rejections (all codes) a second.
	Admissions float64 `json:"admissions"`
	Reserves   float64 `json:"reserves"`
	Wins       float64 `json:"wins"`
	Rejections float64 `json:"rejections"`
}

// liveRates are the rates of the last seconds.
type liveRates struct {
	// Seconds is the window they were measured over (up to
	// liveRateSeconds; 0 before the second round).
	Seconds float64 `json:"seconds"`
	// Admissions are places admitted a second (the sale's, every server's).
	Admissions float64 `json:"admissions"`
	// Reserves are reserve requests a second that this server answered.
	Reserves float64 `json:"reserves"`
	// Wins are units the gate gave to reserves a second (every server's).
	Wins float64 `json:"wins"`
	// Rejections are this server's answers a second by error code.
	Rejections map[string]float64 `json:"rejections"`
}

// liveJSON is the event `sale`: the figures of GET /admin/sales/{sku} and
// the rates of the last seconds.
type liveJSON struct {
	adminSaleJSON
	// At is when the figures were read; SoldOutAt when the counter last
	// reached zero (null while units are left, or if it is not known).
	At        time.Time  `json:"at"`
	SoldOutAt *time.Time `json:"soldOutAt"`
	Rates     liveRates  `json:"rates"`
	// PauseCause, while paused, is who paused the sale: "operator", or
	// the engine failing closed ("gate", "invariant"); see
	// control.PauseCause.
	PauseCause string `json:"pauseCause,omitempty"`
}

// liveSummary is one sale's line in the event `sales` of GET /admin/live.
type liveSummary struct {
	SKU          string              `json:"sku"`
	Name         string              `json:"name"`
	State        flashsale.SaleState `json:"state"`
	PauseReason  string              `json:"pauseReason,omitempty"`
	InitialStock int                 `json:"initialStock"`
	Counter      *int64              `json:"counter"`
	Pending      int64               `json:"pending"`
	Confirmed    int64               `json:"confirmed"`
	Waiting      int64               `json:"waiting"`
	Admissions   float64             `json:"admissions"`
	InvariantOK  bool                `json:"invariantOk"`
	At           time.Time           `json:"at"`
	// Spark is units left over the kept history, oldest first, at most
	// liveSpark points (null where the gate held no counter).
	Spark []*int64 `json:"spark"`
}

func newLiveHub(s *Server) *liveHub {
	return &liveHub{s: s, interval: liveInterval, sales: map[string]*liveSale{},
		lists: map[*liveSub]struct{}{}, done: make(chan struct{})}
}

// Start runs the live feed's producer (at the origin) until Stop or ctx
// ends: a round at once, then one every second. Without Start, the feed
// still answers: each new subscriber gets a fresh round, and no more.
func (s *Server) Start(ctx context.Context) {
	if s.live == nil {
		return
	}
	s.live.loop.Start(ctx, s.live.interval, "live feed", s.cfg.Logger, s.LiveOnce)
}

// Stop stops the producer and ends every open stream (CloseStreams).
func (s *Server) Stop() {
	if s.live == nil {
		return
	}
	s.CloseStreams()
	s.live.loop.Stop()
}

// CloseStreams ends every open live stream and refuses new ones, so that a
// graceful shutdown (http.Server.Shutdown, which waits for the requests in
// progress) is not held open by them: register it with
// http.Server.RegisterOnShutdown. Clients reconnect, to another server.
func (s *Server) CloseStreams() {
	h := s.live
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
}

// LiveOnce runs one round of the live feed now: every tracked sale's
// figures built, sent to its subscribers and recorded in the gauges.
func (s *Server) LiveOnce(ctx context.Context) error {
	if s.live == nil {
		return nil
	}
	return s.live.roundOnce(ctx)
}

func (h *liveHub) roundOnce(ctx context.Context) error {
	h.round.Lock()
	defer h.round.Unlock()
	skus, err := h.tracked(ctx)
	for _, sku := range skus {
		h.produce(ctx, sku)
	}
	h.mu.Lock()
	h.roundAt = time.Now()
	keep := make(map[string]bool, len(skus))
	for _, sku := range skus {
		keep[sku] = true
	}
	for sku, ls := range h.sales {
		if !keep[sku] && len(ls.subs) == 0 {
			delete(h.sales, sku)
		}
	}
	h.publishList()
	h.mu.Unlock()
	return err
}

// tracked returns the SKUs a round builds: the active sales (asked of the
// catalog every liveActiveEvery) and those with subscribers.
func (h *liveHub) tracked(ctx context.Context) ([]string, error) {
	var err error
	h.mu.Lock()
	stale := h.active == nil || time.Since(h.activeAt) >= liveActiveEvery
	h.mu.Unlock()
	if stale && h.s.cfg.Catalog != nil {
		var sales []*flashsale.Sale
		if sales, err = h.s.cfg.Catalog.Active(ctx); err == nil {
			active := make(map[string]bool, len(sales))
			for _, sale := range sales {
				active[sale.SKU] = true
			}
			h.mu.Lock()
			h.active, h.activeAt = active, time.Now()
			h.mu.Unlock()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	skus := make([]string, 0, len(h.active)+len(h.sales))
	for sku := range h.active {
		skus = append(skus, sku)
	}
	for sku, ls := range h.sales {
		if !h.active[sku] && len(ls.subs) > 0 {
			skus = append(skus, sku)
		}
	}
	return skus, err
}

// saleOf returns the SKU's tracked sale, making it. Called with h.mu held.
func (h *liveHub) saleOf(sku string) *liveSale {
	ls, ok := h.sales[sku]
	if !ok {
		ls = &liveSale{sku: sku, subs: map[*liveSub]struct{}{}}
		h.sales[sku] = ls
	}
	return ls
}

// produce builds the SKU's figures and hands them to its subscribers.
func (h *liveHub) produce(ctx context.Context, sku string) {
	h.mu.Lock()
	ls := h.saleOf(sku)
	h.mu.Unlock()
	ls.build.Lock()
	defer ls.build.Unlock()
	h.buildLocked(ctx, ls)
}

// freshen builds the sale unless a build finished within the interval, so
// that subscribers arriving together cost one build.
func (h *liveHub) freshen(ctx context.Context, ls *liveSale) {
	ls.build.Lock()
	defer ls.build.Unlock()
	h.mu.Lock()
	fresh := len(ls.frames) > 0 && time.Since(ls.builtAt) < h.interval
	h.mu.Unlock()
	if !fresh {
		h.buildLocked(ctx, ls)
	}
}

// buildLocked builds one round of the sale. Called with ls.build held.
func (h *liveHub) buildLocked(ctx context.Context, ls *liveSale) {
	s := h.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	sale, err := s.cfg.Catalog.BySKU(ctx, ls.sku)
	if err != nil {
		if errors.Is(err, flashsale.ErrNotFound) {
			// The sale is gone (a test's store, or a SKU retyped): its
			// streams end rather than repeat nothing.
			h.mu.Lock()
			for sub := range ls.subs {
				sub.close()
			}
			h.mu.Unlock()
		}
		return
	}
	h.mu.Lock()
	watched := len(ls.subs) > 0
	draw := ls.draw
	h.mu.Unlock()
	src := &liveFigures{s: s, heavy: watched, kept: draw}
	if s.cfg.Snapshots != nil {
		if snap, err := s.cfg.Snapshots.Snapshot(ctx, sale.SKU); err == nil && snap.Sale.ID == sale.ID {
			src.room = snap
		}
	}
	v := s.viewFrom(ctx, sale, src)
	now := s.cfg.Now()
	sample := liveSample{at: now, admitted: v.AdmittedUpTo, won: src.snap.Won, epoch: src.snap.Epoch,
		reserves: h.reserveCount(sale.SKU), rejections: v.Rejections}

	h.mu.Lock()
	if src.drawn != nil {
		ls.draw = src.drawn
	}
	// Sold out: when the counter of an open sale last reached zero.
	soldOut := v.Counter != nil && *v.Counter <= 0 && !now.Before(sale.OpensAt)
	lookUp := false
	switch {
	case !soldOut:
		ls.soldOutAt, ls.soldOutLooked = time.Time{}, false
	case ls.soldOutAt.IsZero() && len(ls.samples) > 0 && !ls.soldOutLooked:
		ls.soldOutAt = now
	case ls.soldOutAt.IsZero() && !ls.soldOutLooked:
		lookUp = true
	}
	h.mu.Unlock()
	if lookUp {
		// First seen sold out: the gate's log says when.
		at := soldOutFromAudit(ctx, s.cfg.Gate, sale.ID)
		h.mu.Lock()
		ls.soldOutAt, ls.soldOutLooked = at, true
		h.mu.Unlock()
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	var prev *liveSample
	if n := len(ls.samples); n > 0 {
		prev = &ls.samples[n-1]
	}
	ls.samples = append(ls.samples, sample)
	for len(ls.samples) > liveRateSeconds+1 ||
		(len(ls.samples) > 2 && now.Sub(ls.samples[1].at) >= time.Duration(liveRateSeconds)*time.Second) {
		ls.samples = ls.samples[1:]
	}
	out := liveJSON{adminSaleJSON: v, At: now.UTC(), SoldOutAt: timePtr(ls.soldOutAt),
		Rates: rates(&ls.samples[0], &sample)}
	if sale.State == flashsale.SalePaused {
		out.PauseCause = control.PauseCause(sale.PauseReason)
	}
	point := livePoint{At: now.UTC(), UnitsLeft: v.Counter, Waiting: v.Waiting, Pending: v.Pending, Confirmed: v.Confirmed}
	if prev != nil {
		r := rates(prev, &sample)
		point.Admissions, point.Reserves, point.Wins = r.Admissions, r.Reserves, r.Wins
		for _, n := range r.Rejections {
			point.Rejections += n
		}
	}
	ls.points = appendRing(ls.points, point, liveHistory)
	ls.builtAt = time.Now()
	ls.summary = liveSummary{SKU: v.SKU, Name: v.Name, State: v.State, PauseReason: v.PauseReason,
		InitialStock: v.InitialStock, Counter: v.Counter, Pending: v.Pending, Confirmed: v.Confirmed,
		Waiting: v.Waiting, Admissions: out.Rates.Admissions, InvariantOK: v.Invariant.OK, At: now.UTC()}

	if v.State != flashsale.SaleClosed {
		// A closed sale's gauges keep their last values until the sale is
		// retired (metrics.ForgetSale); a round never brings them back.
		f := metrics.SaleFigures{SKU: v.SKU, Pending: v.Pending, Confirmed: v.Confirmed, Waiting: v.Waiting,
			Admitted: v.AdmittedUpTo, Warm: v.Warm}
		if v.Counter != nil {
			f.UnitsLeft, f.UnitsKnown = *v.Counter, true
		}
		if sale.State == flashsale.SalePaused {
			f.PauseReason = control.PauseCause(sale.PauseReason)
		}
		s.cfg.Metrics.Sale(f)
	}

	if !watched {
		// Nobody watched this round, so it read only the figures the
		// gauges need (no expired, cancelled nor outbox): not an event to
		// resume from. A client that comes back gets a full one, built
		// then, and the history fills the gap in its charts.
		return
	}
	data, err := json.Marshal(out)
	if err != nil {
		s.cfg.Logger.Error("live feed: encode", "sku", v.SKU, "err", err)
		return
	}
	frame := h.frame("sale", data, now)
	ls.frames = appendRing(ls.frames, frame, liveResume)
	for sub := range ls.subs {
		send(sub, frame)
	}
}

// frame encodes an event with the next id. Called with h.mu held.
func (h *liveHub) frame(event string, data []byte, now time.Time) *liveFrame {
	id := max(now.UnixMilli(), h.lastID+1)
	h.lastID = id
	var b bytes.Buffer
	b.Grow(len(data) + 48)
	b.WriteString("id: ")
	b.WriteString(strconv.FormatInt(id, 10))
	b.WriteString("\nevent: ")
	b.WriteString(event)
	b.WriteString("\ndata: ")
	b.Write(data) // JSON from encoding/json has no newline inside
	b.WriteString("\n\n")
	return &liveFrame{id: id, data: b.Bytes()}
}

// send hands a subscriber a frame, or lets it go if it has fallen
// liveBuffer frames behind.
func send(sub *liveSub, f *liveFrame) {
	select {
	case sub.ch <- f:
	default:
		sub.close()
	}
}

// publishList sends the summary of every tracked sale to the list's
// subscribers. Called with h.mu held.
func (h *liveHub) publishList() {
	if len(h.lists) == 0 {
		return
	}
	f := h.listFrame()
	if f == nil {
		return
	}
	for sub := range h.lists {
		send(sub, f)
	}
}

// listFrame encodes the summary of every tracked sale as an event `sales`.
// Called with h.mu held.
func (h *liveHub) listFrame() *liveFrame {
	lines := make([]liveSummary, 0, len(h.sales))
	for _, ls := range h.sales {
		if ls.summary.SKU == "" {
			continue
		}
		line := ls.summary
		line.Spark = spark(ls.points, liveSpark)
		lines = append(lines, line)
	}
	data, err := json.Marshal(map[string]any{"sales": lines})
	if err != nil {
		return nil
	}
	return h.frame("sales", data, h.s.cfg.Now())
}

// spark picks at most n points of units left, evenly over the history.
func spark(points []livePoint, n int) []*int64 {
	if len(points) == 0 {
		return []*int64{}
	}
	k := min(n, len(points))
	out := make([]*int64, k)
	for i := range k {
		j := i * (len(points) - 1) / max(k-1, 1)
		out[i] = points[j].UnitsLeft
	}
	return out
}

// rates are the rates between two samples.
func rates(from, to *liveSample) liveRates {
	r := liveRates{Rejections: map[string]float64{}}
	dt := to.at.Sub(from.at).Seconds()
	if dt <= 0 {
		return r
	}
	r.Seconds = dt
	per := func(a, b int64) float64 { return float64(max(b-a, 0)) / dt }
	r.Admissions = per(from.admitted, to.admitted)
	r.Reserves = per(from.reserves, to.reserves)
	if from.epoch == to.epoch {
		// A rebuild starts the gate's count of units taken afresh.
		r.Wins = per(from.won, to.won)
	}
	for code, n := range to.rejections {
		if d := per(from.rejections[code], n); d > 0 {
			r.Rejections[code] = d
		}
	}
	return r
}

func appendRing[T any](ring []T, v T, n int) []T {
	if len(ring) >= n {
		copy(ring, ring[len(ring)-n+1:])
		ring = ring[:n-1]
	}
	return append(ring, v)
}

// soldOutFromAudit returns when the sale's counter last reached zero, by
// the gate's log of its changes, or zero if the log does not say (the
// change is older than the entries read).
func soldOutFromAudit(ctx context.Context, gate flashsale.GateAdmin, saleID string) time.Time {
	if gate == nil {
		return time.Time{}
	}
	entries, err := gate.Audit(ctx, saleID, 1000)
	if err != nil {
		return time.Time{}
	}
	// Newest first: the run of entries at zero ends (going back) at the
	// one that took the last unit.
	var at time.Time
	for _, e := range entries {
		if e.Counter > 0 {
			return at
		}
		at = e.At
	}
	return time.Time{}
}

// countReserves counts the reserve requests of known sales, for the feed's
// rate (a SKU no sale has is not counted: see rejections.add).
func (s *Server) countReserves(next http.HandlerFunc) http.HandlerFunc {
	if s.live == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s.live.countReserve(r.PathValue("sku"))
		next(w, r)
	}
}

func (h *liveHub) countReserve(sku string) {
	v, ok := h.reserves.Load(sku)
	if !ok {
		if h.s.cfg.Catalog == nil || !h.s.cfg.Catalog.Known(sku) {
			return
		}
		v, _ = h.reserves.LoadOrStore(sku, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

func (h *liveHub) reserveCount(sku string) int64 {
	if v, ok := h.reserves.Load(sku); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// liveFigures is the feed's figure source: the room's snapshot for the
// queue, the gate's snapshot (kept, for the units taken), and the record
// only while the sale is watched.
type liveFigures struct {
	s     *Server
	room  *waitroom.Snapshot
	heavy bool
	// kept is the sale's draw as the feed keeps it; drawn a draw read now.
	kept, drawn *flashsale.Draw
	snap        flashsale.GateSnapshot
}

func (f *liveFigures) gate(ctx context.Context, sale *flashsale.Sale) (flashsale.GateSnapshot, error) {
	snap, err := f.s.cfg.Gate.Snapshot(ctx, sale.ID)
	if err == nil {
		f.snap = snap
	}
	return snap, err
}

func (f *liveFigures) totals(ctx context.Context, sale *flashsale.Sale) (flashsale.SaleTotals, error) {
	if f.heavy {
		return f.s.cfg.Store.SaleTotals(ctx, sale.ID)
	}
	// Unwatched, the gauges need only what the invariant watcher read
	// this second.
	var t flashsale.SaleTotals
	if f.s.cfg.Watcher != nil {
		if res, ok := f.s.cfg.Watcher.Last(sale.ID); ok {
			t.Pending, t.Confirmed = res.Pending, res.Confirmed
		}
	}
	return t, nil
}

func (f *liveFigures) outbox(ctx context.Context, sale *flashsale.Sale) (flashsale.OutboxStats, bool, error) {
	if !f.heavy {
		return flashsale.OutboxStats{}, false, nil
	}
	st, err := f.s.cfg.Store.OutboxStats(ctx, sale.ID)
	return st, err == nil, err
}

func (f *liveFigures) issued(ctx context.Context, sale *flashsale.Sale) (int64, error) {
	if f.room != nil {
		return f.room.Issued, nil
	}
	return f.s.cfg.Queue.Len(ctx, sale.ID)
}

func (f *liveFigures) admitted(ctx context.Context, sale *flashsale.Sale) (int64, error) {
	if f.room != nil {
		return f.room.AdmittedUpTo, nil
	}
	return f.s.cfg.Queue.Admitted(ctx, sale.ID)
}

func (f *liveFigures) draw(ctx context.Context, sale *flashsale.Sale) (*flashsale.Draw, error) {
	switch {
	case f.kept != nil:
		return f.kept, nil
	case f.room != nil && !f.room.Drawn, !f.heavy:
		return &flashsale.Draw{}, nil
	}
	d, err := f.s.cfg.Store.Draw(ctx, sale.ID)
	if err == nil && !d.DrawnAt.IsZero() {
		f.drawn = d
	}
	return d, err
}

func (f *liveFigures) suspects(ctx context.Context, sale *flashsale.Sale) (int, error) {
	if f.room != nil {
		return len(f.room.Suspects), nil
	}
	held, err := f.s.cfg.Queue.Suspects(ctx, sale.ID)
	return len(held), err
}

// subscribe adds a stream of the SKU's events and returns the kept events
// after lastID (none when lastID is 0).
func (h *liveHub) subscribe(sku string, lastID int64) (*liveSub, *liveSale, []*liveFrame, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, nil, errStreamsClosed
	}
	ls := h.saleOf(sku)
	sub := &liveSub{ch: make(chan *liveFrame, liveBuffer), gone: make(chan struct{})}
	ls.subs[sub] = struct{}{}
	var backlog []*liveFrame
	if lastID > 0 {
		for _, f := range ls.frames {
			if f.id > lastID {
				backlog = append(backlog, f)
			}
		}
	}
	return sub, ls, backlog, nil
}

func (h *liveHub) unsubscribe(ls *liveSale, sub *liveSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(ls.subs, sub)
	sub.close()
}

// history returns the sale's last points, at most n.
func (h *liveHub) history(ls *liveSale, n int) []livePoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	pts := ls.points[max(len(ls.points)-n, 0):]
	return append([]livePoint(nil), pts...)
}

// liveSale answers GET /admin/sales/{sku}/live: the sale's event at once
// (or, for a client that gives Last-Event-ID, the kept events after it),
// then one every round. ?history=N (seconds, at most 900) first sends the
// event `history`: the sale's last N points, for the charts.
func (s *Server) liveSale(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sku := r.PathValue("sku")
	if _, err := s.cfg.Catalog.BySKU(ctx, sku); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	historyN := 0
	if q := r.URL.Query().Get("history"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 || n > liveHistory {
			writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest,
				"history must be a number of seconds from 0 to %d.", liveHistory))
			return
		}
		historyN = n
	}
	lastID, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
	h := s.live
	sub, ls, backlog, err := h.subscribe(sku, lastID)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	defer h.unsubscribe(ls, sub)
	if len(backlog) == 0 {
		// A fresh figure at once: built now unless a build within the
		// second already gave one (then it is in the channel, or sent
		// below).
		before := len(sub.ch)
		h.freshen(ctx, ls)
		if len(sub.ch) == before {
			h.mu.Lock()
			if n := len(ls.frames); n > 0 && ls.frames[n-1].id > lastID {
				backlog = ls.frames[n-1:]
			}
			h.mu.Unlock()
		}
	}
	st := startStream(w)
	if historyN > 0 {
		data, err := json.Marshal(map[string]any{"sku": sku, "points": h.history(ls, historyN)})
		if err == nil {
			h.mu.Lock()
			f := h.frame("history", data, s.cfg.Now())
			h.mu.Unlock()
			if !st.write(f.data) {
				return
			}
		}
	}
	for _, f := range backlog {
		if !st.write(f.data) {
			return
		}
	}
	st.pump(ctx, sub, h.done)
}

// liveList answers GET /admin/live: the event `sales` every round, a line
// per tracked sale with its sparkline of units left.
func (s *Server) liveList(w http.ResponseWriter, r *http.Request) {
	h := s.live
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		writeError(w, s.cfg.Logger, r, errStreamsClosed)
		return
	}
	sub := &liveSub{ch: make(chan *liveFrame, liveBuffer), gone: make(chan struct{})}
	h.lists[sub] = struct{}{}
	never := h.roundAt.IsZero()
	if !never {
		// The last round's figures at once.
		if f := h.listFrame(); f != nil {
			send(sub, f)
		}
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.lists, sub)
		h.mu.Unlock()
		sub.close()
	}()
	if never {
		// No producer runs (a server that was not started): a round now.
		_ = h.roundOnce(r.Context())
	}
	startStream(w).pump(r.Context(), sub, h.done)
}

// stream writes server-sent events to one client.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startStream(w http.ResponseWriter) *stream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	// Proxies (nginx) that buffer responses would hold the events back.
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w, rc: rc}
	// Tell EventSource clients to come back after two seconds.
	st.write([]byte("retry: 2000\n\n"))
	return st
}

// write sends b and flushes it, within liveWriteTimeout (the server's
// own write timeout would end the stream). It reports false once the
// client is gone.
func (st *stream) write(b []byte) bool {
	_ = st.rc.SetWriteDeadline(time.Now().Add(liveWriteTimeout))
	if _, err := st.w.Write(b); err != nil {
		return false
	}
	return st.rc.Flush() == nil
}

// pump writes the subscriber's events until the client goes, the hub lets
// it go, or the streams close; with a comment after liveHeartbeat of
// silence.
func (st *stream) pump(ctx context.Context, sub *liveSub, done <-chan struct{}) {
	beat := time.NewTimer(liveHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-sub.gone:
			// Let go (too slow, or the sale is gone): what is buffered
			// is written, then the client reconnects with Last-Event-ID.
			for {
				select {
				case f := <-sub.ch:
					if !st.write(f.data) {
						return
					}
				default:
					return
				}
			}
		case f := <-sub.ch:
			if !st.write(f.data) {
				return
			}
			beat.Reset(liveHeartbeat)
		case <-beat.C:
			if !st.write([]byte(": keep-alive\n\n")) {
				return
			}
			beat.Reset(liveHeartbeat)
		}
	}
}

// consolePage guards the console's page and files: they hold no data (the
// browser cannot send the admin token when it opens a page, and every
// figure the page shows is fetched with it), so with an admin token they
// are served to anyone; without one, like every operator route, only on
// loopback.
func (s *Server) consolePage(h http.Handler) http.Handler {
	if s.cfg.AdminToken != "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopback(r.RemoteAddr) {
			writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeForbidden,
				"No admin token is configured, so the operator console answers only on loopback."))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// invites reads the sale's invite counts only while the sale is watched,
// once a round whatever the subscribers.
func (f *liveFigures) invites(ctx context.Context, sale *flashsale.Sale) (flashsale.InviteCounts, error) {
	if !f.heavy {
		return flashsale.InviteCounts{}, nil
	}
	return f.s.cfg.Store.InviteCounts(ctx, sale.ID)
}
