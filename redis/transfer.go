package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
)

// shardRead is one shard as shardStateLua read it.
type shardRead struct {
	flashsale.ShardState
	gen     int64
	xseq    int64
	total   int64
	inc     string
	pending []debit
}

// debit is a transfer debited from one shard and not yet seen credited.
type debit struct {
	id       string
	from, to int
	n, gen   int64
}

// read reads every shard of the sale, each in one step, all at once. The
// reads are not one atomic step together; cut makes them consistent. A
// shard whose Redis does not answer reads as unreachable (not loaded);
// read fails only if none answers, or a reply is malformed.
func (s *ShardedGate) read(ctx context.Context, saleID string, n int) ([]shardRead, error) {
	reads := make([]shardRead, n)
	errs := make([]error, n)
	down := make([]error, n)
	// A read-only script is retried while its node is down; a shard that
	// has not answered by then is unreachable, and the others go on.
	ctx, cancel := context.WithTimeout(ctx, shardReadTimeout)
	defer cancel()
	parallel(n, func(k int) {
		id := shardSale(saleID, k)
		kk := s.g.keys(id)
		vals, err := shardStateScript.Exec(ctx, s.g.client, []string{kk.stock, kk.meta, s.g.key(id, "xpend"), kk.legacy}, nil).ToArray()
		if err != nil {
			if _, ok := rueidis.IsRedisErr(err); ok {
				errs[k] = fail("read shard", err)
			} else {
				down[k] = err
				reads[k] = shardRead{ShardState: flashsale.ShardState{Shard: k, Unreachable: true}}
			}
			return
		}
		reads[k], errs[k] = parseShard(k, vals)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, err := range down {
		if err == nil {
			return reads, nil
		}
	}
	return nil, fail("read shards", errors.Join(down...))
}

func parseShard(k int, vals []rueidis.RedisMessage) (shardRead, error) {
	if len(vals) < 13 || len(vals)%2 == 0 {
		return shardRead{}, fmt.Errorf("redis gate: shard %d: reply of %d values", k, len(vals))
	}
	var n [12]int64
	for i := range n {
		v, err := asInt(vals[i])
		if err != nil {
			return shardRead{}, fmt.Errorf("redis gate: shard %d: value %d: %w", k, i, err)
		}
		n[i] = v
	}
	inc, _ := vals[12].ToString()
	rd := shardRead{
		ShardState: flashsale.ShardState{
			Shard: k, Loaded: n[0] == 1, Counter: n[1], Paused: n[2] == 1, Epoch: n[3], Allotment: n[4],
			Won: n[5], Restocked: n[6], AuditedCounter: n[7],
		},
		gen: n[8], xseq: n[9], total: n[10], inc: inc,
	}
	for i := 13; i+1 < len(vals); i += 2 {
		id, _ := vals[i].ToString()
		enc, _ := vals[i+1].ToString()
		f := strings.Split(enc, sep)
		if len(f) != 3 {
			return shardRead{}, fmt.Errorf("redis gate: shard %d: transfer %s: %q", k, id, enc)
		}
		to, err1 := strconv.Atoi(f[0])
		units, err2 := strconv.ParseInt(f[1], 10, 64)
		gen, err3 := strconv.ParseInt(f[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return shardRead{}, fmt.Errorf("redis gate: shard %d: transfer %s: %w", k, id, err)
		}
		rd.pending = append(rd.pending, debit{id: id, from: k, to: to, n: units, gen: gen})
		rd.Sending += units
	}
	return rd, nil
}

// shardReadTimeout bounds one read of a sale's shards.
const shardReadTimeout = time.Second

// cutAttempts bounds how often cut reads again because a transfer moved
// while it read; between attempts it waits a little longer each time (up
// to cutPause), so that a burst of transfers (shards running dry under a
// crowd) can settle rather than outrun every read.
const (
	cutAttempts = 16
	cutPause    = 4 * time.Millisecond
)

// cut reads every shard at one consistent point of the transfers between
// them, and returns the reads with the units in flight: debited and not
// credited at that point. Reserves and restocks may run meanwhile (they
// move units within a shard, each atomically); transfers are what make
// reads of different shards disagree, and each of their steps counts in
// its shard's xseq. So: read every shard, then every shard's xseq again
// (with whether it took the credits the first reads found in flight to
// it); if no xseq moved between its two reads, every shard's transfer
// state stood still over a common instant (after the last first read and
// before the first second read), and the reads are what it was then.
func (s *ShardedGate) cut(ctx context.Context, saleID string, n int) ([]shardRead, int64, error) {
	for attempt := range cutAttempts {
		if attempt > 1 {
			pause := time.Duration(rand.Int64N(int64(min(time.Duration(attempt)*time.Millisecond/2, cutPause))) + 1)
			select {
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			case <-time.After(pause):
			}
		}
		reads, err := s.read(ctx, saleID, n)
		if err != nil {
			return nil, 0, err
		}
		to := make([][]debit, n)
		for _, rd := range reads {
			for _, d := range rd.pending {
				if d.to >= 0 && d.to < n {
					to[d.to] = append(to[d.to], d)
				}
			}
		}
		errs := make([]error, n)
		vals := make([][]int64, n)
		parallel(n, func(k int) {
			if reads[k].Unreachable {
				return
			}
			id := shardSale(saleID, k)
			args := make([]string, len(to[k]))
			for i, d := range to[k] {
				args[i] = d.id
			}
			vals[k], errs[k] = xseqScript.Exec(ctx, s.g.client, []string{s.g.key(id, "meta"), s.g.key(id, "xin")}, args).AsIntSlice()
		})
		if err := errors.Join(errs...); err != nil {
			// A shard that answered the first read did not answer the
			// second: read again (it will read as unreachable).
			continue
		}
		still := true
		var inflight int64
		for k := range n {
			if reads[k].Unreachable {
				// Whether it took its credits is unknown: in flight.
				for _, d := range to[k] {
					inflight += d.n
				}
				continue
			}
			if len(vals[k]) != 1+len(to[k]) {
				return nil, 0, fmt.Errorf("redis gate: shard %d: xseq reply %v", k, vals[k])
			}
			if vals[k][0] != reads[k].xseq {
				still = false
				break
			}
			for i, d := range to[k] {
				if vals[k][1+i] == 0 {
					inflight += d.n
				}
			}
		}
		if still {
			return reads, inflight, nil
		}
	}
	return nil, 0, flashsale.Wrap(fmt.Errorf("redis gate: the shards of %s kept moving units through %d reads", saleID, cutAttempts),
		flashsale.CodeUnavailable, "The sale cannot be read right now; try again shortly.")
}

// ShardStates reads the sale's shards, each in one atomic step (not all at
// one instant). A sale of one shard reads as one ShardState whose
// Allotment is its Initial.
func (s *ShardedGate) ShardStates(ctx context.Context, saleID string) ([]flashsale.ShardState, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		snap, err := s.g.Snapshot(ctx, saleID)
		if err != nil {
			return nil, err
		}
		return []flashsale.ShardState{{Loaded: snap.Loaded, Paused: snap.Paused, Epoch: snap.Epoch, Allotment: snap.Initial,
			Counter: snap.Counter, Won: snap.Won, Restocked: snap.Restocked, AuditedCounter: snap.AuditedCounter}}, nil
	}
	reads, err := s.read(ctx, saleID, n)
	if err != nil {
		return nil, err
	}
	out := make([]flashsale.ShardState, n)
	for k, rd := range reads {
		out[k] = rd.ShardState
	}
	return out, nil
}

// pull moves units to shard k from the shards with the most, so that k
// holds at least want. It reports whether it moved any; when it did not,
// left is the units a shopper could reach, on the shards that sell, as a
// consistent read found them (within DryFor, as this process last found
// them): fewer than want means sold out for now.
func (s *ShardedGate) pull(ctx context.Context, saleID string, n, k int, want int64) (moved bool, left int64, err error) {
	s.mu.Lock()
	mark, dry := s.dry[saleID]
	s.mu.Unlock()
	if dry && time.Now().Before(mark.until) && mark.left < want {
		return false, mark.left, nil
	}
	type result struct {
		moved bool
		left  int64
	}
	// Shoppers of one shard on this process share one pull.
	v, err, _ := s.pulls.Do(saleID+"\x00"+strconv.Itoa(k), func() (any, error) {
		moved, left, err := s.pullOnce(ctx, saleID, n, k, want)
		return result{moved, left}, err
	})
	if err != nil {
		return false, 0, err
	}
	res := v.(result)
	return res.moved, res.left, nil
}

func (s *ShardedGate) pullOnce(ctx context.Context, saleID string, n, k int, want int64) (bool, int64, error) {
	var avail int64
	for range 4 {
		reads, inflight, err := s.cut(ctx, saleID, n)
		if err != nil {
			return false, 0, err
		}
		dst := reads[k]
		if !dst.Loaded || dst.Paused {
			// The reserve that retries will say why.
			return true, 0, nil
		}
		if dst.Counter >= want {
			return true, dst.Counter, nil
		}
		// What a shopper of k can reach now: the units of every shard
		// that sells (a paused, drifting or lost one gives nothing).
		avail = dst.Counter
		var donors []shardRead
		for _, rd := range reads {
			if rd.Shard != k && rd.Loaded && !rd.Paused && rd.Drift() == 0 && rd.inc == dst.inc && rd.Counter > 0 {
				donors = append(donors, rd)
				avail += rd.Counter
			}
		}
		if inflight > 0 {
			// Units on their way somewhere: land them first.
			c, err := s.settle(ctx, saleID, reads)
			if err != nil {
				return false, 0, err
			}
			if c.Landed+c.Refunded > 0 {
				continue
			}
		}
		if avail < want {
			s.mu.Lock()
			s.dry[saleID] = dryMark{until: time.Now().Add(s.dryFor), left: avail}
			s.mu.Unlock()
			return false, avail, nil
		}
		slices.SortFunc(donors, func(a, b shardRead) int { return int(b.Counter - a.Counter) })
		d := donors[0]
		// Half of the richest shard's units, or what the shopper needs:
		// a dry shard's next shoppers then find units without a transfer
		// each.
		units := min(d.Counter, max(want-dst.Counter, (d.Counter+1)/2))
		ok, err := s.transfer(ctx, saleID, d.Shard, k, units, dst.inc, "rebalance")
		if err != nil {
			return false, 0, err
		}
		if ok {
			return true, 0, nil
		}
	}
	return false, avail, nil
}

// transfer moves units from shard from to shard to: the debit, then the
// credit, then the end of the debit. It reports whether the units
// arrived. Cut off after the debit, the transfer stays in flight until
// Consolidate (or a pull) finds and finishes it.
func (s *ShardedGate) transfer(ctx context.Context, saleID string, from, to int, units int64, inc, source string) (bool, error) {
	id := "xfer_" + newToken()
	fid := shardSale(saleID, from)
	fk := s.g.keys(fid)
	vals, err := transferOutScript.Exec(ctx, s.g.client, []string{fk.stock, fk.meta, fk.audit, s.g.key(fid, "xout"), s.g.key(fid, "xpend"), fk.legacy},
		[]string{id, strconv.Itoa(to), strconv.FormatInt(units, 10), inc, source, ms(s.g.now()), s.g.maxLen}).ToArray()
	if err != nil {
		return false, fail("transfer", err)
	}
	if len(vals) != 3 {
		return false, fmt.Errorf("redis gate: transfer: reply %v", vals)
	}
	code, err1 := vals[0].AsInt64()
	gen, err2 := asInt(vals[2])
	if err := errors.Join(err1, err2); err != nil {
		return false, fmt.Errorf("redis gate: transfer: reply %v: %w", vals, err)
	}
	if code != 1 {
		return false, nil
	}
	if s.afterDebit != nil && s.afterDebit(id) {
		return false, errors.New("redis gate: transfer abandoned after its debit (test)")
	}
	state, err := s.finish(ctx, saleID, debit{id: id, from: from, to: to, n: units, gen: gen}, inc, source)
	return state == landed, err
}

// The ends of a debit in flight that finish tries for.
const (
	waiting = iota
	landed
	refunded
)

// finish credits a debit in flight to its shard and ends it there; if that
// shard refuses it for good, the units go back to the shard they left.
// Both steps are idempotent, so any number of callers may finish the same
// transfer at once.
func (s *ShardedGate) finish(ctx context.Context, saleID string, d debit, inc, source string) (int, error) {
	tid := shardSale(saleID, d.to)
	tk := s.g.keys(tid)
	code, err := transferInScript.Exec(ctx, s.g.client, []string{tk.stock, tk.meta, tk.audit, s.g.key(tid, "xin"), s.g.key(tid, "xpeer"), tk.legacy},
		[]string{d.id, strconv.Itoa(d.from), strconv.FormatInt(d.n, 10), strconv.FormatInt(d.gen, 10), inc, source,
			ms(s.g.now()), s.g.maxLen}).AsInt64()
	if err != nil {
		return waiting, fail("transfer", err)
	}
	refund, end := "0", landed
	switch code {
	case 1, 0:
	case -1:
		refund, end = "1", refunded
	default:
		return waiting, nil
	}
	fid := shardSale(saleID, d.from)
	fk := s.g.keys(fid)
	done, err := transferEndScript.Exec(ctx, s.g.client, []string{fk.stock, fk.meta, fk.audit, s.g.key(fid, "xpend"), fk.legacy},
		[]string{d.id, refund, source, ms(s.g.now()), s.g.maxLen}).AsInt64()
	if err != nil {
		return waiting, fail("transfer", err)
	}
	if done == -2 {
		return waiting, nil
	}
	return end, nil
}

// settle finishes every debit the reads found in flight. One whose shard
// does not answer waits for the next pass.
func (s *ShardedGate) settle(ctx context.Context, saleID string, reads []shardRead) (flashsale.Consolidation, error) {
	var c flashsale.Consolidation
	for _, rd := range reads {
		for _, d := range rd.pending {
			if d.to < 0 || d.to >= len(reads) {
				continue
			}
			end, err := s.finish(ctx, saleID, d, rd.inc, "consolidate")
			if err != nil {
				if _, ok := rueidis.IsRedisErr(err); ok {
					return c, err
				}
				end = waiting
			}
			switch end {
			case landed:
				c.Landed += d.n
			case refunded:
				c.Refunded += d.n
			default:
				c.Waiting += d.n
			}
		}
	}
	return c, nil
}

// Consolidate is the rebalancer's pass over a sale split over shards: it
// finishes the transfers found in flight (a process died between a debit
// and its credit), drops instrument claims whose holds are gone, sends
// half of the richest shard's units to each loaded shard that is dry,
// and lists the lost shards (which only a rebuild from the record brings
// back: see RebuildShards). After it, no unit is stranded in flight. A
// sale of one shard has nothing to consolidate.
func (s *ShardedGate) Consolidate(ctx context.Context, saleID string) (flashsale.Consolidation, error) {
	n, err := s.count(ctx, saleID)
	if err != nil || n == 1 {
		return flashsale.Consolidation{}, err
	}
	reads, err := s.read(ctx, saleID, n)
	if err != nil {
		return flashsale.Consolidation{}, err
	}
	c, err := s.settle(ctx, saleID, reads)
	if err != nil {
		return c, err
	}
	anyLoaded := false
	for _, rd := range reads {
		anyLoaded = anyLoaded || rd.Loaded
	}
	for _, rd := range reads {
		if !rd.Loaded && !rd.Unreachable && anyLoaded {
			c.Lost = append(c.Lost, rd.Shard)
		}
	}
	if err := s.dropStaleClaims(ctx, saleID, n, reads); err != nil {
		return c, err
	}
	if c.Landed+c.Refunded > 0 {
		if reads, err = s.read(ctx, saleID, n); err != nil {
			return c, err
		}
	}
	for _, dst := range reads {
		if !dst.Loaded || dst.Paused || dst.Counter > 0 {
			continue
		}
		var rich *shardRead
		for i := range reads {
			rd := &reads[i]
			if rd.Loaded && !rd.Paused && rd.Drift() == 0 && rd.inc == dst.inc && rd.Counter >= 2 && (rich == nil || rd.Counter > rich.Counter) {
				rich = rd
			}
		}
		if rich == nil {
			break
		}
		units := rich.Counter / 2
		ok, err := s.transfer(ctx, saleID, rich.Shard, dst.Shard, units, dst.inc, "consolidate")
		if err != nil {
			return c, err
		}
		if ok {
			c.Moved += units
			rich.Counter -= units
		}
	}
	return c, nil
}

// claimBatch is how many claims of each home shard one pass looks at.
const claimBatch = 256

// dropStaleClaims drops the instrument claims whose holds are gone from
// their (loaded) shard: a claim is written after its win, so a hold that
// is not there has ended, and the claim's release was cut off. Each pass
// looks at the next claimBatch claims of each home shard (HSCAN), so a
// sale with many live claims costs each pass a few round trips.
func (s *ShardedGate) dropStaleClaims(ctx context.Context, saleID string, n int, reads []shardRead) error {
	for h := range n {
		if !reads[h].Loaded {
			continue
		}
		home := s.g.key(shardSale(saleID, h), "claims")
		s.mu.Lock()
		cursor := s.claimCursors[claimCursorKey{saleID, h}]
		s.mu.Unlock()
		page, err := s.g.client.Do(ctx, s.g.client.B().Hscan().Key(home).Cursor(cursor).Count(claimBatch).Build()).AsScanEntry()
		if err != nil {
			return fail("consolidate", err)
		}
		s.mu.Lock()
		s.claimCursors[claimCursorKey{saleID, h}] = page.Cursor
		s.mu.Unlock()
		type claim struct{ fp, res string }
		byHolder := map[int][]claim{}
		for i := 0; i+1 < len(page.Elements); i += 2 {
			res, shard, ok := strings.Cut(page.Elements[i+1], sep)
			k, err := strconv.Atoi(shard)
			if !ok || err != nil || k < 0 || k >= n || !reads[k].Loaded {
				continue
			}
			byHolder[k] = append(byHolder[k], claim{page.Elements[i], res})
		}
		for k, claims := range byHolder {
			ids := make([]string, len(claims))
			for i, c := range claims {
				ids[i] = c.res
			}
			held, err := heldScript.Exec(ctx, s.g.client, []string{s.g.key(shardSale(saleID, k), "book")}, ids).AsIntSlice()
			if err != nil || len(held) != len(ids) {
				return fail("consolidate", errors.Join(err, fmt.Errorf("%d answers for %d holds", len(held), len(ids))))
			}
			for i, c := range claims {
				if held[i] == 1 {
					continue
				}
				if err := releaseScript.Exec(ctx, s.g.client, []string{home}, []string{c.fp, c.res}).Error(); err != nil {
					return fail("consolidate", err)
				}
			}
		}
	}
	return nil
}

// Rebuild replaces every shard with what the record says: each hold and
// each spent admission goes back to its user's shard, the units left are
// split evenly over the
// shards, the transfer ledgers and instrument claims are rebuilt from the
// holds, and a new incarnation makes any transfer begun before refused.
// Every shard is left loaded and paused. Errors are those of Gate.Rebuild;
// a rebuild cut short leaves the shards it did not reach not loaded (they
// sell nothing).
func (s *ShardedGate) Rebuild(ctx context.Context, saleID string, initial, epoch int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission, source string) error {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return err
	}
	if n == 1 {
		return s.g.Rebuild(ctx, saleID, initial, epoch, holds, spent, source)
	}
	all := make([]int, n)
	for k := range all {
		all[k] = k
	}
	return s.rebuild(ctx, saleID, n, all, initial, epoch, holds, spent, source)
}

// RebuildShards rebuilds the lost shards of a sale from the record while
// the others keep selling; a caller that lost them all calls Rebuild.
// Callers take epoch and holds from flashsale.SaleStore.BeginRebuild
// (every live hold of the sale, complete: holds of in-flight record writes
// are refused by the new epoch), then spent from
// flashsale.SaleStore.SpentAdmissions, and leave the sale open. Only the
// lost shards' shoppers' spends are written: the kept shards keep theirs.
//
// Step by step: each lost shard is wiped (not loaded, its transfer ledgers
// gone); each other shard refuses from now on the credits of transfers the
// lost ones debited before (their rebuild counts what they had) and moves
// to the new epoch, keeping its older admissions; the others are read at
// one consistent point of their transfers; the lost shards then share
// what is not theirs nor in flight: initial - their allotments - their
// units in flight (a transfer to a lost shard counts as in flight: it
// lands on the rebuilt shard or comes back, exactly once), each first
// taking its own holds. A shard so rebuilt is left loaded and paused: the
// caller checks the sums, then resumes it (ResumeShards).
//
// It returns an error, having wiped the lost shards, if another shard is
// not loaded too (CodeUnavailable: a later call with it among the lost
// will do) or the lost shards' holds take more than what is theirs.
func (s *ShardedGate) RebuildShards(ctx context.Context, saleID string, lost []int, initial, epoch int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission, source string) error {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return err
	}
	lost = slices.Clone(lost)
	slices.Sort(lost)
	lost = slices.Compact(lost)
	if len(lost) == 0 || lost[0] < 0 || lost[len(lost)-1] >= n {
		return fmt.Errorf("redis gate: rebuild shards %v of a sale of %d", lost, n)
	}
	if n == 1 || len(lost) == n {
		return s.Rebuild(ctx, saleID, initial, epoch, holds, spent, source)
	}
	return s.rebuild(ctx, saleID, n, lost, initial, epoch, holds, spent, source)
}

// rebuild rebuilds the shards of lost, all of the sale's or some.
func (s *ShardedGate) rebuild(ctx context.Context, saleID string, n int, lost []int, initial, epoch int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission, source string) error {
	if saleID == "" {
		return errors.New("redis gate: rebuild needs a sale id")
	}
	units, err := flashsale.ValidateHolds(holds)
	if err != nil {
		return fmt.Errorf("redis gate: rebuild %s: %w", saleID, err)
	}
	if err := flashsale.ValidateSpent(spent); err != nil {
		return fmt.Errorf("redis gate: rebuild %s: %w", saleID, err)
	}
	if units > initial {
		return fmt.Errorf("redis gate: rebuild %s: holds take %d units of %d", saleID, units, initial)
	}
	whole := len(lost) == n
	isLost := make([]bool, n)
	for _, k := range lost {
		isLost[k] = true
	}
	byShard := make([][]flashsale.Hold, n)
	held := make([]int64, n)
	claims := make([][]string, n)
	for _, h := range holds {
		k := flashsale.ShardOf(h.UserID, n)
		byShard[k] = append(byShard[k], h)
		held[k] += int64(h.Quantity)
		if h.Instrument != "" {
			home := flashsale.ShardOf(h.Instrument, n)
			claims[home] = append(claims[home], h.Instrument, h.ReservationID+sep+strconv.Itoa(k))
		}
	}
	spentByShard := make([][]flashsale.SpentAdmission, n)
	for _, sp := range spent {
		k := flashsale.ShardOf(sp.UserID, n)
		spentByShard[k] = append(spentByShard[k], sp)
	}

	var inc string
	if whole {
		// A new incarnation: a transfer begun before is refused on
		// every shard.
		if inc, err = s.layout(ctx, saleID, n, initial, newToken()); err != nil {
			return err
		}
	}
	for _, k := range lost {
		id := shardSale(saleID, k)
		err := wipeShardScript.Exec(ctx, s.g.client, []string{s.g.key(id, "meta"), s.g.key(id, "xout"), s.g.key(id, "xpend"),
			s.g.key(id, "xin"), s.g.key(id, "xpeer"), s.g.key(id, "claims")}, nil).Error()
		if err != nil {
			return fail("rebuild", err)
		}
	}

	// What the lost shards may share.
	theirs := initial
	if !whole {
		args := []string{strconv.FormatInt(epoch, 10)}
		for _, k := range lost {
			args = append(args, strconv.Itoa(k))
		}
		errs := make([]error, n)
		parallel(n, func(j int) {
			if isLost[j] {
				return
			}
			id := shardSale(saleID, j)
			errs[j] = fenceScript.Exec(ctx, s.g.client, []string{s.g.key(id, "meta"), s.g.key(id, "xpeer")}, args).Error()
		})
		if err := errors.Join(errs...); err != nil {
			return fail("rebuild", err)
		}
		reads, inflight, err := s.cut(ctx, saleID, n)
		if err != nil {
			return err
		}
		theirs -= inflight
		for _, rd := range reads {
			if isLost[rd.Shard] {
				continue
			}
			if !rd.Loaded {
				// Another shard lost meanwhile, or not answering: the
				// next pass rebuilds it with these, or finds it back.
				return flashsale.Wrap(fmt.Errorf("redis gate: rebuild shards %v of %s: shard %d is not loaded either; rebuild it with them",
					lost, saleID, rd.Shard), flashsale.CodeUnavailable, "The sale cannot be rebuilt right now; try again shortly.")
			}
			theirs -= rd.Allotment
			// The rebuilt shards keep the kept ones' incarnation, so units
			// go on moving between them; the layout (in a slot of its own,
			// which a failover may have emptied too) is set back to it.
			inc = rd.inc
		}
		if _, err := s.layout(ctx, saleID, n, initial, inc); err != nil {
			return err
		}
		// A debit of a kept shard to a lost one counts as in flight
		// above (the lost shard's credits were wiped with its ledger):
		// it lands on the rebuilt shard or goes back, exactly once. The
		// lost shards' own debits went with their ledgers, and the
		// fences refuse their credits: what they had is theirs again.
	}
	var mine int64
	for _, k := range lost {
		mine += held[k]
	}
	if theirs < mine {
		return fmt.Errorf("redis gate: rebuild shards %v of %s: their holds take %d units but only %d are theirs", lost, saleID, mine, theirs)
	}
	free := theirs - mine
	for i, k := range lost {
		share := free / int64(len(lost))
		if int64(i) < free%int64(len(lost)) {
			share++
		}
		if err := s.g.Rebuild(ctx, shardSale(saleID, k), held[k]+share, epoch, byShard[k], spentByShard[k], source); err != nil {
			return err
		}
		if err := s.fields(ctx, saleID, k, inc, epoch, initial, n, true); err != nil {
			return err
		}
		for chunk := range slices.Chunk(claims[k], 2*rebuildChunk) {
			err := claimsAddScript.Exec(ctx, s.g.client, []string{s.g.key(shardSale(saleID, k), "claims")}, chunk).Error()
			if err != nil {
				return fail("rebuild", err)
			}
		}
	}
	s.mu.Lock()
	delete(s.dry, saleID)
	s.mu.Unlock()
	return nil
}

// ResumeShards lifts the pause RebuildShards leaves on the shards it
// rebuilt.
func (s *ShardedGate) ResumeShards(ctx context.Context, saleID string, shards []int, source string) error {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return err
	}
	if n == 1 {
		return s.g.SetPaused(ctx, saleID, false, source)
	}
	for _, k := range shards {
		if k < 0 || k >= n {
			return fmt.Errorf("redis gate: shard %d of a sale of %d", k, n)
		}
		if err := s.g.SetPaused(ctx, shardSale(saleID, k), false, source); err != nil {
			return err
		}
	}
	return nil
}
