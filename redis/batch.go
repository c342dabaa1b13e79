package redis

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/flashsale/flashsale"
	"github.com/redis/rueidis"
)

// Reserves of one sale are combined: while a reserve script call of the
// sale is in flight, the reserves that arrive queue, and the call's end
// sends everything queued as one script call (reserveBatchLua decides a
// batch in order, each reserve as if it ran alone). Nothing waits for a
// batch to fill: a reserve that finds a free slot goes at once, alone, with the
// script of one reserve (reserveOneLua), as before, so a quiet sale pays
// nothing; only a crowd, which would otherwise queue inside Redis behind
// one script call per shopper, shares the calls.
//
// Once a reply shows the counter at zero, the sale's next batches go with
// reserveSoldOutLua, which reads three arguments a reserve instead of nine
// and writes nothing; it checks the counter itself and, finding units
// back, hands the batch to reserveBatchLua, so the shortcut never refuses
// a unit that is there.
//
// The combining is per process and per sale (per shard of a split sale),
// which is also per hash tag, so a batch is one script on one slot and runs
// unchanged on Redis Cluster.
const (
	// maxInFlight is how many reserve calls of one sale a Gate keeps in
	// flight at once. Two let one batch travel and be parsed while Redis
	// runs the other, and keep two concurrent shoppers from waiting on
	// each other.
	maxInFlight = 2
	// maxBatch bounds the reserves of one script call, so that one call
	// never holds Redis for long: 128 wins are about a millisecond of
	// script time on the project's machine (docs/benchmarks.md, issue 7).
	maxBatch = 128
)

// combiner queues a sale's reserves while its calls are in flight.
type combiner struct {
	mu       sync.Mutex
	inFlight int
	waiting  []*pending
	// soldOut is set when the last reply read the counter at zero or
	// below, so that the next batch goes with reserveSoldOutLua. It is a
	// hint, never a decision: that script reads the counter itself and
	// hands back a batch it finds units for.
	soldOut atomic.Bool
}

// pending is one reserve on its way through a combiner. out and err are
// set before done is signalled.
type pending struct {
	ctx context.Context
	r   flashsale.GateReserve
	out flashsale.GateOutcome
	err error
	// done receives one value when out and err are set; it is buffered, so
	// the sender never waits for a reserve whose caller stopped waiting.
	done chan struct{}
}

// pendings recycles pendings (and their channels): every reserve of a
// crowd needs one, and recycling them took about 8% off the client's CPU
// per reserve in the 50-shopper benchmarks. A pending goes back only once
// nothing else can touch it: answered, or taken out of the queue unsent.
var pendings = sync.Pool{New: func() any { return &pending{done: make(chan struct{}, 1)} }}

func newPending(ctx context.Context, r flashsale.GateReserve) *pending {
	p := pendings.Get().(*pending)
	p.ctx, p.r = ctx, r
	return p
}

func (p *pending) recycle() {
	*p = pending{done: p.done}
	pendings.Put(p)
}

// answer returns p's outcome and recycles p.
func (p *pending) answer() (flashsale.GateOutcome, error) {
	out, err := p.out, p.err
	p.recycle()
	return out, err
}

// take removes up to maxBatch of the oldest waiting reserves; c.mu is held.
func (c *combiner) take() []*pending {
	n := min(len(c.waiting), maxBatch)
	batch := c.waiting[:n:n]
	c.waiting = c.waiting[n:]
	if len(c.waiting) == 0 {
		c.waiting = nil
	}
	return batch
}

func (g *Gate) combiner(saleID string) *combiner {
	if c, ok := g.combiners.Load(saleID); ok {
		return c.(*combiner)
	}
	c, _ := g.combiners.LoadOrStore(saleID, &combiner{})
	return c.(*combiner)
}

// reserve decides r through the sale's combiner: at once if a call slot
// is free and nobody queues, else in the next batch. It returns when r is
// decided or ctx ends, whichever is first; in the second case r may or may
// not have been decided, like any call cut short.
func (g *Gate) reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	c := g.combiner(r.SaleID)
	c.mu.Lock()
	if c.inFlight < maxInFlight && len(c.waiting) == 0 {
		c.inFlight++
		c.mu.Unlock()
		p := newPending(ctx, r)
		g.decide(ctx, c, []*pending{p})
		g.release(c)
		return p.answer()
	}
	p := newPending(ctx, r)
	c.waiting = append(c.waiting, p)
	if g.queued != nil {
		g.queued(r) // under the lock, so a test sees the queue's order
	}
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.answer()
	case <-ctx.Done():
	}
	c.mu.Lock()
	i := slices.Index(c.waiting, p)
	if i >= 0 {
		// Never sent: nothing happened.
		c.waiting = slices.Delete(c.waiting, i, i+1)
	}
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.answer()
	default:
		if i >= 0 {
			p.recycle() // out of the queue unsent: nothing else holds it
		}
		// Else a batch holds p and will still answer it: p is left to
		// the garbage collector.
		return flashsale.GateOutcome{}, fail("reserve", ctx.Err())
	}
}

// release ends a caller's own call: if reserves queued meanwhile, a runner
// takes over the call slot and sends them; otherwise the slot is freed.
func (g *Gate) release(c *combiner) {
	c.mu.Lock()
	if len(c.waiting) == 0 {
		c.inFlight--
		c.mu.Unlock()
		return
	}
	batch := c.take()
	c.mu.Unlock()
	go g.run(c, batch)
}

// run sends batch after batch of queued reserves until none wait, then
// frees its call slot. It has no caller of its own to answer, so it keeps
// the slot as long as reserves queue.
func (g *Gate) run(c *combiner, batch []*pending) {
	for {
		ctx, cancel := batchContext(batch)
		g.decide(ctx, c, batch)
		cancel()
		for _, p := range batch {
			p.done <- struct{}{}
		}
		// Let the goroutines just answered, and any others ready to run,
		// queue their next reserves before the next batch is taken: a
		// yield, not a timer, so nothing waits when nothing else runs. In
		// the 50-shopper benchmarks it took 8-17% off the time per
		// decision and a fifth off the client's CPU.
		runtime.Gosched()
		c.mu.Lock()
		if len(c.waiting) == 0 {
			c.inFlight--
			c.mu.Unlock()
			return
		}
		batch = c.take()
		c.mu.Unlock()
	}
}

// batchContext bounds a batch's call by the latest deadline of its
// reserves, so that no shopper's reserve is cut short by another's
// deadline; a reserve without a deadline leaves the call to the client's
// own timeouts (Open's WriteTimeout). The call keeps the first reserve's
// values, but none of their cancellations: a shopper who stops waiting
// does not cancel the others' decisions.
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.WithoutCancel(batch[0].ctx))
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}

// decide runs one reserve script call for batch, all of one sale, and
// sets each reserve's outcome: two calls when the sale looked sold out
// but has units again. A reserve whose caller stopped waiting before the
// call is left out of it.
func (g *Gate) decide(ctx context.Context, c *combiner, batch []*pending) {
	live := batch
	if slices.ContainsFunc(batch, func(p *pending) bool { return p.ctx.Err() != nil }) {
		live = nil
		for _, p := range batch {
			if err := p.ctx.Err(); err != nil {
				p.err = fail("reserve", err)
				continue
			}
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return
	}
	if g.beforeCall != nil {
		rs := make([]flashsale.GateReserve, len(live))
		for i, p := range live {
			rs[i] = p.r
		}
		g.beforeCall(rs)
	}
	k := g.keys(live[0].r.SaleID)
	if len(live) == 1 && !g.batchAlone {
		p := live[0]
		p.out, p.err = g.decideOne(ctx, k, p)
		if p.err == nil && p.out.Verdict != flashsale.VerdictNotLoaded {
			c.soldOut.Store(p.out.Remaining <= 0)
		}
		return
	}
	if c.soldOut.Load() {
		vals, err := reserveSoldOutScript.Exec(ctx, g.client, k.reserve(), soldOutArgs(live)).ToArray()
		stockLeft := err == nil && len(vals) == 1 && isString(vals[0], "1")
		if g.afterSoldOutCall != nil {
			g.afterSoldOutCall(len(live), stockLeft)
		}
		if !stockLeft {
			answerBatch(live, vals, err, soldOutCodes)
			return
		}
		// Units came back since the last reply: decide in full.
	}
	args := g.reserveArgs(live)
	if apart(live) {
		args = append(args, "1")
	}
	vals, err := reserveBatchScript.Exec(ctx, g.client, k.reserve(), args).ToArray()
	if left, ok := answerBatch(live, vals, err, batchCodes); ok {
		c.soldOut.Store(left <= 0)
	}
}

// codeSet is a set of reserve script codes (-1 to 14).
type codeSet uint16

func codesOf(codes ...int64) codeSet {
	var s codeSet
	for _, c := range codes {
		s |= 1 << (c + 1)
	}
	return s
}

func (s codeSet) has(code int64) bool { return code >= -1 && code <= 14 && s&(1<<(code+1)) != 0 }

// The codes each batch script may answer for a reserve. Any other code,
// like any reply of the wrong shape, leaves the reserves undecided: they
// get an error, never a verdict.
var (
	batchCodes = codesOf(codeDuplicateRes, int64(flashsale.VerdictWon), codeIdemHit,
		int64(flashsale.VerdictPaused), int64(flashsale.VerdictStaleEpoch), int64(flashsale.VerdictAdmissionUsed),
		int64(flashsale.VerdictSoldOut), int64(flashsale.VerdictLimitReached))
	soldOutCodes = codesOf(codeIdemHit, int64(flashsale.VerdictPaused), int64(flashsale.VerdictStaleEpoch),
		int64(flashsale.VerdictAdmissionUsed), int64(flashsale.VerdictSoldOut))
)

// answerBatch sets the outcome of each reserve of live from a reply of
// reserveBatchLua or reserveSoldOutLua, or err, and returns the counter
// after the batch; ok is false when the reply gave no counter. allowed
// is the codes the script may answer. A reply it cannot read whole (a
// code not allowed, codes and stored holds that do not add up, anything
// but '0' alone) is an error for every reserve of the batch: a reply out
// of shape says nothing reliable about any of them.
func answerBatch(live []*pending, vals []rueidis.RedisMessage, callErr error, allowed codeSet) (left int64, ok bool) {
	var (
		epoch int64
		codes string
		err   error
	)
	switch {
	case callErr != nil:
		err = fail("reserve", callErr)
	case len(vals) == 1 && isString(vals[0], "0"):
		for _, p := range live {
			p.out = flashsale.GateOutcome{Verdict: flashsale.VerdictNotLoaded}
		}
		return 0, false
	case len(vals) == 1:
		err = fmt.Errorf("redis gate: reserve: undecided reply %v", vals)
	default:
		epoch, left, codes, err = readReply(vals, len(live), allowed)
	}
	if err != nil {
		for _, p := range live {
			p.err = err
		}
		return 0, false
	}
	holds := vals[3:]
	for i, p := range live {
		code := int64(codes[i]) - codeZero
		if code == int64(flashsale.VerdictWon) {
			left -= int64(p.r.Quantity)
		}
		var enc string
		if code == codeIdemHit {
			enc, _ = holds[0].ToString()
			holds = holds[1:]
		}
		p.out, p.err = outcome(&p.r, code, left, epoch, enc)
	}
	return left, true
}

// isString reports whether m is the string s.
func isString(m rueidis.RedisMessage, s string) bool {
	v, err := m.ToString()
	return err == nil && v == s
}

// decideOne decides a reserve that goes alone, with reserveOneLua.
func (g *Gate) decideOne(ctx context.Context, k keys, p *pending) (flashsale.GateOutcome, error) {
	vals, err := reserveOneScript.Exec(ctx, g.client, k.reserve(), g.reserveArgs([]*pending{p})).ToArray()
	if err != nil {
		return flashsale.GateOutcome{}, fail("reserve", err)
	}
	return oneOutcome(&p.r, vals)
}

// oneOutcome reads a reply of reserveOneLua.
func oneOutcome(r *flashsale.GateReserve, vals []rueidis.RedisMessage) (flashsale.GateOutcome, error) {
	if len(vals) < 3 {
		return flashsale.GateOutcome{}, fmt.Errorf("redis gate: reserve: short reply %v", vals)
	}
	code, err := vals[0].AsInt64()
	var remaining, epoch int64
	if err == nil {
		remaining, err = vals[1].AsInt64()
	}
	if err == nil {
		epoch, err = asInt(vals[2])
	}
	var stored string
	if err == nil && code == codeIdemHit {
		if len(vals) < 4 {
			return flashsale.GateOutcome{}, fmt.Errorf("redis gate: reserve: short reply %v", vals)
		}
		stored, err = vals[3].ToString()
	}
	if err != nil {
		return flashsale.GateOutcome{}, fmt.Errorf("redis gate: reserve: reply %v: %w", vals, err)
	}
	return outcome(r, code, remaining, epoch, stored)
}

// readReply reads the head of a batch script's reply for n reserves: the
// epoch, the counter before the batch and the codes, each one of allowed,
// followed by exactly one stored hold per code for a key on record.
func readReply(vals []rueidis.RedisMessage, n int, allowed codeSet) (epoch, left int64, codes string, err error) {
	if len(vals) < 3 {
		return 0, 0, "", fmt.Errorf("redis gate: reserve: short reply %v", vals)
	}
	epoch, err = asInt(vals[0])
	if err == nil {
		left, err = vals[1].AsInt64()
	}
	if err == nil {
		codes, err = vals[2].ToString()
	}
	if err == nil && len(codes) != n {
		err = fmt.Errorf("%d codes for %d reserves", len(codes), n)
	}
	hits := 0
	for i := 0; err == nil && i < len(codes); i++ {
		code := int64(codes[i]) - codeZero
		if !allowed.has(code) {
			err = fmt.Errorf("code %d for reserve %d", code, i)
		}
		if code == codeIdemHit {
			hits++
		}
	}
	if err == nil && len(vals)-3 != hits {
		err = fmt.Errorf("%d stored holds for %d keys on record", len(vals)-3, hits)
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("redis gate: reserve: reply %v: %w", vals, err)
	}
	return epoch, left, codes, nil
}

// reserveArgs returns the reserve scripts' ARGV for batch. The fields are
// written into one buffer and cut from it without a copy (see cut), so a
// batch costs a few allocations rather than several per reserve.
func (g *Gate) reserveArgs(batch []*pending) []string {
	buf := make([]byte, 0, 256*len(batch))
	ends := make([]int, 0, reserveFields*len(batch))
	field := func() { ends = append(ends, len(buf)) }
	for _, p := range batch {
		r := &p.r
		buf = append(buf, r.ReservationID...)
		field()
		buf = append(append(buf, fieldUser...), r.UserID...)
		field()
		buf = strconv.AppendInt(buf, int64(r.Quantity), 10)
		field()
		buf = appendField(buf, fieldInstrument, r.Instrument)
		field()
		buf = appendField(buf, fieldAdmission, r.AdmissionID)
		field()
		buf = strconv.AppendInt(buf, r.Epoch, 10)
		field()
		buf = append(append(append(append(buf, fieldKey...), r.UserID...), sep...), r.IdempotencyKey...) // idemField
		field()
		h := holdOf(r)
		buf = appendHold(buf, &h)
		field()
		buf = strconv.AppendInt(buf, r.Now.UnixMilli(), 10)
		field()
	}
	args := make([]string, 1, 1+len(ends))
	args[0] = g.maxLen
	return cut(args, buf, ends)
}

// apart reports whether no two reserves of batch share a reservation id,
// a shopper, an idempotency key, a card or an admission. Then none of them
// can meet a win earlier in the batch, which reserveBatchLua need not look
// for: a few table writes and reads a reserve, in Redis's one thread, for
// a map here.
func apart(batch []*pending) bool {
	type field struct {
		kind byte
		a, b string
	}
	seen := make(map[field]struct{}, 5*len(batch))
	add := func(f field) bool {
		if _, dup := seen[f]; dup {
			return false
		}
		seen[f] = struct{}{}
		return true
	}
	for _, p := range batch {
		r := &p.r
		if !add(field{'r', r.ReservationID, ""}) || !add(field{'u', r.UserID, ""}) ||
			!add(field{'k', r.UserID, r.IdempotencyKey}) ||
			(r.Instrument != "" && !add(field{'c', r.Instrument, ""})) ||
			(r.AdmissionID != "" && !add(field{'a', r.AdmissionID, ""})) {
			return false
		}
	}
	return true
}

// soldOutArgs returns reserveSoldOutLua's ARGV for batch, built as
// reserveArgs builds its own.
func soldOutArgs(batch []*pending) []string {
	buf := make([]byte, 0, 96*len(batch))
	ends := make([]int, 0, soldOutFields*len(batch))
	for _, p := range batch {
		r := &p.r
		buf = append(append(append(append(buf, fieldKey...), r.UserID...), sep...), r.IdempotencyKey...) // idemField
		ends = append(ends, len(buf))
		buf = strconv.AppendInt(buf, r.Epoch, 10)
		ends = append(ends, len(buf))
		buf = appendField(buf, fieldAdmission, r.AdmissionID)
		ends = append(ends, len(buf))
	}
	return cut(make([]string, 0, len(ends)), buf, ends)
}

// appendField appends bookField(kind, id) to buf.
func appendField(buf []byte, kind, id string) []byte {
	if id == "" {
		return buf
	}
	return append(append(buf, kind...), id...)
}

// cut appends to args the fields of buf that end at ends, as strings
// that share buf's memory rather than a copy of it. buf must be a buffer
// of the call's own, never written again: rueidis may read the arguments
// after the call returns (a call cut short by its context leaves its
// command queued, to be written later), so a buffer reused for the next
// batch could send that command with the next batch's bytes. An
// unwritten buffer is safe for as long as any string points into it,
// which is as long as the garbage collector keeps it.
func cut(args []string, buf []byte, ends []int) []string {
	all := unsafe.String(unsafe.SliceData(buf), len(buf))
	start := 0
	for _, end := range ends {
		args = append(args, all[start:end])
		start = end
	}
	return args
}
