package memory

import (
	"slices"

	"github.com/flashsale/flashsale"
)

// auditLog keeps the newest limit entries of a sale's audit log in a ring,
// so a long sale cannot grow it without bound. It is guarded by the sale's
// lock.
//
// A win is recorded by its hold, which already carries everything its
// entry says but the counter (its time, its units, its reservation id),
// so the commonest append writes three words under the lock instead of a
// whole entry (thirteen, four of them pointers), and a sale's ring takes
// a quarter of the room. Other mutations are rare and keep a whole entry.
type auditLog struct {
	limit int
	// seq is the sequence number of the newest entry; entries are
	// numbered 1, 2, ... in the order they were added.
	seq     int64
	records []auditRecord
	// oldest is the index of the oldest record once the ring is full.
	oldest int
}

// auditRecord is one entry: a reserve's (hold set) or any other
// (entry set).
type auditRecord struct {
	hold    *flashsale.Hold
	entry   *flashsale.AuditEntry
	counter int64
}

// expand returns the audit entry the record stands for, numbered seq.
func (r auditRecord) expand(seq int64) flashsale.AuditEntry {
	if r.entry != nil {
		e := *r.entry
		e.Seq = seq
		return e
	}
	return flashsale.AuditEntry{Seq: seq, At: r.hold.CreatedAt, Op: "reserve", Source: "reserve",
		Delta: -int64(r.hold.Quantity), Counter: r.counter, ReservationID: r.hold.ReservationID}
}

// add appends e (its Seq is ignored), dropping the oldest entry when the
// log is full.
func (a *auditLog) add(e flashsale.AuditEntry) { a.push(auditRecord{entry: &e, counter: e.Counter}) }

// addReserve appends the entry of the win that made h and left the
// counter at counter. h must not change afterwards.
func (a *auditLog) addReserve(h *flashsale.Hold, counter int64) {
	a.push(auditRecord{hold: h, counter: counter})
}

func (a *auditLog) push(r auditRecord) {
	a.seq++
	if len(a.records) < a.limit {
		a.records = append(a.records, r)
		return
	}
	a.records[a.oldest] = r
	a.oldest = (a.oldest + 1) % a.limit
}

// reserve makes room for about n more entries (within the limit), so that
// a sale does not regrow its log while it sells.
func (a *auditLog) reserve(n int) {
	if len(a.records) < a.limit {
		a.records = slices.Grow(a.records, min(n, a.limit-len(a.records)))
	}
}

// newest returns up to n of the newest entries, oldest first.
func (a *auditLog) newest(n int) []flashsale.AuditEntry {
	n = min(n, len(a.records))
	if n <= 0 {
		return nil
	}
	out := make([]flashsale.AuditEntry, 0, n)
	first := a.seq - int64(n) + 1
	for i := len(a.records) - n; i < len(a.records); i++ {
		out = append(out, a.records[(a.oldest+i)%len(a.records)].expand(first+int64(len(out))))
	}
	return out
}
