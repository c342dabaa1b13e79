package memory

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

const (
	flagLoaded uint32 = 1 << iota
	flagPaused
	// flagDrift mirrors, for the lock-free fast path, what the locked path
	// works out from its bookkeeping: counter + won - restocked !=
	// initial, a counter written behind the gate. Only Adjust moves the
	// counter without moving won or restocked, so only Adjust (and Load,
	// Rebuild and Drop, which start over) change it; see markDrift.
	flagDrift
)

// presizeMax caps how many entries a book's tables are made room for up
// front; a larger sale grows them as it sells.
const presizeMax = 1 << 17

// book is what a sale remembers of its holds and of the keys that decide
// replays, limits and spent admissions. It is guarded by the sale's lock.
type book struct {
	holds       table[*flashsale.Hold] // by reservation id
	buyers      table[*flashsale.Hold] // by user id: the shopper's live hold
	instruments table[*flashsale.Hold] // by payment fingerprint
	// idem is by (user id, idempotency key). It outlives the hold it
	// names, so a replay after a restock still finds its first answer;
	// only Void and Rebuild forget keys.
	idem table[*flashsale.Hold]
	// spent is by admission id: the turns taken. A spend lasts as long as
	// the sale (an admission is a shopper's one turn, and the waiting room
	// hands the same id out again after it expires); only Void gives it
	// back, and Rebuild replaces the set with the record's. It costs one
	// entry per win, as idem does.
	spent table[string]
	// slab is room for the holds of wins to come, made with the book and
	// sized from the units there are to sell, so that a win copies its
	// hold into place instead of allocating it (see newHold).
	slab []flashsale.Hold
}

// slabMax caps the holds a book makes room for up front; past them a sale
// makes room slabChunk holds at a time.
const (
	slabMax   = 1 << 14
	slabChunk = 1 << 10
)

// presizeHolds makes room for the holds of about units wins.
func (b *book) presizeHolds(units int64) {
	b.slab = make([]flashsale.Hold, min(max(units, 0), slabMax))
}

// newHold returns a place for a new hold, which stays where it is for as
// long as anything refers to it.
func (b *book) newHold() *flashsale.Hold {
	if len(b.slab) == 0 {
		b.slab = make([]flashsale.Hold, slabChunk)
	}
	h := &b.slab[0]
	b.slab = b.slab[1:]
	return h
}

func holdHasID(h *flashsale.Hold, k key) bool         { return h.ReservationID == k.a }
func holdHasUser(h *flashsale.Hold, k key) bool       { return h.UserID == k.a }
func holdHasInstrument(h *flashsale.Hold, k key) bool { return h.Instrument == k.a }
func holdHasKey(h *flashsale.Hold, k key) bool        { return h.UserID == k.a && h.IdempotencyKey == k.b }
func spentHasID(id string, k key) bool                { return id == k.a }

// newBook returns an empty book with room for about n holds, so that a sale
// does not regrow its tables while it sells out.
func newBook(n int64) *book {
	hint := int(min(max(n, 0), presizeMax))
	b := &book{}
	b.holds.init(hint, holdHasID)
	b.buyers.init(hint, holdHasUser)
	b.instruments.init(hint, holdHasInstrument)
	b.idem.init(hint, holdHasKey)
	b.spent.init(hint, spentHasID)
	return b
}

// sale is one sale's counter and bookkeeping.
//
// The fields every locked step touches sit together with the mutex, so that
// when the lock passes to another core the line it brings carries them.
type sale struct {
	// seq is a sequence lock over the atomics below it: a writer (holding
	// mu) makes it odd, changes them, and makes it even again. The fast
	// path trusts what it read only if seq was even and unchanged around
	// its reads, so what it read is the state between two locked steps.
	seq     atomic.Uint64
	flags   atomic.Uint32
	epoch   atomic.Int64
	counter atomic.Int64
	filter  atomic.Pointer[filter]
	// book is replaced whole by Load and Rebuild; reserves read the
	// pointer without the lock to touch its tables (see table.touch).
	book atomic.Pointer[book]
	// seed keys every hash of the sale; it never changes, so it is read
	// without the lock.
	seed maphash.Seed

	mu sync.Mutex
	// dead marks a dropped sale: whoever locks it must look the sale up
	// again.
	dead bool

	initial, won, restocked, audited int64
	// filterEntries counts the entries added to the current filter;
	// reaching filterRebuildAt makes a fresh one from the live keys.
	filterEntries, filterRebuildAt int

	audit auditLog
}

func newSale(auditLimit int) *sale {
	s := &sale{seed: maphash.MakeSeed(), audit: auditLog{limit: auditLimit}}
	s.reset(newBook(0), newFilter(0))
	return s
}

// reset gives the sale the book b and the filter f, which must hold b's
// keys. The caller holds mu inside a write section, or owns s alone.
func (s *sale) reset(b *book, f *filter) {
	s.book.Store(b)
	s.filter.Store(f)
	s.filterEntries = b.idem.len() + b.spent.len()
	// Rebuilt keys may already outnumber a filter at its largest size.
	s.filterRebuildAt = max(f.capacity, 2*s.filterEntries)
}

func (s *sale) loaded() bool { return s.flags.Load()&flagLoaded != 0 }

// markDrift sets flagDrift if the counter disagrees with the bookkeeping,
// and clears it otherwise. The caller holds mu inside a write section
// that moved the counter alone.
func (s *sale) markDrift() {
	flags := s.flags.Load() &^ flagDrift
	if s.counter.Load()+s.won-s.restocked != s.initial {
		flags |= flagDrift
	}
	s.flags.Store(flags)
}

// The hashes of a request's keys, taken before the lock.

func (s *sale) hash(v string) uint64 { return fixHash(maphash.String(s.seed, v)) }

// hashKey returns the hashes of a shopper and of the shopper's
// idempotency key. Rotating one half keeps (a, b) and (b, a) apart.
func (s *sale) hashKey(userID, key string) (user, idem uint64) {
	user = s.hash(userID)
	return user, fixHash(user ^ bits.RotateLeft64(s.hash(key), 29))
}

type hashes struct{ user, idem, adm, res, instr uint64 }

// reserve decides r at s. retry reports that s was dropped before the lock
// was taken, so the caller must look the sale up again.
func (s *sale) reserve(r *flashsale.GateReserve) (out flashsale.GateOutcome, retry bool, err error) {
	var hs hashes
	hs.user, hs.idem = s.hashKey(r.UserID, r.IdempotencyKey)
	if r.AdmissionID != "" {
		hs.adm = s.hash(r.AdmissionID)
	}
	if out, ok := s.quickReserve(r, hs.idem, hs.adm); ok {
		return out, false, nil
	}
	// Hash and allocate before locking, to keep the lock short.
	hs.res = s.hash(r.ReservationID)
	if r.Instrument != "" {
		hs.instr = s.hash(r.Instrument)
	}
	// Pull the slots the locked step will probe into this core's cache
	// while the lock may be busy: the loads overlap here, where under the
	// lock each would stall everyone.
	b := s.book.Load()
	b.idem.touch(hs.idem)
	b.buyers.touch(hs.user)
	b.holds.touch(hs.res)
	if r.AdmissionID != "" {
		b.spent.touch(hs.adm)
	}
	if r.Instrument != "" {
		b.instruments.touch(hs.instr)
	}
	// The hold is made here, outside the lock; a win copies it into the
	// book's slab.
	h := flashsale.Hold{
		ReservationID:  r.ReservationID,
		UserID:         r.UserID,
		Quantity:       r.Quantity,
		Instrument:     r.Instrument,
		IdempotencyKey: r.IdempotencyKey,
		RequestHash:    r.RequestHash,
		AdmissionID:    r.AdmissionID,
		CreatedAt:      r.Now,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return out, true, nil
	}
	out, err = s.reserveLocked(r, &hs, &h)
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
		case flags&(flagPaused|flagDrift) != 0:
			// Drift answers as a pause, before the epoch and the stock:
			// the locked path's order (see reserveLocked).
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

// reserveLocked is Reserve under the lock; won is the hold to keep if r
// wins.
func (s *sale) reserveLocked(r *flashsale.GateReserve, hs *hashes, won *flashsale.Hold) (flashsale.GateOutcome, error) {
	b := s.book.Load()
	flags := s.flags.Load()
	if flags&flagLoaded == 0 {
		return flashsale.GateOutcome{Verdict: flashsale.VerdictNotLoaded}, nil
	}
	counter := s.counter.Load()
	out := flashsale.GateOutcome{Remaining: counter, Epoch: s.epoch.Load()}
	idemKey := key{r.UserID, r.IdempotencyKey}
	if prev, ok := b.idem.get(hs.idem, idemKey); ok {
		if prev.RequestHash != r.RequestHash {
			out.Verdict = flashsale.VerdictKeyReused
			return out, nil
		}
		out.Verdict, out.Hold = flashsale.VerdictReplayed, *prev
		return out, nil
	}
	q := int64(r.Quantity)
	switch {
	case flags&flagPaused != 0:
		out.Verdict = flashsale.VerdictPaused
	case counter+s.won-s.restocked != s.initial:
		// Written behind the gate: sell nothing on a counter nobody can
		// vouch for, until a rebuild (the invariant watcher pauses the
		// sale and names the writer).
		out.Verdict = flashsale.VerdictPaused
	case r.Epoch != out.Epoch:
		out.Verdict = flashsale.VerdictStaleEpoch
	case r.AdmissionID != "" && s.spent(hs.adm, r.AdmissionID):
		out.Verdict = flashsale.VerdictAdmissionUsed
	case counter < q:
		out.Verdict = flashsale.VerdictSoldOut
	case s.holdsFor(hs.user, r.UserID) || (r.Instrument != "" && s.instrumentHolds(hs.instr, r.Instrument)):
		out.Verdict = flashsale.VerdictLimitReached
	}
	if out.Verdict != 0 {
		return out, nil
	}
	if _, dup := b.holds.get(hs.res, key{a: r.ReservationID}); dup {
		return flashsale.GateOutcome{}, errDuplicate(r.ReservationID)
	}

	f := s.filter.Load()
	added := 1
	s.seq.Add(1)
	counter -= q
	s.counter.Store(counter)
	f.add(hs.idem)
	if r.AdmissionID != "" {
		f.add(hs.adm)
		added++
	}
	s.seq.Add(1)

	h := b.newHold()
	*h = *won
	b.holds.put(hs.res, key{a: h.ReservationID}, h)
	b.buyers.put(hs.user, key{a: h.UserID}, h)
	if h.Instrument != "" {
		b.instruments.put(hs.instr, key{a: h.Instrument}, h)
	}
	b.idem.put(hs.idem, idemKey, h)
	if r.AdmissionID != "" {
		b.spent.put(hs.adm, key{a: r.AdmissionID}, h.AdmissionID)
	}
	s.won += q
	// The audited counter moves by the audited delta, not to the counter:
	// an unaudited write before this one stays visible.
	s.audited -= q
	// The entry is dated by the hold, that is by the request: its Now is
	// when the server took it.
	s.audit.addReserve(h, counter)

	s.filterEntries += added
	if s.filterEntries >= s.filterRebuildAt {
		s.refilter()
	}
	out.Verdict, out.Hold, out.Remaining = flashsale.VerdictWon, *h, counter
	return out, nil
}

func (s *sale) holdsFor(hUser uint64, userID string) bool {
	b := s.book.Load()
	_, ok := b.buyers.get(hUser, key{a: userID})
	return ok
}

func (s *sale) instrumentHolds(hInstr uint64, fingerprint string) bool {
	b := s.book.Load()
	_, ok := b.instruments.get(hInstr, key{a: fingerprint})
	return ok
}

// spent reports whether the admission was spent by a win.
func (s *sale) spent(h uint64, admissionID string) bool {
	_, ok := s.book.Load().spent.get(h, key{a: admissionID})
	return ok
}

// refilter replaces the filter, once it has taken as many entries as it
// was sized for, with one made from the live keys. The threshold doubles
// with the keys, so the work is constant per win on average.
func (s *sale) refilter() {
	b := s.book.Load()
	live := b.idem.len() + b.spent.len()
	f := newFilter(2 * live)
	b.idem.each(func(h uint64, _ *flashsale.Hold) { f.add(h) })
	b.spent.each(func(h uint64, _ string) { f.add(h) })
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

// giveBack returns the hold's units to stock, auditing it as op, and
// reports whether there was such a hold. The caller holds mu.
func (s *sale) giveBack(reservationID, op, source string, at time.Time) bool {
	b := s.book.Load()
	hRes := s.hash(reservationID)
	h, ok := b.holds.get(hRes, key{a: reservationID})
	if !ok {
		return false
	}
	q := int64(h.Quantity)
	s.seq.Add(1)
	counter := s.counter.Add(q)
	s.seq.Add(1)
	b.holds.del(hRes, key{a: reservationID})
	// The shopper or the instrument may hold again under another
	// reservation by now (after a rebuild, say); leave that one alone.
	hUser := s.hash(h.UserID)
	if live, ok := b.buyers.get(hUser, key{a: h.UserID}); ok && live.ReservationID == reservationID {
		b.buyers.del(hUser, key{a: h.UserID})
	}
	if h.Instrument != "" {
		hInstr := s.hash(h.Instrument)
		if live, ok := b.instruments.get(hInstr, key{a: h.Instrument}); ok && live.ReservationID == reservationID {
			b.instruments.del(hInstr, key{a: h.Instrument})
		}
	}
	s.restocked += q
	s.audited += q
	s.audit.add(flashsale.AuditEntry{At: at, Op: op, Source: source, Delta: q, Counter: counter, ReservationID: reservationID})
	return true
}

// forgetKey forgets the shopper's idempotency key if it names the
// reservation, and reports whether it did. The filter keeps the key's bits;
// that costs a locked lookup for this key later, never a wrong answer. The
// caller holds mu.
func (s *sale) forgetKey(userID, idemKey, reservationID string) bool {
	b := s.book.Load()
	_, hIdem := s.hashKey(userID, idemKey)
	k := key{userID, idemKey}
	if prev, ok := b.idem.get(hIdem, k); ok && prev.ReservationID == reservationID {
		b.idem.del(hIdem, k)
		return true
	}
	return false
}

// unspend forgets that the admission was spent, so a reserve may spend it
// again. Like a forgotten key, it keeps its bits in the filter. The caller
// holds mu.
func (s *sale) unspend(admissionID string) {
	s.book.Load().spent.del(s.hash(admissionID), key{a: admissionID})
}

// rebuiltBook returns a book and a filter holding the holds and the spent
// admissions (with each hold's own), hashed with the sale's seed. It takes
// no lock: the sale's seed never changes.
func (s *sale) rebuiltBook(initial int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission) (*book, *filter) {
	n := max(initial, int64(len(holds)), int64(len(spent)))
	b := newBook(n)
	f := newFilter(int(min(2*n, filterMaxBits)))
	spend := func(admissionID string) {
		if admissionID == "" {
			return
		}
		h := s.hash(admissionID)
		if _, ok := b.spent.get(h, key{a: admissionID}); !ok {
			b.spent.put(h, key{a: admissionID}, admissionID)
			f.add(h)
		}
	}
	kept := make([]flashsale.Hold, len(holds))
	copy(kept, holds)
	for i := range kept {
		h := &kept[i]
		b.holds.put(s.hash(h.ReservationID), key{a: h.ReservationID}, h)
		hUser, hIdem := s.hashKey(h.UserID, h.IdempotencyKey)
		b.buyers.put(hUser, key{a: h.UserID}, h)
		if h.Instrument != "" {
			b.instruments.put(s.hash(h.Instrument), key{a: h.Instrument}, h)
		}
		if h.IdempotencyKey != "" {
			b.idem.put(hIdem, key{h.UserID, h.IdempotencyKey}, h)
			f.add(hIdem)
		}
		// A live hold took its turn.
		spend(h.AdmissionID)
	}
	for _, sp := range spent {
		spend(sp.AdmissionID)
	}
	return b, f
}
