package memory

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

const (
	flagLoaded uint32 = 1 << iota
	flagPaused
)

// spentPruneMin is the fewest spent admissions worth a pruning pass.
const spentPruneMin = 1024

// presizeMax caps how many entries a book's tables are made room for up
// front; a larger sale grows them as it sells.
const presizeMax = 1 << 17

// spend is an admission spent by a win, remembered until it expires (Unix
// nanoseconds; see nanos).
type spend struct {
	id      string
	expires int64
}

// nanos is t in Unix nanoseconds, with the zero time (and anything before
// 1678) as the earliest instant, so "expires after now" stays a plain
// comparison in a compact table slot.
func nanos(t time.Time) int64 {
	if t.Before(minNanosTime) {
		return math.MinInt64
	}
	if t.After(maxNanosTime) {
		return math.MaxInt64
	}
	return t.UnixNano()
}

var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

// book is what a stripe of a sale remembers of its holds and of the keys
// that decide replays, limits and spent admissions. It is guarded by its
// stripe's lock.
type book struct {
	holds       table[*flashsale.Hold] // by reservation id
	buyers      table[*flashsale.Hold] // by user id: the shopper's live hold
	instruments table[*flashsale.Hold] // by payment fingerprint
	// idem is by (user id, idempotency key), in the stripe of the user id.
	// It outlives the hold it names, so a replay after a restock still
	// finds its first answer; only Void and Rebuild forget keys.
	idem table[*flashsale.Hold]
	// spent is by admission id. A spend is forgotten when it lapses (see
	// stripe.prune), when Void gives it back, and on Rebuild.
	spent table[spend]
}

func holdHasID(h *flashsale.Hold, k key) bool         { return h.ReservationID == k.a }
func holdHasUser(h *flashsale.Hold, k key) bool       { return h.UserID == k.a }
func holdHasInstrument(h *flashsale.Hold, k key) bool { return h.Instrument == k.a }
func holdHasKey(h *flashsale.Hold, k key) bool        { return h.UserID == k.a && h.IdempotencyKey == k.b }
func spendHasID(s spend, k key) bool                  { return s.id == k.a }

// newBook returns an empty book with room for about n holds, so that a sale
// does not regrow its tables while it sells out.
func newBook(n int) *book {
	b := &book{}
	b.holds.init(n, holdHasID)
	b.buyers.init(n, holdHasUser)
	b.instruments.init(n, holdHasInstrument)
	b.idem.init(n, holdHasKey)
	b.spent.init(n, spendHasID)
	return b
}

// stripeBits is log2 of how many stripes a sale's keys are spread over. A
// win locks at most four stripes (its shopper's, its admission's, its
// reservation id's and its instrument's), so two shoppers rarely meet; an
// operator's step locks all of them, so the count also prices those.
const (
	stripeBits = 5
	stripes    = 1 << stripeBits
)

// stripeOf is the stripe of a key's hash. It takes the top bits, which
// neither a table's slot (the low bits) nor the filter's probes (bits 0-25
// and 32-57) use, so keys spread evenly over the slots of a stripe.
func stripeOf(h uint64) int { return int(h >> (64 - stripeBits)) }

// books returns one empty book per stripe, each with room for its share of
// about n holds.
func books(n int64) *[stripes]*book {
	share := int(min(max(n, 0), presizeMax) / stripes)
	var bs [stripes]*book
	for i := range bs {
		bs[i] = newBook(share)
	}
	return &bs
}

// stripe is the part of a sale's bookkeeping whose keys hash to it, with
// the lock that guards it.
type stripe struct {
	mu   sync.Mutex
	book *book
	// slab is where the stripe's shoppers' new holds are carved from, so
	// that a win does not allocate; holdChunk holds are made at a time.
	slab      []flashsale.Hold
	holdChunk int
	// pruneAt is the count of spent admissions that triggers the next
	// pruning pass.
	pruneAt int
	// Stripes sit side by side; the padding keeps one stripe's lock off
	// the cache line of the next one's.
	_ [64]byte
}

// newHold returns room for one hold.
func (st *stripe) newHold() *flashsale.Hold {
	if len(st.slab) == 0 {
		st.slab = make([]flashsale.Hold, st.holdChunk)
	}
	h := &st.slab[0]
	st.slab = st.slab[1:]
	return h
}

// prune forgets the admissions whose spend lapsed by now (Unix
// nanoseconds). The threshold doubles with what stays, so the work is
// constant per win on average.
func (st *stripe) prune(now int64) {
	st.book.spent.deleteIf(func(sp spend) bool { return sp.expires <= now })
	st.pruneAt = max(2*st.book.spent.len(), spentPruneMin/stripes)
}

// stripeSet is a set of a sale's stripes, bit i for stripe i. Locking
// takes them in ascending order, so two steps never deadlock.
type stripeSet uint32

const allStripes stripeSet = 1<<stripes - 1

func (m *stripeSet) add(h uint64) { *m |= 1 << stripeOf(h) }

// sale is one sale's counter and bookkeeping.
//
// A sale's keys (shoppers, idempotency keys, admissions, reservation ids,
// instruments) are spread over stripes by hash, each with its own lock, so
// that wins of different shoppers take different locks. The counter, its
// bookkeeping and the audit log sit under one more lock, mu, which a win
// holds only for the decrement and its audit entry. A step that changes
// what every reserve reads (load, rebuild, pause, drop) holds every stripe
// and mu.
//
// Locks are always taken stripes first, in ascending order, then mu.
type sale struct {
	// seq is a sequence lock over the atomics below it: a writer (holding
	// mu) makes it odd, changes them, and makes it even again. The fast
	// path trusts what it read only if seq was even and unchanged around
	// its reads, so what it read is the state between two locked steps.
	seq     atomic.Uint64
	flags   atomic.Uint32 // written under every stripe and mu
	epoch   atomic.Int64  // written under every stripe and mu
	counter atomic.Int64  // written under mu
	filter  atomic.Pointer[filter]
	// seed keys every hash of the sale; it never changes, so it is read
	// without a lock.
	seed maphash.Seed

	// mu guards the fields below it and the writes of seq, counter and
	// the filter's bits.
	mu                               sync.Mutex
	initial, won, restocked, audited int64
	// filterEntries counts the entries added to the current filter;
	// reaching filterRebuildAt makes a fresh one from the live keys.
	filterEntries, filterRebuildAt int
	audit                          auditLog

	// dead marks a dropped sale: whoever locks it must look the sale up
	// again. It is written under every stripe and mu, so any one of them
	// is enough to read it.
	dead bool

	stripes [stripes]stripe
}

func newSale(auditLimit int) *sale {
	s := &sale{seed: maphash.MakeSeed(), audit: auditLog{limit: auditLimit}}
	s.reset(books(0), newFilter(0), 0)
	return s
}

// reset gives the sale the books bs and the filter f, which must hold bs's
// keys; initial sizes the slabs of holds. The caller holds every lock inside
// a write section, or owns s alone.
func (s *sale) reset(bs *[stripes]*book, f *filter, initial int64) {
	live := 0
	chunk := int(min(max(initial/stripes, 1), holdChunkMax))
	for i := range s.stripes {
		st := &s.stripes[i]
		st.book = bs[i]
		st.slab, st.holdChunk = nil, chunk
		st.pruneAt = max(2*st.book.spent.len(), spentPruneMin/stripes)
		live += st.book.idem.len() + st.book.spent.len()
	}
	s.filter.Store(f)
	s.filterEntries = live
	// Rebuilt keys may already outnumber a filter at its largest size.
	s.filterRebuildAt = max(f.capacity, 2*live)
}

// holdChunkMax caps how many holds a stripe makes room for at once.
const holdChunkMax = 64

func (s *sale) lock(m stripeSet) {
	for ; m != 0; m &= m - 1 {
		s.stripes[bits.TrailingZeros32(uint32(m))].mu.Lock()
	}
}

func (s *sale) unlock(m stripeSet) {
	for ; m != 0; m &= m - 1 {
		s.stripes[bits.TrailingZeros32(uint32(m))].mu.Unlock()
	}
}

// lockAll takes every lock of the sale, for a step that changes what every
// reserve reads.
func (s *sale) lockAll() {
	s.lock(allStripes)
	s.mu.Lock()
}

func (s *sale) unlockAll() {
	s.mu.Unlock()
	s.unlock(allStripes)
}

func (s *sale) loaded() bool { return s.flags.Load()&flagLoaded != 0 }

// The hashes of a request's keys, taken before the lock.

func (s *sale) hash(v string) uint64 { return fixHash(maphash.String(s.seed, v)) }

// hashKey returns the hashes of a shopper and of the shopper's
// idempotency key. Rotating one half keeps (a, b) and (b, a) apart. The key
// lives in the shopper's stripe.
func (s *sale) hashKey(userID, key string) (user, idem uint64) {
	user = s.hash(userID)
	return user, fixHash(user ^ bits.RotateLeft64(s.hash(key), 29))
}

type hashes struct{ user, idem, adm, res, instr uint64 }

// reserve decides r at s. retry reports that s was dropped before the locks
// were taken, so the caller must look the sale up again.
func (s *sale) reserve(r *flashsale.GateReserve) (out flashsale.GateOutcome, retry bool, err error) {
	var hs hashes
	hs.user, hs.idem = s.hashKey(r.UserID, r.IdempotencyKey)
	if r.AdmissionID != "" {
		hs.adm = s.hash(r.AdmissionID)
	}
	if out, ok := s.quickReserve(r, hs.idem, hs.adm); ok {
		return out, false, nil
	}
	hs.res = s.hash(r.ReservationID)
	var held stripeSet
	held.add(hs.user)
	held.add(hs.res)
	if r.AdmissionID != "" {
		held.add(hs.adm)
	}
	if r.Instrument != "" {
		hs.instr = s.hash(r.Instrument)
		held.add(hs.instr)
	}
	s.lock(held)
	if s.dead {
		s.unlock(held)
		return out, true, nil
	}
	out, tidy, err := s.reserveLocked(r, &hs)
	s.unlock(held)
	if tidy {
		s.rebuildFilter(r.Now)
	}
	return out, false, err
}

// quickReserve answers r without the lock when it can: ok is false when
// only the locked path can decide. The answer is the one the locked path
// would have given at a moment between the two reads of seq.
func (s *sale) quickReserve(r *flashsale.GateReserve, hIdem, hAdm uint64) (out flashsale.GateOutcome, ok bool) {
	seq := s.seq.Load()
	if seq&1 != 0 {
		return out, false
	}
	flags := s.flags.Load()
	if flags&flagLoaded == 0 {
		out.Verdict = flashsale.VerdictNotLoaded
	} else {
		f := s.filter.Load()
		// A key the sale may hold means a replay or a key reuse, decided
		// under the lock.
		if f.mayHave(hIdem) {
			return out, false
		}
		out.Epoch, out.Remaining = s.epoch.Load(), s.counter.Load()
		switch {
		case flags&flagPaused != 0:
			out.Verdict = flashsale.VerdictPaused
		case r.Epoch != out.Epoch:
			out.Verdict = flashsale.VerdictStaleEpoch
		case r.AdmissionID != "" && f.mayHave(hAdm):
			return out, false
		case out.Remaining < int64(r.Quantity):
			out.Verdict = flashsale.VerdictSoldOut
		default:
			return out, false
		}
	}
	if s.seq.Load() != seq {
		return out, false
	}
	return out, true
}

// reserveLocked is Reserve with r's stripes locked. Everything it reads
// from the stripes stays as it read it until they are unlocked, and what
// every reserve reads (flags, epoch) changes only under every stripe, so
// the decision is one atomic step whose moment is the one when it holds
// mu: the counter's only lock. tidy reports that the filter is due for a
// rebuild, which needs every lock.
func (s *sale) reserveLocked(r *flashsale.GateReserve, hs *hashes) (out flashsale.GateOutcome, tidy bool, err error) {
	flags := s.flags.Load()
	if flags&flagLoaded == 0 {
		return flashsale.GateOutcome{Verdict: flashsale.VerdictNotLoaded}, false, nil
	}
	out.Remaining, out.Epoch = s.counter.Load(), s.epoch.Load()
	user := &s.stripes[stripeOf(hs.user)]
	idemKey := key{r.UserID, r.IdempotencyKey}
	if prev, ok := user.book.idem.get(hs.idem, idemKey); ok {
		if prev.RequestHash != r.RequestHash {
			out.Verdict = flashsale.VerdictKeyReused
			return out, false, nil
		}
		out.Verdict, out.Hold = flashsale.VerdictReplayed, *prev
		return out, false, nil
	}
	if flags&flagPaused != 0 {
		out.Verdict = flashsale.VerdictPaused
		return out, false, nil
	}
	var adm, instr *stripe
	if r.AdmissionID != "" {
		adm = &s.stripes[stripeOf(hs.adm)]
	}
	if r.Instrument != "" {
		instr = &s.stripes[stripeOf(hs.instr)]
	}
	res := &s.stripes[stripeOf(hs.res)]
	stale := r.Epoch != out.Epoch
	spent := adm != nil && adm.spentAt(hs.adm, r.AdmissionID, r.Now)
	limited := user.holdsFor(hs.user, r.UserID) || (instr != nil && instr.instrumentHolds(hs.instr, r.Instrument))
	_, dup := res.book.holds.get(hs.res, key{a: r.ReservationID})

	q := int64(r.Quantity)
	s.mu.Lock()
	counter := s.counter.Load()
	out.Remaining = counter
	switch {
	case counter+s.won-s.restocked != s.initial:
		// Written behind the gate: sell nothing on a counter nobody can
		// vouch for, until a rebuild (the invariant watcher pauses the
		// sale and names the writer).
		out.Verdict = flashsale.VerdictPaused
	case stale:
		out.Verdict = flashsale.VerdictStaleEpoch
	case spent:
		out.Verdict = flashsale.VerdictAdmissionUsed
	case counter < q:
		out.Verdict = flashsale.VerdictSoldOut
	case limited:
		out.Verdict = flashsale.VerdictLimitReached
	}
	if out.Verdict != 0 || dup {
		s.mu.Unlock()
		if out.Verdict == 0 {
			return flashsale.GateOutcome{}, false, errDuplicate(r.ReservationID)
		}
		return out, false, nil
	}

	// The key's and the admission's bits go into the filter in the same
	// write section as the decrement: a lock-free reader that sees the
	// counter without them would answer a replay "sold out".
	f := s.filter.Load()
	added := 1
	counter -= q
	s.seq.Add(1)
	s.counter.Store(counter)
	f.add(hs.idem)
	if adm != nil {
		f.add(hs.adm)
		added++
	}
	s.seq.Add(1)
	s.won += q
	// The audited counter moves by the audited delta, not to the counter:
	// an unaudited write before this one stays visible.
	s.audited -= q
	// The request carries the clock: its Now is when the server took it.
	s.audit.add(flashsale.AuditEntry{At: r.Now, Op: "reserve", Source: "reserve", Delta: -q, Counter: counter, ReservationID: r.ReservationID})
	s.filterEntries += added
	tidy = s.filterEntries >= s.filterRebuildAt
	s.mu.Unlock()

	// The unit is taken; what remains is to remember it, in stripes no one
	// else can read until this step unlocks them.
	h := user.newHold()
	*h = flashsale.Hold{
		ReservationID:  r.ReservationID,
		UserID:         r.UserID,
		Quantity:       r.Quantity,
		Instrument:     r.Instrument,
		IdempotencyKey: r.IdempotencyKey,
		RequestHash:    r.RequestHash,
		AdmissionID:    r.AdmissionID,
		CreatedAt:      r.Now,
	}
	res.book.holds.put(hs.res, key{a: h.ReservationID}, h)
	user.book.buyers.put(hs.user, key{a: h.UserID}, h)
	user.book.idem.put(hs.idem, idemKey, h)
	if instr != nil {
		instr.book.instruments.put(hs.instr, key{a: h.Instrument}, h)
	}
	if adm != nil {
		adm.book.spent.put(hs.adm, key{a: r.AdmissionID}, spend{r.AdmissionID, nanos(r.AdmissionExpires)})
		if adm.book.spent.len() >= adm.pruneAt {
			adm.prune(nanos(r.Now))
		}
	}
	out.Verdict, out.Hold, out.Remaining = flashsale.VerdictWon, *h, counter
	return out, tidy, nil
}

func (st *stripe) holdsFor(hUser uint64, userID string) bool {
	_, ok := st.book.buyers.get(hUser, key{a: userID})
	return ok
}

func (st *stripe) instrumentHolds(hInstr uint64, fingerprint string) bool {
	_, ok := st.book.instruments.get(hInstr, key{a: fingerprint})
	return ok
}

// spentAt reports whether the admission was spent by a win and the spend
// is still remembered at now.
func (st *stripe) spentAt(h uint64, admissionID string, now time.Time) bool {
	sp, ok := st.book.spent.get(h, key{a: admissionID})
	return ok && sp.expires > nanos(now)
}

// rebuildFilter, when the filter has taken as many entries as it was sized
// for, forgets the admissions whose spend lapsed by now and replaces the
// filter with one made from the live keys. The threshold doubles with what
// stays, so the work is constant per win on average. It takes every lock.
func (s *sale) rebuildFilter(now time.Time) {
	s.lockAll()
	defer s.unlockAll()
	if s.dead || s.filterEntries < s.filterRebuildAt {
		return // someone else rebuilt it first
	}
	live := 0
	for i := range s.stripes {
		st := &s.stripes[i]
		st.prune(nanos(now))
		live += st.book.idem.len() + st.book.spent.len()
	}
	f := newFilter(2 * live)
	for i := range s.stripes {
		b := s.stripes[i].book
		b.idem.each(func(h uint64, _ *flashsale.Hold) { f.add(h) })
		b.spent.each(func(h uint64, _ spend) { f.add(h) })
	}
	s.seq.Add(1)
	s.filter.Store(f)
	s.seq.Add(1)
	s.filterEntries = live
	// A filter at its largest size cannot take more without saturating;
	// wait for the live keys to double before building another.
	s.filterRebuildAt = max(f.capacity, 2*live)
}

// quickUnknown reports, without the lock, that the key is certainly
// unknown (or the sale not loaded); false means "ask under the lock".
func (s *sale) quickUnknown(hIdem uint64) bool {
	seq := s.seq.Load()
	if seq&1 != 0 {
		return false
	}
	unknown := s.flags.Load()&flagLoaded == 0 || !s.filter.Load().mayHave(hIdem)
	return unknown && s.seq.Load() == seq
}

// lockHold locks the stripes of the hold under the reservation id (its
// own, its shopper's and its instrument's) and those in also, and returns
// the hold, or nil if there is none; held is what to unlock. retry reports
// that the sale was dropped, so the caller must look it up again.
func (s *sale) lockHold(reservationID string, also stripeSet) (h *flashsale.Hold, held stripeSet, retry bool) {
	hRes := s.hash(reservationID)
	held = also
	held.add(hRes)
	// Which stripes the hold needs is known only once its stripe is
	// locked; if they are not all held, take them in order and look again.
	for {
		s.lock(held)
		if s.dead {
			s.unlock(held)
			return nil, 0, true
		}
		h, ok := s.stripes[stripeOf(hRes)].book.holds.get(hRes, key{a: reservationID})
		if !ok {
			return nil, held, false
		}
		need := held
		need.add(s.hash(h.UserID))
		if h.Instrument != "" {
			need.add(s.hash(h.Instrument))
		}
		if need == held {
			return h, held, false
		}
		s.unlock(held)
		held = need
	}
}

// giveBack returns h's units to stock, auditing it as op. The caller holds
// the stripes lockHold took for h.
func (s *sale) giveBack(h *flashsale.Hold, op, source string, at time.Time) {
	q := int64(h.Quantity)
	hRes := s.hash(h.ReservationID)
	s.stripes[stripeOf(hRes)].book.holds.del(hRes, key{a: h.ReservationID})
	// The shopper or the instrument may hold again under another
	// reservation by now (after a rebuild, say); leave that one alone.
	hUser := s.hash(h.UserID)
	buyers := &s.stripes[stripeOf(hUser)].book.buyers
	if live, ok := buyers.get(hUser, key{a: h.UserID}); ok && live.ReservationID == h.ReservationID {
		buyers.del(hUser, key{a: h.UserID})
	}
	if h.Instrument != "" {
		hInstr := s.hash(h.Instrument)
		instruments := &s.stripes[stripeOf(hInstr)].book.instruments
		if live, ok := instruments.get(hInstr, key{a: h.Instrument}); ok && live.ReservationID == h.ReservationID {
			instruments.del(hInstr, key{a: h.Instrument})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq.Add(1)
	counter := s.counter.Add(q)
	s.seq.Add(1)
	s.restocked += q
	s.audited += q
	s.audit.add(flashsale.AuditEntry{At: at, Op: op, Source: source, Delta: q, Counter: counter, ReservationID: h.ReservationID})
}

// forgetKey forgets the shopper's idempotency key if it names the
// reservation, and reports whether it did. The filter keeps the key's bits;
// that costs a locked lookup for this key later, never a wrong answer. The
// caller holds the shopper's stripe.
func (s *sale) forgetKey(userID, idemKey, reservationID string) bool {
	hUser, hIdem := s.hashKey(userID, idemKey)
	idem := &s.stripes[stripeOf(hUser)].book.idem
	k := key{userID, idemKey}
	if prev, ok := idem.get(hIdem, k); ok && prev.ReservationID == reservationID {
		idem.del(hIdem, k)
		return true
	}
	return false
}

// unspend forgets that the admission was spent, so a reserve may spend it
// again. Like a forgotten key, it keeps its bits in the filter. The caller
// holds the admission's stripe.
func (s *sale) unspend(admissionID string) {
	h := s.hash(admissionID)
	s.stripes[stripeOf(h)].book.spent.del(h, key{a: admissionID})
}

// rebuiltBooks returns books and a filter holding the holds, hashed with
// the sale's seed. It takes no lock: the sale's seed never changes.
func (s *sale) rebuiltBooks(initial int64, holds []flashsale.Hold) (*[stripes]*book, *filter) {
	n := max(initial, int64(len(holds)))
	bs := books(n)
	f := newFilter(int(min(2*n, filterMaxBits)))
	kept := make([]flashsale.Hold, len(holds))
	copy(kept, holds)
	for i := range kept {
		h := &kept[i]
		hRes := s.hash(h.ReservationID)
		bs[stripeOf(hRes)].holds.put(hRes, key{a: h.ReservationID}, h)
		hUser, hIdem := s.hashKey(h.UserID, h.IdempotencyKey)
		user := bs[stripeOf(hUser)]
		user.buyers.put(hUser, key{a: h.UserID}, h)
		if h.Instrument != "" {
			hInstr := s.hash(h.Instrument)
			bs[stripeOf(hInstr)].instruments.put(hInstr, key{a: h.Instrument}, h)
		}
		if h.IdempotencyKey != "" {
			user.idem.put(hIdem, key{h.UserID, h.IdempotencyKey}, h)
			f.add(hIdem)
		}
	}
	return bs, f
}
