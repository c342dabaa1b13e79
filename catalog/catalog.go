// Package catalog keeps the sales the funnel reads on every request in
// memory, refreshed from the record at most every TTL, so that a request the
// funnel rejects costs no record statement.
//
// With several servers on one record, a change made through one server
// reaches the others' catalogs when they are told of it (Refresh, which
// the engine calls for each notification PostgreSQL delivers, see
// postgres.SaleListener), and in any case within the TTL (a sale cached)
// or the listing's age (a SKU never seen).
//
// Overselling is neither prevented nor caused here: a stale sale in the
// cache never sells a unit the gate (packages memory and redis) does not
// have.
package catalog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/logsample"
	"github.com/flashsale/flashsale/internal/tally"
)

// DefaultTTL is how stale a cached sale may be. A pause made by this process
// is seen at once (Put); one made by another process as soon as its
// notification arrives (Refresh), or within DefaultTTL if it never does,
// and the gate's own paused flag stops reserves meanwhile.
const DefaultTTL = 250 * time.Millisecond

// Catalog is a read-through cache of sales by SKU. Safe for concurrent use.
type Catalog struct {
	store flashsale.SaleStore
	// reader is what Refresh and Relist read (Config.Reader).
	reader flashsale.SaleStore
	ttl    time.Duration
	now    func() time.Time
	logger *slog.Logger

	// bySKU is read by every request without a lock; mu orders the
	// writes.
	mu    sync.Mutex
	bySKU sync.Map // SKU → entry
	group singleflight.Group
	// gen counts the changes to bySKU (written under mu), so that a cache
	// built on top of this one can tell, with one atomic read instead of a
	// lookup, that nothing it used has changed.
	gen atomic.Uint64
	// absent counts the entries of SKUs without a sale, and pruneAt is
	// the count at which put drops those older than the TTL (under mu):
	// anyone may ask for any SKU, and without it every one asked would be
	// kept for good.
	absent, pruneAt int
	// listed is the SKUs of every sale, from the last read of them all
	// (Active, which the background services call every round).
	listed atomic.Pointer[listing]
	// seq orders the reads of the record: each fill, Refresh and Put
	// takes the next number before it reads (or, for Put, after the
	// write it reports committed), and an entry is never replaced by one
	// of a lower number, so a read that began before a change cannot
	// undo what a read begun after it found. floor is the number below
	// which nothing is cached any more (Relist).
	seq, floor atomic.Uint64
}

// listing is the SKUs of every sale in the record, as one read of them
// all found them, and when that read began.
type listing struct {
	skus map[string]struct{}
	at   time.Time
}

// ListingFresh is how long a listing of every sale answers for a SKU
// that is not in it: a SKU this process has never seen, missing from a
// listing younger than this, has no sale, and is answered so without a
// lookup. Anyone may ask for any SKU, and each lookup takes a connection
// of the background pool the sweeper and the invariant watcher need. A
// sale created by another server is found as soon as its notification
// arrives (Refresh), and without one once the next round lists it (every
// second, with the warmer's default interval).
const ListingFresh = 2 * time.Second

// minPrune is the fewest entries of absent SKUs worth a pruning pass.
const minPrune = 1024

type entry struct {
	sale    *flashsale.Sale // nil: the SKU has no sale
	fetched time.Time
	// seq is the number its read took (Catalog.seq).
	seq uint64
}

// Config configures a Catalog. Zero fields take defaults.
type Config struct {
	TTL    time.Duration
	Now    func() time.Time
	Logger *slog.Logger
	// Reader, when set, is the record Refresh and Relist read from, apart
	// from the store BySKU and Active read: a connection of their own, so
	// that news of a change made elsewhere never waits for one behind the
	// background work. Default: the store.
	Reader flashsale.SaleStore
}

// New returns a Catalog over store.
func New(store flashsale.SaleStore, cfg Config) *Catalog {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Reader == nil {
		cfg.Reader = store
	}
	return &Catalog{store: store, reader: cfg.Reader, ttl: cfg.TTL, now: cfg.Now, logger: cfg.Logger, pruneAt: minPrune}
}

// BySKU returns the SKU's sale, from memory when it is fresh enough. The
// returned sale is shared: callers must not modify it. It returns
// flashsale.ErrNotFound for a SKU without a sale. If the record cannot be
// read, the last known sale is served and the error logged, so that a
// record outage does not take the waiting room down with it.
func (c *Catalog) BySKU(ctx context.Context, sku string) (*flashsale.Sale, error) {
	now := c.now()
	var e entry
	v, ok := c.bySKU.Load(sku)
	if ok {
		e = v.(entry)
	}
	if ok && now.Sub(e.fetched) < c.ttl {
		if e.sale == nil {
			return nil, flashsale.ErrNotFound
		}
		return e.sale, nil
	}
	// Checked past the cache, which never holds a SKU that fails it.
	if !flashsale.ValidSKU(sku) {
		return nil, flashsale.ErrNotFound
	}
	if !ok || e.sale == nil {
		if l := c.listed.Load(); l != nil && now.Sub(l.at) < ListingFresh {
			if _, in := l.skus[sku]; !in {
				return nil, flashsale.ErrNotFound
			}
		}
	}
	v, err, _ := c.group.Do(sku, func() (any, error) {
		// A fill shared by every request: its call to the record is the
		// background's, not the request's that found the entry old.
		return c.read(tally.Detach(context.WithoutCancel(ctx)), c.store, sku)
	})
	if err != nil {
		if ok && e.sale != nil {
			// Every request for the sale comes here while the record is
			// down: one line a second says so.
			if n, ok := staleLines.Allow(c.logger, now); ok {
				c.logger.Warn("catalog: serving a stale sale; the record did not answer", "sku", sku, "err", err,
					"suppressed", n)
			}
			return e.sale, nil
		}
		return nil, err
	}
	s := v.(*flashsale.Sale)
	if s == nil {
		return nil, flashsale.ErrNotFound
	}
	return s, nil
}

// staleLines samples the warnings of stale answers, per logger.
var staleLines logsample.Sampler

// read reads the SKU's sale from the record (from) and caches what it
// found: the sale, or nil for a SKU without one.
func (c *Catalog) read(ctx context.Context, from flashsale.SaleStore, sku string) (*flashsale.Sale, error) {
	seq := c.seq.Add(1)
	s, err := from.SaleBySKU(ctx, sku)
	switch {
	case errors.Is(err, flashsale.ErrNotFound):
		c.put(sku, entry{fetched: c.now(), seq: seq})
		return nil, nil
	case err != nil:
		return nil, err
	}
	c.put(sku, entry{sale: s, fetched: c.now(), seq: seq})
	return s, nil
}

// Refresh reads the SKU's sale from the record now, because it has changed
// (another server wrote it): the next BySKU answers what this read found,
// however fresh the cached entry was. A read begun before the change
// cannot overwrite it. If the record does not answer, the cached entry is
// kept but counts as old, so the next BySKU asks the record again (and
// serves it, stale, only if the record still does not answer); the error
// is returned.
func (c *Catalog) Refresh(ctx context.Context, sku string) error {
	if !flashsale.ValidSKU(sku) {
		return nil
	}
	if _, err := c.read(ctx, c.reader, sku); err != nil {
		c.expire(sku)
		return err
	}
	return nil
}

// Relist reads every sale from the record again, after a time in which
// changes may have gone unheard (a notification connection that broke):
// every cached entry counts as old from now on, and the listing of every
// sale is renewed. It returns the record's error, after which the entries
// count as old all the same.
func (c *Catalog) Relist(ctx context.Context) error {
	seq := c.seq.Add(1)
	began := c.now()
	all, err := c.reader.Sales(ctx)
	c.expireAll(seq)
	if err != nil {
		return err
	}
	c.list(all, began)
	return nil
}

// expire makes the SKU's entry old, keeping its sale for when the record
// does not answer.
func (c *Catalog) expire(sku string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.bySKU.Load(sku)
	if !ok {
		return
	}
	e := v.(entry)
	if e.sale == nil {
		c.bySKU.Delete(sku)
		c.absent--
	} else {
		e.fetched = time.Time{}
		c.bySKU.Store(sku, e)
	}
	c.gen.Add(1)
}

// expireAll makes every entry read before seq old, and has nothing read
// before seq cached from now on.
func (c *Catalog) expireAll(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		f := c.floor.Load()
		if f >= seq || c.floor.CompareAndSwap(f, seq) {
			break
		}
	}
	c.listed.Store(nil)
	c.bySKU.Range(func(k, v any) bool {
		e := v.(entry)
		switch {
		case e.seq >= seq:
		case e.sale == nil:
			c.bySKU.Delete(k)
			c.absent--
		default:
			e.fetched = time.Time{}
			c.bySKU.Store(k, e)
		}
		return true
	})
	c.gen.Add(1)
}

// Known reports whether the SKU's sale is in the cache, however old,
// without asking the record: whether the SKU names a sale this process
// has served.
func (c *Catalog) Known(sku string) bool {
	v, ok := c.bySKU.Load(sku)
	return ok && v.(entry).sale != nil
}

// Put replaces the cached sale of s.SKU with s, as this process has just
// written it. A copy is kept, so the caller may go on using s.
func (c *Catalog) Put(s *flashsale.Sale) {
	cp := *s
	c.put(s.SKU, entry{sale: &cp, fetched: c.now(), seq: c.seq.Add(1)})
}

// Forget drops the SKU from the cache, so the next read goes to the record.
func (c *Catalog) Forget(sku string) {
	c.listed.Store(nil)
	c.mu.Lock()
	if v, ok := c.bySKU.LoadAndDelete(sku); ok && v.(entry).sale == nil {
		c.absent--
	}
	c.gen.Add(1)
	c.mu.Unlock()
}

// Generation returns a number that changes whenever any cached sale is
// replaced, refilled or forgotten. A sale read by BySKU after Generation
// returned g is the cached one as long as Generation still returns g (and
// the entry is within its TTL, which BySKU checks and a caller reusing
// what it read must bound itself).
func (c *Catalog) Generation() uint64 { return c.gen.Load() }

func (c *Catalog) put(sku string, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.seq < c.floor.Load() {
		// Read before a Relist made everything old: it may be older
		// than what the relist stands for.
		return
	}
	if v, ok := c.bySKU.Load(sku); ok {
		old := v.(entry)
		if old.seq > e.seq {
			// A read begun later already answered: this one may predate
			// a change that one saw.
			return
		}
		// Never replace a newer version with an older one read
		// concurrently.
		if old.sale != nil && e.sale != nil && old.sale.ID == e.sale.ID && old.sale.Version > e.sale.Version {
			e.sale = old.sale
		}
		if old.sale == nil {
			c.absent--
		}
	}
	c.bySKU.Store(sku, e)
	c.gen.Add(1)
	if e.sale != nil {
		return
	}
	c.absent++
	if c.absent >= c.pruneAt {
		c.pruneAbsent(e.fetched)
	}
}

// pruneAbsent drops the entries of absent SKUs fetched a TTL or more
// before now, which BySKU would fetch again anyway, and sets the next
// pass for when as many again have come. The caller holds mu.
func (c *Catalog) pruneAbsent(now time.Time) {
	c.bySKU.Range(func(k, v any) bool {
		if e := v.(entry); e.sale == nil && now.Sub(e.fetched) >= c.ttl {
			c.bySKU.Delete(k)
			c.absent--
		}
		return true
	})
	c.pruneAt = max(minPrune, 2*c.absent)
}

// Active returns the sales that are not closed at the time of the call,
// read from the record: the background services (sweeper, invariant
// watcher, warmer) call it once per round, not per request. The read
// also renews the listing BySKU consults for SKUs it has never seen.
func (c *Catalog) Active(ctx context.Context) ([]*flashsale.Sale, error) {
	seq := c.seq.Add(1)
	began := c.now()
	all, err := c.store.Sales(ctx)
	if err != nil {
		return nil, err
	}
	c.list(all, began)
	c.forgetAbsent(all, seq)
	now := c.now()
	active := all[:0]
	for _, s := range all {
		if s.StateAt(now) != flashsale.SaleClosed {
			active = append(active, s)
		}
	}
	return active, nil
}

// forgetAbsent drops the entries that say a SKU of all has no sale, read
// before seq: the sale was created since (by another server, whose
// notification has not come, or never will), and the next BySKU finds it.
func (c *Catalog) forgetAbsent(all []*flashsale.Sale, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range all {
		if v, ok := c.bySKU.Load(s.SKU); ok {
			if e := v.(entry); e.sale == nil && e.seq < seq {
				c.bySKU.Delete(s.SKU)
				c.absent--
				c.gen.Add(1)
			}
		}
	}
}

// list keeps all as the listing of every sale, read from began on,
// unless a read that began later already gave one.
func (c *Catalog) list(all []*flashsale.Sale, began time.Time) {
	l := &listing{skus: make(map[string]struct{}, len(all)), at: began}
	for _, s := range all {
		l.skus[s.SKU] = struct{}{}
	}
	for {
		old := c.listed.Load()
		if old != nil && old.at.After(began) {
			return
		}
		if c.listed.CompareAndSwap(old, l) {
			return
		}
	}
}
