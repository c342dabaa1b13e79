// Package memory holds the engine's in-process implementations, above all
// the stock gate (Gate): the embedded default, and the place where
// overselling is prevented when one process serves a sale.
//
// Every decision about a sale is one atomic step under that sale's mutex, as
// flashsale.Gate requires. Three things keep that fast:
//
//   - Most requests that reach the gate during a flash sale are rejections
//     (sold out above all), so Reserve and Lookup first try a lock-free
//     fast path: a sequence lock over a few atomics and a Bloom filter of
//     the sale's idempotency keys and spent admissions. It answers only
//     when what it read is exactly what the locked path would have read,
//     and it never writes or allocates.
//   - A win's keys are hashed before the lock is taken, the sale's indexes
//     are open-addressing tables keyed by those hashes (exact keys are
//     checked on a hit), and a reserve reads the slots it will probe
//     before it queues for the lock, so the locked step mostly hits cache.
//   - What a win writes under the lock is kept small, and a win does not
//     allocate: its hold is copied into a slab the sale made at load from
//     its stock, and its audit entry is that hold and the counter it left
//     (see auditLog).
//
// Striping a sale's keys over several locks was tried and measured slower
// on two cores: a win then moves more lock cache lines between cores than
// one lock does (see docs/benchmarks.md, issue 7).
//
// Overselling is prevented here, for the in-process gate: the sold-out,
// per-user and per-instrument checks, the admission's spend and the
// decrement are one step under the sale's lock (the lock-free path only
// ever answers no), and nothing else writes the counter. It could be
// caused here only by a Restock or Void that gave a hold's units back
// twice, which the gate refuses per reservation (package restock is the
// only caller).
package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// DefaultAuditLimit is how many of its newest audit entries a sale keeps when
// Config.AuditLimit is zero.
const DefaultAuditLimit = 100_000

// Config configures a Gate. The zero value is usable.
type Config struct {
	// Now is the clock of the audit log; nil means time.Now. Reserves
	// carry their own clock (GateReserve.Now), which dates their holds and
	// their audit entries.
	Now func() time.Time
	// AuditLimit bounds each sale's audit log to its newest entries; zero
	// means DefaultAuditLimit.
	AuditLimit int
}

// Gate is the in-process stock gate. It implements flashsale.GateAdmin; see
// there for what each method means. It is safe for concurrent use by
// multiple goroutines; sales do not contend with one another. Its state
// lives and dies with the process. Use New to make one.
type Gate struct {
	now        func() time.Time
	auditLimit int
	// sales maps a sale id to its sale. It is copied on write (under
	// salesMu), since sales come and go rarely and every reserve reads it:
	// a read is one atomic load and one map lookup. A sale appears on its
	// first Load, Rebuild or SetPaused and leaves on Drop.
	sales   atomic.Pointer[map[string]*sale]
	salesMu sync.Mutex
}

var _ flashsale.GateAdmin = (*Gate)(nil)

// New returns an empty gate.
func New(cfg Config) *Gate {
	g := &Gate{now: cfg.Now, auditLimit: cfg.AuditLimit}
	if g.now == nil {
		g.now = time.Now
	}
	if g.auditLimit <= 0 {
		g.auditLimit = DefaultAuditLimit
	}
	g.sales.Store(&map[string]*sale{})
	return g
}

// lookup returns the sale with the id, or nil; it takes no lock.
func (g *Gate) lookup(id string) *sale { return (*g.sales.Load())[id] }

// create returns the sale with the id, making it if there is none.
func (g *Gate) create(id string) *sale {
	g.salesMu.Lock()
	defer g.salesMu.Unlock()
	old := *g.sales.Load()
	if s, ok := old[id]; ok {
		return s
	}
	s := newSale(g.auditLimit)
	next := maps.Clone(old)
	next[id] = s
	g.sales.Store(&next)
	return s
}

// remove drops s from the index if it is still the sale under the id.
func (g *Gate) remove(id string, s *sale) {
	g.salesMu.Lock()
	defer g.salesMu.Unlock()
	old := *g.sales.Load()
	if old[id] != s {
		return
	}
	next := maps.Clone(old)
	delete(next, id)
	g.sales.Store(&next)
}

// locked returns the sale with the id, locked; nil if there is none and
// create is false.
func (g *Gate) locked(id string, create bool) *sale {
	for {
		s := g.lookup(id)
		if s == nil {
			if !create {
				return nil
			}
			s = g.create(id)
		}
		s.mu.Lock()
		if !s.dead {
			return s
		}
		s.mu.Unlock()
	}
}

// Reserve takes a hold if every check passes, in the order of
// flashsale.Verdict, as one atomic step. It returns an error only for a
// malformed request: Quantity below 1; an empty sale id, reservation id,
// user id or idempotency key; any id, key, fingerprint or hash containing
// "\x1f"; or a reservation id that already holds units.
//
// Rejections that need no write (not loaded, paused, stale epoch, sold out)
// are usually answered without the sale's lock and without allocating.
// ctx is not consulted: the gate never waits on I/O.
func (g *Gate) Reserve(_ context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	if err := r.Validate(); err != nil {
		err = fmt.Errorf("memory gate: %w", err)
		return flashsale.GateOutcome{}, err
	}
	for {
		s := g.lookup(r.SaleID)
		if s == nil {
			return flashsale.GateOutcome{Verdict: flashsale.VerdictNotLoaded}, nil
		}
		if out, retry, err := s.reserve(&r); !retry {
			return out, err
		}
	}
}

// Lookup returns the hold recorded under the shopper's idempotency key.
// found is false when the key is unknown or the sale is not loaded. It
// never returns an error.
func (g *Gate) Lookup(_ context.Context, saleID, userID, key string) (flashsale.Hold, bool, error) {
	s := g.lookup(saleID)
	if s == nil {
		return flashsale.Hold{}, false, nil
	}
	if _, hIdem := s.hashKey(userID, key); s.quickUnknown(hIdem) {
		return flashsale.Hold{}, false, nil
	}
	if s = g.locked(saleID, false); s == nil {
		return flashsale.Hold{}, false, nil
	}
	defer s.mu.Unlock()
	if !s.loaded() {
		return flashsale.Hold{}, false, nil
	}
	_, hIdem := s.hashKey(userID, key)
	h, ok := s.book.Load().idem.get(hIdem, keyOf(userID, key))
	if !ok {
		return flashsale.Hold{}, false, nil
	}
	return *h, true, nil
}

func keyOf(userID, idemKey string) key { return key{userID, idemKey} }

// Restock returns the hold's units to stock once; see flashsale.Gate. It
// returns flashsale.ErrNotLoaded if the sale is not loaded. The hold's
// idempotency key is kept, so a replay still finds its first answer.
func (g *Gate) Restock(_ context.Context, saleID, reservationID, source string) (bool, error) {
	at := g.now()
	s := g.locked(saleID, false)
	if s == nil {
		return false, flashsale.ErrNotLoaded
	}
	defer s.mu.Unlock()
	if !s.loaded() {
		return false, flashsale.ErrNotLoaded
	}
	return s.giveBack(reservationID, "restock", source, at), nil
}

// Void is Restock for a hold the record never acknowledged; it also forgets
// the hold's idempotency key if the key still names this hold, and un-spends
// h.AdmissionID, even when the units went back earlier. A Void of a hold
// that was already voided (its units gone and its key forgotten) leaves the
// admission alone: by then the shopper may have spent it again on a new
// hold. It returns flashsale.ErrNotLoaded if the sale is not loaded.
func (g *Gate) Void(_ context.Context, saleID string, h flashsale.Hold, source string) (bool, error) {
	at := g.now()
	s := g.locked(saleID, false)
	if s == nil {
		return false, flashsale.ErrNotLoaded
	}
	defer s.mu.Unlock()
	if !s.loaded() {
		return false, flashsale.ErrNotLoaded
	}
	moved := s.giveBack(h.ReservationID, "void", source, at)
	forgot := s.forgetKey(h.UserID, h.IdempotencyKey, h.ReservationID)
	if (moved || forgot) && h.AdmissionID != "" {
		s.unspend(h.AdmissionID)
	}
	return moved, nil
}

// Load sets up the sale's counter with initial units at epoch unless it is
// already loaded, and reports whether it did. A pause set before the load
// stays. It returns an error for an empty sale id or a negative initial.
func (g *Gate) Load(_ context.Context, saleID string, initial, epoch int64, source string) (bool, error) {
	if saleID == "" || initial < 0 {
		return false, fmt.Errorf("memory gate: load %q with %d units: need a sale id and initial >= 0", saleID, initial)
	}
	// Make the (possibly large) tables before locking.
	b, f := newBook(initial), newFilter(int(min(2*initial, filterMaxBits)))
	b.presizeHolds(initial)
	at := g.now()
	s := g.locked(saleID, true)
	defer s.mu.Unlock()
	if s.loaded() {
		return false, nil
	}
	s.seq.Add(1)
	s.reset(b, f)
	s.counter.Store(initial)
	s.epoch.Store(epoch)
	// A new counter has nothing behind it to drift from.
	s.flags.Store(s.flags.Load()&^flagDrift | flagLoaded)
	s.seq.Add(1)
	s.initial, s.won, s.restocked, s.audited = initial, 0, 0, initial
	s.audit.reserve(int(min(initial+16, presizeMax)))
	s.audit.add(flashsale.AuditEntry{At: at, Op: "load", Source: source, Delta: initial, Counter: initial})
	return true, nil
}

// Rebuild replaces the sale's counter, holds, buyers, instruments,
// idempotency keys and spent admissions with what the record says (spent,
// and each hold's own AdmissionID), and leaves the sale loaded and paused:
// resuming is the operator's deliberate step. It returns an error, and
// changes nothing, if the holds are malformed (see Reserve), repeat a
// reservation id, or take more than initial units, or if a spent admission
// is malformed (see flashsale.ValidateSpent).
func (g *Gate) Rebuild(_ context.Context, saleID string, initial, epoch int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission, source string) error {
	if saleID == "" {
		return errors.New("memory gate: rebuild needs a sale id")
	}
	held, err := flashsale.ValidateHolds(holds)
	if err != nil {
		return fmt.Errorf("memory gate: rebuild %s: %w", saleID, err)
	}
	if err := flashsale.ValidateSpent(spent); err != nil {
		return fmt.Errorf("memory gate: rebuild %s: %w", saleID, err)
	}
	counter := initial - held
	if counter < 0 {
		return fmt.Errorf("memory gate: rebuild %s: holds take %d units of %d", saleID, held, initial)
	}
	for {
		s := g.lookup(saleID)
		if s == nil {
			s = g.create(saleID)
		}
		// Build the new book before locking, so the sale stops only for
		// the swap.
		b, f := s.rebuiltBook(initial, holds, spent)
		b.presizeHolds(counter)
		at := g.now()
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			continue
		}
		var old int64
		if s.loaded() {
			old = s.counter.Load()
		}
		s.seq.Add(1)
		s.reset(b, f)
		s.counter.Store(counter)
		s.epoch.Store(epoch)
		s.flags.Store(flagLoaded | flagPaused)
		s.seq.Add(1)
		s.initial, s.won, s.restocked, s.audited = initial, held, 0, counter
		s.audit.add(flashsale.AuditEntry{At: at, Op: "rebuild", Source: source, Delta: counter - old, Counter: counter})
		s.mu.Unlock()
		return nil
	}
}

// Snapshot reads the sale's counter and bookkeeping in one atomic step. A
// sale that is not loaded reads as the zero snapshot. It never returns an
// error.
func (g *Gate) Snapshot(_ context.Context, saleID string) (flashsale.GateSnapshot, error) {
	s := g.locked(saleID, false)
	if s == nil {
		return flashsale.GateSnapshot{}, nil
	}
	defer s.mu.Unlock()
	flags := s.flags.Load()
	if flags&flagLoaded == 0 {
		return flashsale.GateSnapshot{}, nil
	}
	return flashsale.GateSnapshot{
		Loaded:         true,
		Paused:         flags&flagPaused != 0,
		Epoch:          s.epoch.Load(),
		Initial:        s.initial,
		Counter:        s.counter.Load(),
		Won:            s.won,
		Restocked:      s.restocked,
		AuditedCounter: s.audited,
	}, nil
}

// Holds returns copies of the sale's holds, ordered by reservation id. It
// never returns an error.
func (g *Gate) Holds(_ context.Context, saleID string) ([]flashsale.Hold, error) {
	s := g.locked(saleID, false)
	if s == nil {
		return nil, nil
	}
	b := s.book.Load()
	out := make([]flashsale.Hold, 0, b.holds.len())
	b.holds.each(func(_ uint64, h *flashsale.Hold) { out = append(out, *h) })
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b flashsale.Hold) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	return out, nil
}

// SetPaused makes Reserve answer VerdictPaused, or stop doing so, and
// audits it as "pause" or "resume". It may come before Load, which keeps
// the flag. It never returns an error.
func (g *Gate) SetPaused(_ context.Context, saleID string, paused bool, source string) error {
	at := g.now()
	s := g.locked(saleID, true)
	defer s.mu.Unlock()
	flags, op := s.flags.Load()&^flagPaused, "resume"
	if paused {
		flags, op = flags|flagPaused, "pause"
	}
	s.seq.Add(1)
	s.flags.Store(flags)
	s.seq.Add(1)
	// Pausing moves no units, so the audited counter stays where the last
	// counter mutation left it: a pause must not hide an unaudited write.
	s.audit.add(flashsale.AuditEntry{At: at, Op: op, Source: source, Counter: s.counter.Load()})
	return nil
}

// Audit returns up to limit of the sale's newest audit entries, oldest
// first. It never returns an error.
func (g *Gate) Audit(_ context.Context, saleID string, limit int) ([]flashsale.AuditEntry, error) {
	s := g.locked(saleID, false)
	if s == nil {
		return nil, nil
	}
	defer s.mu.Unlock()
	return s.audit.newest(limit), nil
}

// Drop forgets everything the gate keeps for the sale, audit log included.
// It never returns an error.
func (g *Gate) Drop(_ context.Context, saleID string) error {
	s := g.locked(saleID, false)
	if s == nil {
		return nil
	}
	defer s.mu.Unlock()
	s.seq.Add(1)
	s.flags.Store(0)
	s.counter.Store(0)
	s.seq.Add(1)
	s.dead = true
	g.remove(saleID, s)
	return nil
}

// Ping reports nil: an in-process gate always answers.
func (g *Gate) Ping(context.Context) error { return nil }

// Adjust adds delta to the sale's counter without a reservation behind it,
// and audits it as "adjust". It exists for fault drills: it is a
// deliberate second writer to the counter, the defect that section 8 of the
// design warns about, so that the invariant checks can be seen to catch it.
// It leaves Won and Restocked alone, so Snapshot's Drift becomes delta (and
// Reserve sells nothing until a rebuild); the audited counter moves by
// delta, as for any audited writer. Nothing in the
// engine's own paths calls it. It returns flashsale.ErrNotLoaded if the
// sale is not loaded. Safe for concurrent use.
func (g *Gate) Adjust(saleID string, delta int64, source string) error {
	at := g.now()
	s := g.locked(saleID, false)
	if s == nil {
		return flashsale.ErrNotLoaded
	}
	defer s.mu.Unlock()
	if !s.loaded() {
		return flashsale.ErrNotLoaded
	}
	s.seq.Add(1)
	counter := s.counter.Add(delta)
	s.markDrift()
	s.seq.Add(1)
	s.audited += delta
	s.audit.add(flashsale.AuditEntry{At: at, Op: "adjust", Source: source, Delta: delta, Counter: counter})
	return nil
}
