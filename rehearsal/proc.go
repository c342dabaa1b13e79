package rehearsal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/tally"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/purchase"
	"github.com/flashsale/flashsale/restock"
	"github.com/flashsale/flashsale/waitroom"
)

// vclock is the in-process rehearsal's clock: it moves only when the
// driver moves it, so a sale of minutes runs in seconds. Safe for
// concurrent use.
type vclock struct{ ns atomic.Int64 }

func (c *vclock) Now() time.Time                  { return time.Unix(0, c.ns.Load()).UTC() }
func (c *vclock) set(t time.Time)                 { c.ns.Store(t.UnixNano()) }
func newVClock(t time.Time) *vclock               { c := &vclock{}; c.set(t); return c }
func (c *vclock) since(t time.Time) time.Duration { return c.Now().Sub(t) }

// procClient speaks the shopper protocol to an engine in this process: the
// waiting room and the purchase path themselves, without HTTP and without
// the shopper JWT (the rehearsal is the identity service), each call
// carrying a tally of its calls to the record.
type procClient struct {
	e    *engine.Engine
	sku  string
	sale *flashsale.Sale
}

func (c *procClient) ctx(ctx context.Context) (context.Context, *tally.Request) {
	req := &tally.Request{}
	return tally.With(ctx, req), req
}

// fail turns an error into its contract code.
func fail(err error, req *tally.Request) reply {
	var fe *flashsale.Error
	if errors.As(err, &fe) {
		return reply{code: string(fe.Code), retryAfter: fe.RetryAfter, records: req.Calls()}
	}
	return reply{code: "internal", records: req.Calls()}
}

func (c *procClient) register(ctx context.Context, who persona, _ *shopper) reply {
	ctx, req := c.ctx(ctx)
	if err := c.e.Room.Register(ctx, c.sku, who.user, who.created); err != nil {
		return fail(err, req)
	}
	return reply{records: req.Calls()}
}

func (c *procClient) ticket(ctx context.Context, who persona, _ *shopper) reply {
	ctx, req := c.ctx(ctx)
	t, err := c.e.Room.Ticket(ctx, c.sku, who.user, who.created)
	if err != nil {
		return fail(err, req)
	}
	return reply{ticket: t.Token, position: t.Position, retryAfter: t.RetryAfter, records: req.Calls()}
}

func (c *procClient) redeem(ctx context.Context, who persona, _ *shopper, code string) reply {
	ctx, req := c.ctx(ctx)
	t, err := c.e.Room.Redeem(ctx, c.sku, who.user, who.created, code)
	if err != nil {
		return fail(err, req)
	}
	return reply{ticket: t.Token, position: t.Position, retryAfter: t.RetryAfter, records: req.Calls()}
}

func (c *procClient) status(ctx context.Context, who persona, _ *shopper, ticket string) reply {
	ctx, req := c.ctx(ctx)
	st, err := c.e.Room.StatusFor(ctx, c.sku, ticket, who.user)
	if err != nil {
		return fail(err, req)
	}
	return statusReply(st, req.Calls())
}

func statusReply(st waitroom.Status, records int) reply {
	rep := reply{state: string(st.State), ticket: st.Ticket, admission: st.AdmissionToken, position: st.Position,
		chance: st.Chance, final: st.Final, retryAfter: st.RetryAfter, records: records}
	if st.Challenge != nil {
		rep.salt, rep.bits = st.Challenge.Salt, st.Challenge.DifficultyBits
	}
	return rep
}

func (c *procClient) admission(ctx context.Context, who persona, _ *shopper, ticket, salt, nonce string) reply {
	ctx, req := c.ctx(ctx)
	st, err := c.e.Room.AdmissionFor(ctx, c.sku, ticket, salt, nonce, who.user)
	if err != nil {
		return fail(err, req)
	}
	return statusReply(st, req.Calls())
}

func (c *procClient) reserve(ctx context.Context, who persona, sh *shopper, key string) reply {
	ctx, req := c.ctx(ctx)
	res, err := c.e.Purchase.Reserve(ctx, purchase.ReserveRequest{Sale: c.sale, UserID: who.user,
		AccountCreated: who.created, AdmissionToken: sh.x().admission, IdempotencyKey: key, Quantity: 1,
		PaymentFingerprint: who.card})
	if err != nil {
		return fail(err, req)
	}
	return reply{id: res.ID, records: req.Calls()}
}

func (c *procClient) confirm(ctx context.Context, who persona, sh *shopper, payRef string) reply {
	ctx, req := c.ctx(ctx)
	if _, err := c.e.Purchase.Confirm(ctx, who.user, sh.x().resID, payRef); err != nil {
		return fail(err, req)
	}
	return reply{records: req.Calls()}
}

func (c *procClient) cancel(ctx context.Context, who persona, sh *shopper) reply {
	ctx, req := c.ctx(ctx)
	if _, err := c.e.Purchase.Cancel(ctx, who.user, sh.x().resID); err != nil {
		return fail(err, req)
	}
	return reply{records: req.Calls()}
}

// countSink takes the outbox's events and counts them.
type countSink struct{ n atomic.Int64 }

func (*countSink) Name() string { return "rehearsal" }
func (s *countSink) Publish(_ context.Context, events []*flashsale.OutboxEvent) []error {
	s.n.Add(int64(len(events)))
	return nil
}

// warnings keeps the engine's warnings and errors for the report.
type warnings struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if len(w.first) < 5 {
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		w.first = append(w.first, msg)
	}
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// The in-process driver's rounds, in virtual time.
const (
	// gatherMin and gatherFor: the driver takes the steps of a few slots
	// at once while each has few (up to 100ms of sale time, a step at
	// most that late), so that a round has work for every core.
	gatherMin  = 1024
	gatherFor  = 100 * time.Millisecond
	slice      = 10 * time.Millisecond
	paceEvery  = 250 * time.Millisecond
	sweepEvery = time.Second
)

func runInProcess(ctx context.Context, cfg Config) (*Report, error) {
	dir := cfg.DataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "flashsale-rehearsal-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	// The clock starts a little before the crowd: the sale is created,
	// warmed, and its pre-queue opened.
	opensAt := time.Now().UTC().Truncate(time.Second).Add(cfg.Arrival + time.Minute)
	start := opensAt.Add(-cfg.Arrival*3/10 - 5*time.Second)
	clock := newVClock(start)
	sink := &countSink{}
	warn := &warnings{}
	// The engine counts every call to the record, per request (each call
	// below carries a tally) and in all.
	// The rehearsal is the store's identity service: its shoppers' cards
	// count as vouched for (the in-process calls pass them as such; over
	// HTTP a reserve body's would count too).
	ecfg := engine.Config{DataDir: dir, Now: clock.Now, Source: "rehearsal", Sink: sink, TrustClientInstrument: true,
		Logger: slog.New(warn), RedisURL: cfg.RedisURL, DatabaseURL: cfg.DatabaseURL,
		RedisPrefix: "rehearsal:" + strconv.FormatUint(cfg.Seed, 36) + ":",
		GateTimeout: 5 * time.Second, RecordTimeout: 30 * time.Second}
	var watched *watchedGate
	ecfg.WrapGate = func(g restock.Gate) restock.Gate {
		watched = &watchedGate{Gate: g, now: clock.Now}
		return watched
	}
	e, err := engine.Open(ctx, ecfg)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if cfg.RedisURL != "" {
		// The rehearsal's keys (gate, queue, limits) go when it does.
		defer func() {
			client, err := engine.OpenRedis(context.WithoutCancel(ctx), cfg.RedisURL, "")
			if err != nil {
				return
			}
			defer client.Close()
			_ = rediskeys.DeletePrefix(context.WithoutCancel(ctx), client, ecfg.RedisPrefix)
		}()
	}

	c := &procClient{e: e}
	r := newRun(cfg, c, opensAt)
	watched.run = r
	c.sku = r.sku
	sale, err := e.Control.Create(ctx, r.saleSpec())
	if err != nil {
		return nil, fmt.Errorf("create the sale: %w", err)
	}
	c.sale = sale
	defer func() { _ = e.Gate.Drop(context.WithoutCancel(ctx), sale.ID) }()
	// The rehearsal's queue goes with it, before the engine closes: an
	// in-process queue is saved at close for the next start, and saving
	// the crowd's two million places, that no one will ask for again, was
	// the run's peak of memory.
	defer func() { _ = e.Queue.Forget(context.WithoutCancel(ctx), sale.ID) }()
	if cfg.Invited > 0 {
		codes := make([]string, cfg.Invited)
		hashes := make([]string, cfg.Invited)
		for i := range codes {
			codes[i] = flashsale.NewInviteCode()
			hashes[i] = flashsale.InviteHash(codes[i])
		}
		if err := e.Background.IssueInvites(ctx, sale, hashes, "rehearsal", clock.Now()); err != nil {
			return nil, fmt.Errorf("issue the invites: %w", err)
		}
		r.invite(codes)
	}

	var quiet *quietProbe
	if cfg.Quiet {
		if quiet, err = startQuietInProcess(ctx, cfg, e, clock); err != nil {
			return nil, err
		}
	}

	d := &procDriver{run: r, e: e, clock: clock, sale: sale}
	wallStart := time.Now()
	stopProgress := r.progress(func() int64 { return d.unitsLeft.Load() }, clock.Now)
	err = d.drive(ctx, start)
	stopProgress()
	wall := time.Since(wallStart)
	if quiet != nil {
		quiet.stop()
	}
	if err != nil {
		return nil, err
	}
	rep, err := r.report(ctx, figuresOf(e, sale), wall, clock.since(start))
	if err != nil {
		return nil, err
	}
	rep.Mode = fmt.Sprintf("in process (%s gate, %s record), the engine's services called directly; time compressed: %s of sale time in %s",
		gateName(cfg), recordName(cfg), rep.SaleTime.Round(time.Second), wall.Round(100*time.Millisecond))
	rep.Compressed = true
	rep.Timeline = d.timeline
	rep.EventsPublished = sink.n.Load()
	rep.Warnings, rep.FirstWarnings = warn.n, warn.first
	if quiet != nil {
		rep.Quiet = quiet.figures()
	}
	return rep, nil
}

func gateName(cfg Config) string {
	if cfg.RedisURL != "" {
		return "Redis"
	}
	return "in-process"
}

func recordName(cfg Config) string {
	if cfg.DatabaseURL != "" {
		return "PostgreSQL"
	}
	return "SQLite"
}

// saleSpec is the sale the crowd comes for.
func (r *run) saleSpec() *flashsale.Sale {
	c := r.cfg
	s := &flashsale.Sale{SKU: r.sku, Name: "Rehearsal", InitialStock: c.Units, OpensAt: r.opensAt, ClosesAt: r.closesAt,
		HoldSeconds: int(c.Hold / time.Second), PerUserLimit: 1, Fairness: c.Fairness,
		AdmissionPerSecond: c.AdmissionPerSecond, MinAccountAgeSeconds: int(c.MinAccountAge / time.Second),
		ChallengeBits: c.ChallengeBits}
	if c.Fairness == flashsale.FairnessLottery {
		s.RegistrationClosesAt = r.regCloses
	}
	return s
}

// procDriver moves virtual time forward and takes every shopper's steps
// when they fall due, with the background services' rounds (warmer,
// drawer, pacer, sweeper, invariant, relay) run between the steps at their
// intervals.
type procDriver struct {
	*run
	e     *engine.Engine
	clock *vclock
	sale  *flashsale.Sale
	wheel wheel

	unitsLeft atomic.Int64
	warmed    atomic.Uint32 // what warm read, kept so that its reads are made
	timeline  []Point
	lastUpTo  int64
	lastAt    time.Time
}

// wheel holds the shoppers due in each slice of virtual time. Each worker
// files the shoppers it stepped in a wheel of its own, so that the workers
// file at once, without a lock, and not one after the other once they are
// done; a slot's shoppers are those of every worker's wheel.
type wheel struct {
	start  time.Time
	shards [][][]int32 // [worker][slot]
	cursor int
}

func newWheel(start time.Time, slots, workers int) wheel {
	w := wheel{start: start, shards: make([][][]int32, workers)}
	for i := range w.shards {
		w.shards[i] = make([][]int32, slots)
	}
	return w
}

func (w *wheel) slots() int { return len(w.shards[0]) }

func (w *wheel) slot(t time.Time) int {
	return max(int(t.Sub(w.start)/slice), w.cursor)
}

// add files shopper i under its step at t in worker shard's wheel; false
// when t is past the wheel's end.
func (w *wheel) add(shard int, t time.Time, i int32) bool {
	s := w.slot(t)
	if s >= w.slots() {
		return false
	}
	w.shards[shard][s] = append(w.shards[shard][s], i)
	return true
}

// due reports whether slot s has shoppers.
func (w *wheel) due(s int) bool {
	for _, sh := range w.shards {
		if len(sh[s]) > 0 {
			return true
		}
	}
	return false
}

// take appends slot s's shoppers to batch and empties the slot.
func (w *wheel) take(s int, batch []int32) []int32 {
	for _, sh := range w.shards {
		batch = append(batch, sh[s]...)
		sh[s] = nil
	}
	return batch
}

// next returns the first slot at or after the cursor with shoppers due,
// or -1.
func (w *wheel) next() int {
	for s := w.cursor; s < w.slots(); s++ {
		if w.due(s) {
			return s
		}
	}
	return -1
}

func (d *procDriver) drive(ctx context.Context, start time.Time) error {
	horizon := d.closesAt.Add(time.Minute)
	workers := d.cfg.Workers
	d.wheel = newWheel(start, int(horizon.Sub(start)/slice)+1, workers)
	for i := range d.shoppers {
		d.wheel.add(0, d.arrival(i), int32(i))
	}
	d.unitsLeft.Store(int64(d.cfg.Units))
	lastArrival := d.opensAt.Add(d.cfg.Arrival * 7 / 10)
	profiled := false
	nextPace, nextSweep, nextSample := start, start, start
	d.lastAt = start
	crowdGone := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := d.wheel.next()
		due := horizon
		if s >= 0 {
			due = d.wheel.start.Add(time.Duration(s) * slice)
		}
		bg := earliest(nextPace, nextSweep, nextSample)
		if !crowdGone && d.stats.done.Load() == int64(len(d.shoppers)) {
			crowdGone, d.crowdGone = true, d.stockNow(ctx)
		}
		if s < 0 && d.stats.done.Load() == int64(len(d.shoppers)) && d.settled(ctx) {
			return nil
		}
		if !bg.After(due) || s < 0 {
			if bg.After(horizon) {
				return nil
			}
			d.clock.set(bg)
			if !nextPace.After(bg) {
				d.paceRound(ctx)
				nextPace = bg.Add(paceEvery)
			}
			if !nextSweep.After(bg) {
				d.sweepRound(ctx)
				nextSweep = bg.Add(sweepEvery)
			}
			if !nextSample.After(bg) {
				d.sample(ctx, bg)
				nextSample = bg.Add(sampleEvery)
			}
			continue
		}
		if d.cfg.HeapProfile != nil && !profiled && due.After(lastArrival) {
			profiled = true
			runtime.GC()
			_ = pprof.WriteHeapProfile(d.cfg.HeapProfile)
		}
		// Take this slot's shoppers and, while there are few, the next
		// slots' (up to gatherFor of sale time, and never past a
		// background round): enough steps at once to keep every core
		// busy between two waits for the slowest.
		batch := d.wheel.take(s, nil)
		for last := s; len(batch) < gatherMin && last+1 < d.wheel.slots(); {
			at := d.wheel.start.Add(time.Duration(last+1) * slice)
			if at.Sub(due) >= gatherFor || !at.Before(bg) {
				break
			}
			last++
			if d.wheel.due(last) {
				batch = d.wheel.take(last, batch)
				due, s = at, last
			}
		}
		d.clock.set(due)
		d.wheel.cursor = s
		d.steps(ctx, batch, due, workers)
	}
}

// steps takes the batch's steps at now, on workers goroutines, and files
// each shopper under its next step's slot.
func (d *procDriver) steps(ctx context.Context, batch []int32, now time.Time, workers int) {
	if len(batch) < 64 {
		workers = 1
	}
	// In order of number, which is the order the shoppers arrived and
	// were given their memory: the steps walk memory forwards.
	slices.Sort(batch)
	// Workers take the batch a few steps at a time from a shared cursor,
	// not a fixed share each: a step that waits on the record (a confirm
	// queues for SQLite's one writer) then holds up only its own few, and
	// the others keep the cores busy. Each files its shoppers' next steps
	// in its own wheel.
	var (
		wg     sync.WaitGroup
		cursor atomic.Int64
	)
	const take = 32
	for w := range workers {
		work := func() {
			var warmed byte
			defer func() { d.warmed.Add(uint32(warmed)) }()
			for {
				lo := int(cursor.Add(take)) - take
				if lo >= len(batch) {
					break
				}
				chunk := batch[lo:min(lo+take, len(batch))]
				warmed ^= d.warm(chunk)
				for _, i := range chunk {
					t := d.step(ctx, int(i), now)
					if t.IsZero() {
						continue
					}
					if !t.After(now) {
						t = now.Add(slice)
					}
					if !d.wheel.add(w, t, i) {
						// Past the end of the rehearsal: still waiting when it ends.
						d.finish(&d.shoppers[i], endClosed, "")
					}
				}
			}
		}
		if workers == 1 {
			work()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); work() }()
	}
	wg.Wait()
}

// warm reads the chunk's shoppers, then their tickets, before any of their
// steps: each read misses the cache, as the step's would, but the chunk's
// misses are waited for together rather than one after another. In a crowd
// of millions the steps are otherwise a quarter memory stalls, and the
// rehearsal's own memory, not the server's.
func (d *procDriver) warm(chunk []int32) byte {
	var x byte
	for _, i := range chunk {
		x ^= byte(d.shoppers[i].phase)
	}
	for _, i := range chunk {
		if tk := d.tickets.get(d.shoppers[i].ticket); tk != "" {
			x ^= tk[0] ^ tk[len(tk)-1]
		}
	}
	return x
}

// paceRound runs the rounds that decide admissions: the warmer (loads the
// counter before the open), the drawer and the pacer.
func (d *procDriver) paceRound(ctx context.Context) {
	_ = d.e.Warmer.WarmOnce(ctx)
	_ = d.e.Drawer.DrawDue(ctx)
	_ = d.e.Pacer.TickOnce(ctx)
}

// sweepRound runs the rounds that clean up: expired holds restocked, the
// invariant checked, the outbox relayed.
func (d *procDriver) sweepRound(ctx context.Context) {
	for {
		n, err := d.e.Sweeper.SweepOnce(ctx)
		if err != nil || n == 0 {
			break
		}
	}
	_ = d.e.Watcher.CheckAll(ctx)
	if d.e.Relay != nil {
		_, _ = d.e.Relay.Drain(ctx)
	}
}

// settled reports that no hold is pending: nothing more can happen.
func (d *procDriver) settled(ctx context.Context) bool {
	t, err := d.e.Store.SaleTotals(ctx, d.sale.ID)
	return err == nil && t.Pending == 0
}

// stockNow reads the counter and the units held, or nil if it cannot.
func (d *procDriver) stockNow(ctx context.Context) *StockAt {
	t, err := d.e.Store.SaleTotals(ctx, d.sale.ID)
	if err != nil {
		return nil
	}
	snap, err := d.e.Gate.Snapshot(ctx, d.sale.ID)
	if err != nil || !snap.Loaded {
		return nil
	}
	return &StockAt{Counter: snap.Counter, Pending: t.Pending}
}

// sample adds a point to the timeline.
func (d *procDriver) sample(ctx context.Context, now time.Time) {
	snap, err := d.e.Gate.Snapshot(ctx, d.sale.ID)
	if err != nil || !snap.Loaded {
		return
	}
	upTo, _ := d.e.Queue.Admitted(ctx, d.sale.ID)
	d.unitsLeft.Store(snap.Counter)
	dt := now.Sub(d.lastAt).Seconds()
	rate := 0.0
	if dt > 0 && !now.Before(d.opensAt) {
		rate = float64(max(upTo-d.lastUpTo, 0)) / dt
	}
	d.lastUpTo, d.lastAt = upTo, now
	if now.Before(d.opensAt.Add(-time.Second)) {
		d.stats.swap()
		return
	}
	d.timeline = append(d.timeline, d.point(now, snap.Counter, snap.Won-snap.Restocked, upTo, rate, dt))
}

// watchedGate tells the run the moments the counter reaches zero and
// leaves it, exactly, from the gate's own answers.
type watchedGate struct {
	restock.Gate
	now func() time.Time
	run *run
}

func (g *watchedGate) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	out, err := g.Gate.Reserve(ctx, r)
	if err == nil && out.Verdict == flashsale.VerdictWon && g.run != nil {
		g.run.observeCounter(out.Remaining, g.now())
	}
	return out, err
}

func (g *watchedGate) Restock(ctx context.Context, saleID, reservationID, source string) (bool, error) {
	ok, err := g.Gate.Restock(ctx, saleID, reservationID, source)
	if ok && g.run != nil {
		g.run.observeCounter(1, g.now())
	}
	return ok, err
}

func (g *watchedGate) Void(ctx context.Context, saleID string, h flashsale.Hold, source string) (bool, error) {
	ok, err := g.Gate.Void(ctx, saleID, h, source)
	if ok && g.run != nil {
		g.run.observeCounter(1, g.now())
	}
	return ok, err
}

// observeCounter keeps when the counter reached zero.
func (r *run) observeCounter(counter int64, now time.Time) {
	if counter > 0 {
		r.zeroSince.Store(0)
		return
	}
	r.zeroSince.CompareAndSwap(0, now.UnixNano())
	r.lastUnit.CompareAndSwap(0, now.UnixNano())
}

// point closes the timeline's current window.
func (r *run) point(now time.Time, counter, pending, upTo int64, admitRate, dt float64) Point {
	w := r.stats.swap()
	p := Point{At: now.Sub(r.opensAt).Seconds(), UnitsLeft: counter, Pending: pending, AdmittedUpTo: upTo,
		Admissions: admitRate, Answered: r.stats.done.Load()}
	if dt > 0 {
		p.Polls = float64(w.lat[routeStatus].count()) / dt
		p.Reserves = float64(w.lat[routeReserve].count()) / dt
	}
	p.StatusP99 = ms(w.lat[routeStatus].quantile(0.99))
	p.ReserveP99 = ms(w.lat[routeReserve].quantile(0.99))
	return p
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// figuresOf reads the sale's totals from the record and the gate: the
// oversold check trusts them, not the shoppers' own count.
func figuresOf(e *engine.Engine, sale *flashsale.Sale) func(context.Context) (storeFigures, error) {
	return func(ctx context.Context) (storeFigures, error) {
		var f storeFigures
		t, err := e.Store.SaleTotals(ctx, sale.ID)
		if err != nil {
			return f, err
		}
		snap, err := e.Gate.Snapshot(ctx, sale.ID)
		if err != nil {
			return f, err
		}
		orders, err := e.Store.Orders(ctx, sale.ID)
		if err != nil {
			return f, err
		}
		f = storeFigures{Initial: int64(sale.InitialStock), Counter: snap.Counter, Pending: t.Pending,
			Confirmed: t.Confirmed, Expired: t.Expired, Cancelled: t.Cancelled, Voided: t.Voided}
		for _, o := range orders {
			if isBot(o.UserID) && o.State != flashsale.OrderCancelled {
				f.BotUnits += int64(o.Quantity)
			}
		}
		inv, err := e.Store.InviteCounts(ctx, sale.ID)
		if err != nil {
			return f, err
		}
		f.InvitesIssued, f.InvitesRedeemed, f.InvitesWon = inv.Issued, inv.Redeemed, inv.Won
		f.RecordCalls, f.BackgroundRecordCalls = e.RecordCalls()
		held, err := e.Queue.Suspects(ctx, sale.ID)
		if err != nil {
			return f, err
		}
		f.HeldKnown = true
		for user := range held {
			if isBot(user) {
				f.HeldBots++
			} else {
				f.HeldPeople++
			}
		}
		return f, nil
	}
}

var _ outbox.Sink = (*countSink)(nil)

func earliest(ts ...time.Time) time.Time {
	e := ts[0]
	for _, t := range ts[1:] {
		if t.Before(e) {
			e = t
		}
	}
	return e
}
