package redis

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
)

// ShardedGate is the stock gate for sales whose counter is split over
// shards (flashsale.Sale.Shards; see flashsale.ShardOf for the routing and
// the invariant). It implements flashsale.GateAdmin, and is safe for
// concurrent use by multiple goroutines and by many processes sharing the
// Redis (or Redis Cluster).
//
// A sale of one shard is the plain Gate's sale, keys and all: the
// ShardedGate adds nothing to it. Shard k of a sale of several is the plain
// Gate's sale "saleID:k", so its keys carry the hash tag {saleID:k} and the
// cluster spreads the shards over its masters; every script still touches
// one shard's keys only. The sale's layout (shard count, stock, the
// incarnation that stamps its transfers) is kept under {saleID}.
//
// What differs from an unsplit gate, on the GateAdmin methods:
//
//   - Reserve routes the shopper to one shard. If that shard has fewer
//     units than asked while others have more, it pulls units over by a
//     transfer and asks again, so that sold out means the whole sale is
//     sold out, as far as one consistent read of the shards can tell.
//     Remaining is the shard's count, or, once the shard is empty, the
//     sale's. A shard that is lost (not loaded, or its master failed over)
//     while others sell answers VerdictPaused to its shoppers, who are told
//     to come back (503 sale_paused with Retry-After): they cannot be sent
//     elsewhere, since their holds, keys and spent admissions are there.
//     Only when no shard is loaded does Reserve answer VerdictNotLoaded.
//   - Snapshot sums the shards at one consistent point of the transfers
//     between them, and reports Shards, Unloaded, InFlight and ShardDrift.
//   - Audit merges the shards' logs by time, each entry with its Shard.
//
// Rebuild rebuilds every shard from the record; RebuildShards rebuilds
// only lost ones while the others keep selling; Consolidate finishes the
// transfers a dead process left in flight and levels dry shards.
type ShardedGate struct {
	g      *Gate
	shards func(ctx context.Context, saleID string) (int, error)
	lost   func(saleID string, shard int)
	dryFor time.Duration

	counts sync.Map // sale id → int
	pulls  singleflight.Group

	mu  sync.Mutex
	dry map[string]dryMark
	// claimCursors is where Consolidate's scan of each home shard's
	// instrument claims goes on from.
	claimCursors map[claimCursorKey]uint64

	// afterDebit, when set by a test, runs between a transfer's debit and
	// its credit; returning true abandons the transfer there, as a
	// process that died between its two steps would.
	afterDebit func(transferID string) bool
}

type claimCursorKey struct {
	sale  string
	shard int
}

// dryMark remembers that a consistent read found no shard of a sale with
// units to give.
type dryMark struct {
	until time.Time
	left  int64
}

var _ flashsale.GateAdmin = (*ShardedGate)(nil)

// DefaultDryFor is how long a ShardedGate, having found every shard of a
// sale empty, answers sold out from memory before it looks again.
const DefaultDryFor = 100 * time.Millisecond

// ShardedConfig configures a ShardedGate.
type ShardedConfig struct {
	Config
	// Shards returns how many shards the sale's counter is split over
	// (its Sale.Shards); required. It is asked once per sale and process
	// and the answer kept, since a sale's shards never change. An error
	// wrapping flashsale.ErrNotFound means one shard and is not kept.
	Shards func(ctx context.Context, saleID string) (int, error)
	// Lost, when set, is told that a shard of a sale was found lost
	// (see flashsale.ShardState.Loaded) while others sell: the cue for
	// whoever rebuilds lost shards. It must not block.
	Lost func(saleID string, shard int)
	// DryFor is how long a sale found sold out on every shard is answered
	// sold out from memory by this process (default DefaultDryFor): the
	// sold-out branch is the one nearly every shopper takes, and must not
	// read every shard each time. A restock through this process ends it
	// at once.
	DryFor time.Duration
}

// NewSharded returns a sharded gate on cfg.Client. It panics where New
// does, and if cfg.Shards is nil.
func NewSharded(cfg ShardedConfig) *ShardedGate {
	if cfg.Shards == nil {
		panic("redis gate: ShardedConfig.Shards is required")
	}
	s := &ShardedGate{g: New(cfg.Config), shards: cfg.Shards, lost: cfg.Lost, dryFor: cfg.DryFor,
		dry: make(map[string]dryMark), claimCursors: make(map[claimCursorKey]uint64)}
	if s.dryFor <= 0 {
		s.dryFor = DefaultDryFor
	}
	if s.lost == nil {
		s.lost = func(string, int) {}
	}
	return s
}

// Plain returns the plain gate the shards are sales of.
func (s *ShardedGate) Plain() *Gate { return s.g }

// StockKey returns the key of the counter of a sale of one shard (see
// Gate.StockKey); ShardStockKey names each shard's of a sale of several.
func (s *ShardedGate) StockKey(saleID string) string { return s.g.StockKey(saleID) }

// ShardStockKey returns the key of shard k's counter of a sale of several
// shards: a plain integer an operator can read with redis-cli GET.
func (s *ShardedGate) ShardStockKey(saleID string, k int) string {
	return s.g.StockKey(shardSale(saleID, k))
}

// shardSale is the plain gate's sale id of shard k.
func shardSale(saleID string, k int) string { return saleID + ":" + strconv.Itoa(k) }

// count returns the sale's shard count.
func (s *ShardedGate) count(ctx context.Context, saleID string) (int, error) {
	if v, ok := s.counts.Load(saleID); ok {
		return v.(int), nil
	}
	n, err := s.shards(ctx, saleID)
	switch {
	case errors.Is(err, flashsale.ErrNotFound):
		return 1, nil
	case err != nil:
		return 0, flashsale.Wrap(fmt.Errorf("redis gate: the shards of %s: %w", saleID, err), flashsale.CodeUnavailable,
			"The sale cannot take reservations right now; try again shortly.")
	case n < 1:
		n = 1
	case n > flashsale.MaxShards:
		return 0, fmt.Errorf("redis gate: sale %s has %d shards; at most %d", saleID, n, flashsale.MaxShards)
	}
	s.counts.Store(saleID, n)
	return n, nil
}

// Reserve decides a reserve on the shopper's shard; see ShardedGate for
// what differs from an unsplit gate. Errors are those of Gate.Reserve.
func (s *ShardedGate) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	n, err := s.count(ctx, r.SaleID)
	if err != nil || n == 1 {
		if err != nil {
			return flashsale.GateOutcome{}, err
		}
		return s.g.Reserve(ctx, r)
	}
	if err := r.Validate(); err != nil {
		err = fmt.Errorf("redis gate: %w", err)
		return flashsale.GateOutcome{}, err
	}
	sale, k := r.SaleID, flashsale.ShardOf(r.UserID, n)
	sr := r
	sr.SaleID = shardSale(sale, k)
	// Each round either moves units to the shard or learns that none are
	// left anywhere; someone else taking them first ends a round too, so
	// the bound is only against a pathological churn.
	const rounds = 16
	for round := 0; ; round++ {
		out, err := s.g.Reserve(ctx, sr)
		if err != nil {
			return s.shardDown(ctx, sale, n, k, out, err)
		}
		switch out.Verdict {
		case flashsale.VerdictWon:
			return s.won(ctx, r, n, k, out)
		case flashsale.VerdictNotLoaded:
			return s.notLoaded(ctx, sale, n, k)
		case flashsale.VerdictSoldOut:
			if round == rounds {
				return out, nil
			}
			moved, left, err := s.pull(ctx, sale, n, k, int64(r.Quantity))
			if err != nil {
				return s.shardDown(ctx, sale, n, k, flashsale.GateOutcome{}, err)
			}
			if !moved && left < int64(r.Quantity) {
				out.Remaining = left
				return out, nil
			}
		default:
			return out, nil
		}
	}
}

// won finishes a win: the instrument's claim on its home shard, and the
// sale's units left when the shard gave its last.
func (s *ShardedGate) won(ctx context.Context, r flashsale.GateReserve, n, k int, out flashsale.GateOutcome) (flashsale.GateOutcome, error) {
	sale := r.SaleID
	if r.Instrument != "" {
		home := flashsale.ShardOf(r.Instrument, n)
		hk := s.g.keys(shardSale(sale, home))
		code, err := claimScript.Exec(ctx, s.g.client, []string{hk.stock, hk.meta, s.g.key(shardSale(sale, home), "claims"), hk.legacy},
			[]string{r.Instrument, r.ReservationID, strconv.Itoa(k)}).AsInt64()
		// An unanswered claim, or a home shard being rebuilt, leaves the
		// win standing: the record's unique index on the instrument's live
		// reservation still holds the limit.
		if err == nil && code == 0 {
			if _, err := s.g.Void(ctx, shardSale(sale, k), out.Hold, "instrument-claim"); err != nil {
				return flashsale.GateOutcome{}, err
			}
			return flashsale.GateOutcome{Verdict: flashsale.VerdictLimitReached, Remaining: out.Remaining + int64(r.Quantity), Epoch: out.Epoch}, nil
		}
	}
	if out.Remaining == 0 {
		reads, inflight, err := s.cut(ctx, sale, n)
		if err == nil {
			out.Remaining = inflight
			for _, rd := range reads {
				if rd.Loaded {
					out.Remaining += rd.Counter
				}
			}
		}
	}
	return out, nil
}

// shardDown answers a shopper whose shard did not answer: paused, if
// another shard answers, since that shard alone cannot sell (its master is
// down or failing over) and the others need not stop; else the error, and
// the caller fails the whole sale closed. The other shards are asked with
// a deadline of their own, as the caller's may be spent by now.
func (s *ShardedGate) shardDown(ctx context.Context, sale string, n, k int, out flashsale.GateOutcome, cause error) (flashsale.GateOutcome, error) {
	if _, ok := rueidis.IsRedisErr(cause); ok || flashsale.ErrorCode(cause) != flashsale.CodeUnavailable {
		return out, cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), otherShardsTimeout)
	defer cancel()
	reads, err := s.read(ctx, sale, n)
	if err != nil {
		return out, cause
	}
	paused := flashsale.GateOutcome{Verdict: flashsale.VerdictPaused}
	for _, rd := range reads {
		if rd.Loaded {
			paused.Epoch = max(paused.Epoch, rd.Epoch)
		}
	}
	if paused.Epoch == 0 {
		return out, cause
	}
	return paused, nil
}

// otherShardsTimeout bounds the look at the other shards when one does
// not answer.
const otherShardsTimeout = 250 * time.Millisecond

// notLoaded answers a shopper whose shard is lost: paused while another
// shard is loaded (the shard is rebuilt meanwhile), not loaded otherwise.
func (s *ShardedGate) notLoaded(ctx context.Context, sale string, n, k int) (flashsale.GateOutcome, error) {
	reads, err := s.read(ctx, sale, n)
	if err != nil {
		return flashsale.GateOutcome{}, err
	}
	out := flashsale.GateOutcome{Verdict: flashsale.VerdictNotLoaded}
	for _, rd := range reads {
		if rd.Loaded {
			out.Verdict, out.Epoch = flashsale.VerdictPaused, max(out.Epoch, rd.Epoch)
		}
	}
	if out.Verdict == flashsale.VerdictPaused {
		s.lost(sale, k)
	}
	return out, nil
}

// Lookup returns the hold under the shopper's idempotency key, from the
// shopper's shard.
func (s *ShardedGate) Lookup(ctx context.Context, saleID, userID, key string) (flashsale.Hold, bool, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return flashsale.Hold{}, false, err
	}
	if n == 1 {
		return s.g.Lookup(ctx, saleID, userID, key)
	}
	h, found, err := s.g.Lookup(ctx, shardSale(saleID, flashsale.ShardOf(userID, n)), userID, key)
	if err != nil {
		// The shopper's shard does not answer. Not found lets the
		// reserve go on to the shard, where the same key is looked up
		// again inside the reserve's own script: Reserve answers paused
		// while the shard is down, and fails the sale only if every
		// shard is.
		if out, err := s.shardDown(ctx, saleID, n, flashsale.ShardOf(userID, n), flashsale.GateOutcome{}, err); err == nil &&
			out.Verdict == flashsale.VerdictPaused {
			return flashsale.Hold{}, false, nil
		}
		return flashsale.Hold{}, false, err
	}
	return h, found, nil
}

// Restock returns a hold's units to the shard that holds them, once, and
// drops its instrument's claim. It returns flashsale.ErrNotLoaded if no
// loaded shard holds it while some shard is lost: that shard's rebuild
// will account for it.
func (s *ShardedGate) Restock(ctx context.Context, saleID, reservationID, source string) (bool, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return s.g.Restock(ctx, saleID, reservationID, source)
	}
	// The holds name no user, so every shard is asked which holds it.
	found := make([]string, n)
	errs := make([]error, n)
	parallel(n, func(k int) {
		found[k], errs[k] = s.g.client.Do(ctx, s.g.client.B().Hget().Key(s.g.key(shardSale(saleID, k), "book")).
			Field(reservationID).Build()).ToString()
		if rueidis.IsRedisNil(errs[k]) {
			errs[k] = nil
		}
	})
	for k := range n {
		if found[k] == "" {
			continue
		}
		moved, err := s.g.Restock(ctx, shardSale(saleID, k), reservationID, source)
		if err != nil {
			return false, err
		}
		if moved {
			s.gaveBack(ctx, saleID, n, found[k])
		}
		return moved, nil
	}
	if err := errors.Join(errs...); err != nil {
		// The shard that holds it may be the one that did not answer.
		return false, fail("restock", err)
	}
	reads, err := s.read(ctx, saleID, n)
	if err != nil {
		return false, err
	}
	for _, rd := range reads {
		if !rd.Loaded {
			return false, flashsale.ErrNotLoaded
		}
	}
	return false, nil
}

// Void is Restock for a hold the record never acknowledged, on the
// shopper's shard (see Gate.Void); it also drops the instrument's claim if
// the claim names the hold.
func (s *ShardedGate) Void(ctx context.Context, saleID string, h flashsale.Hold, source string) (bool, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return s.g.Void(ctx, saleID, h, source)
	}
	moved, err := s.g.Void(ctx, shardSale(saleID, flashsale.ShardOf(h.UserID, n)), h, source)
	if err != nil {
		return false, err
	}
	s.gaveBack(ctx, saleID, n, encodeHold(h))
	return moved, nil
}

// gaveBack follows units back to a shard: the instrument's claim goes (if
// it names the hold) and this process stops believing the sale dry. A
// claim that cannot be dropped now is dropped by Consolidate.
func (s *ShardedGate) gaveBack(ctx context.Context, saleID string, n int, encoded string) {
	s.mu.Lock()
	delete(s.dry, saleID)
	s.mu.Unlock()
	h, err := decodeHold(encoded)
	if err != nil || h.Instrument == "" {
		return
	}
	home := shardSale(saleID, flashsale.ShardOf(h.Instrument, n))
	_ = releaseScript.Exec(ctx, s.g.client, []string{s.g.key(home, "claims")}, []string{h.Instrument, h.ReservationID}).Error()
}

// Load loads every shard of the sale that is not loaded, each with its
// share of initial (the first initial mod shards shards one unit more),
// and reports whether it loaded any. See Gate.Load for what is never
// reloaded.
func (s *ShardedGate) Load(ctx context.Context, saleID string, initial, epoch int64, source string) (bool, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return s.g.Load(ctx, saleID, initial, epoch, source)
	}
	if saleID == "" || initial < 0 {
		return false, fmt.Errorf("redis gate: load %q with %d units: need a sale id and initial >= 0", saleID, initial)
	}
	inc, err := s.layout(ctx, saleID, n, initial, "")
	if err != nil {
		return false, err
	}
	any := false
	for k := range n {
		share := initial / int64(n)
		if int64(k) < initial%int64(n) {
			share++
		}
		loaded, err := s.g.Load(ctx, shardSale(saleID, k), share, epoch, source)
		if err != nil {
			return false, err
		}
		any = any || loaded
		// Fields missing from a shard whose load was cut short are filled
		// in; those of a loaded shard stay.
		if err := s.fields(ctx, saleID, k, inc, epoch, initial, n, false); err != nil {
			return false, err
		}
	}
	return any, nil
}

// layout returns the sale's incarnation, writing the layout first if it
// is missing (or, with inc set, replacing it).
func (s *ShardedGate) layout(ctx context.Context, saleID string, n int, total int64, inc string) (string, error) {
	key := s.g.key(saleID, "layout")
	if inc != "" {
		err := s.g.client.Do(ctx, s.g.client.B().Hset().Key(key).FieldValue().FieldValue("inc", inc).
			FieldValue("shards", strconv.Itoa(n)).FieldValue("total", strconv.FormatInt(total, 10)).Build()).Error()
		if err != nil {
			return "", fail("layout", err)
		}
		return inc, nil
	}
	fresh := newToken()
	for _, f := range [][2]string{{"inc", fresh}, {"shards", strconv.Itoa(n)}, {"total", strconv.FormatInt(total, 10)}} {
		if err := s.g.client.Do(ctx, s.g.client.B().Hsetnx().Key(key).Field(f[0]).Value(f[1]).Build()).Error(); err != nil {
			return "", fail("layout", err)
		}
	}
	got, err := s.g.client.Do(ctx, s.g.client.B().Hget().Key(key).Field("inc").Build()).ToString()
	if err != nil {
		return "", fail("layout", err)
	}
	return got, nil
}

// fields writes a shard's sale-wide fields (see shardscripts.go).
func (s *ShardedGate) fields(ctx context.Context, saleID string, k int, inc string, gen, total int64, n int, overwrite bool) error {
	flag := "0"
	if overwrite {
		flag = "1"
	}
	err := shardFieldsScript.Exec(ctx, s.g.client, []string{s.g.key(shardSale(saleID, k), "meta")},
		[]string{inc, strconv.FormatInt(gen, 10), strconv.FormatInt(total, 10), strconv.Itoa(n), flag}).Error()
	if err != nil {
		return fail("load", err)
	}
	return nil
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Snapshot reads every shard at one consistent point of the transfers
// between them and sums them (see flashsale.GateSnapshot). A sale with no
// loaded shard reads as the zero snapshot. It returns an error if the
// shards kept moving units between them through several attempts.
func (s *ShardedGate) Snapshot(ctx context.Context, saleID string) (flashsale.GateSnapshot, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return flashsale.GateSnapshot{}, err
	}
	if n == 1 {
		return s.g.Snapshot(ctx, saleID)
	}
	reads, inflight, err := s.cut(ctx, saleID, n)
	if err != nil {
		return flashsale.GateSnapshot{}, err
	}
	snap := flashsale.GateSnapshot{Shards: n, InFlight: inflight, Paused: true}
	for _, rd := range reads {
		if !rd.Loaded {
			snap.Unloaded++
			continue
		}
		snap.Loaded = true
		snap.Paused = snap.Paused && rd.Paused
		snap.Epoch = max(snap.Epoch, rd.Epoch)
		snap.Initial = rd.total
		snap.Counter += rd.Counter
		snap.Won += rd.Won
		snap.Restocked += rd.Restocked
		snap.AuditedCounter += rd.AuditedCounter
		snap.ShardDrift += abs(rd.Drift()) + abs(rd.Counter-rd.AuditedCounter)
	}
	if !snap.Loaded {
		return flashsale.GateSnapshot{}, nil
	}
	snap.Counter += inflight
	snap.AuditedCounter += inflight
	return snap, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Holds lists the holds of every shard, ordered by reservation id.
func (s *ShardedGate) Holds(ctx context.Context, saleID string) ([]flashsale.Hold, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return s.g.Holds(ctx, saleID)
	}
	var out []flashsale.Hold
	for k := range n {
		hs, err := s.g.Holds(ctx, shardSale(saleID, k))
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	slices.SortFunc(out, func(a, b flashsale.Hold) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	return out, nil
}

// SetPaused pauses or resumes every shard (see Gate.SetPaused).
func (s *ShardedGate) SetPaused(ctx context.Context, saleID string, paused bool, source string) error {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return err
	}
	if n == 1 {
		return s.g.SetPaused(ctx, saleID, paused, source)
	}
	errs := make([]error, n)
	parallel(n, func(k int) { errs[k] = s.g.SetPaused(ctx, shardSale(saleID, k), paused, source) })
	return errors.Join(errs...)
}

// Audit returns up to limit of the newest entries of all shards, oldest
// first, ordered by time (then shard, then each shard's sequence).
func (s *ShardedGate) Audit(ctx context.Context, saleID string, limit int) ([]flashsale.AuditEntry, error) {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return s.g.Audit(ctx, saleID, limit)
	}
	var out []flashsale.AuditEntry
	for k := range n {
		es, err := s.g.Audit(ctx, shardSale(saleID, k), limit)
		if err != nil {
			return nil, err
		}
		for i := range es {
			es[i].Shard = k
		}
		out = append(out, es...)
	}
	slices.SortStableFunc(out, func(a, b flashsale.AuditEntry) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.Seq, b.Seq))
	})
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// Drop forgets every shard of the sale and its layout.
func (s *ShardedGate) Drop(ctx context.Context, saleID string) error {
	n, err := s.count(ctx, saleID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.dry, saleID)
	s.mu.Unlock()
	if n == 1 {
		return s.g.Drop(ctx, saleID)
	}
	for k := range n {
		id := shardSale(saleID, k)
		if err := s.g.Drop(ctx, id); err != nil {
			return err
		}
		keys := []string{s.g.key(id, "xout"), s.g.key(id, "xpend"), s.g.key(id, "xin"), s.g.key(id, "xpeer"), s.g.key(id, "claims")}
		if err := s.g.client.Do(ctx, s.g.client.B().Unlink().Key(keys...).Build()).Error(); err != nil {
			return fail("drop", err)
		}
	}
	if err := s.g.client.Do(ctx, s.g.client.B().Unlink().Key(s.g.key(saleID, "layout")).Build()).Error(); err != nil {
		return fail("drop", err)
	}
	return nil
}

// Ping reports whether Redis answers.
func (s *ShardedGate) Ping(ctx context.Context) error { return s.g.Ping(ctx) }

// parallel runs fn(i) for i in [0, n) on goroutines of their own and waits
// for them: each call is one round trip, and rueidis pipelines them.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}
