package memory

import (
	"slices"

	"github.com/flashsale/flashsale"
)

// auditLog keeps the newest limit entries of a sale's audit log in a ring,
// so a long sale cannot grow it without bound. It is guarded by the sale's
// lock.
type auditLog struct {
	limit   int
	seq     int64
	entries []flashsale.AuditEntry
	// oldest is the index of the oldest entry once the ring is full.
	oldest int
}

// add numbers e with the next sequence number and appends it, dropping the
// oldest entry when the log is full.
func (a *auditLog) add(e flashsale.AuditEntry) {
	a.seq++
	e.Seq = a.seq
	if len(a.entries) < a.limit {
		a.entries = append(a.entries, e)
		return
	}
	a.entries[a.oldest] = e
	a.oldest = (a.oldest + 1) % a.limit
}

// reserve makes room for about n more entries (within the limit), so that
// a sale does not regrow its log while it sells.
func (a *auditLog) reserve(n int) {
	if len(a.entries) < a.limit {
		a.entries = slices.Grow(a.entries, min(n, a.limit-len(a.entries)))
	}
}

// newest returns up to n of the newest entries, oldest first.
func (a *auditLog) newest(n int) []flashsale.AuditEntry {
	n = min(n, len(a.entries))
	if n <= 0 {
		return nil
	}
	out := make([]flashsale.AuditEntry, 0, n)
	for i := len(a.entries) - n; i < len(a.entries); i++ {
		out = append(out, a.entries[(a.oldest+i)%len(a.entries)])
	}
	return out
}
