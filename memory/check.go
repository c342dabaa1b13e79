package memory

import (
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// checkReserve rejects requests that only a bug could send.
func checkReserve(r *flashsale.GateReserve) error {
	switch {
	case r.Quantity < 1:
		return fmt.Errorf("memory gate: reserve of %d units: quantity must be at least 1", r.Quantity)
	case r.SaleID == "" || r.ReservationID == "" || r.UserID == "" || r.IdempotencyKey == "":
		return errors.New("memory gate: reserve needs a sale id, a reservation id, a user id and an idempotency key")
	case hasSep(r.SaleID) || hasSep(r.ReservationID) || hasSep(r.UserID) || hasSep(r.IdempotencyKey) ||
		hasSep(r.Instrument) || hasSep(r.AdmissionID) || hasSep(r.RequestHash):
		return errSep
	}
	return nil
}

// checkHolds rejects holds a reserve could not have made and returns the
// units they take.
func checkHolds(holds []flashsale.Hold) (int64, error) {
	var units int64
	seen := make(map[string]struct{}, len(holds))
	for i := range holds {
		h := &holds[i]
		switch {
		case h.Quantity < 1 || h.ReservationID == "" || h.UserID == "":
			return 0, fmt.Errorf("hold %q: needs a reservation id, a user id and a quantity of at least 1", h.ReservationID)
		case hasSep(h.ReservationID) || hasSep(h.UserID) || hasSep(h.Instrument) || hasSep(h.IdempotencyKey) ||
			hasSep(h.AdmissionID) || hasSep(h.RequestHash):
			return 0, errSep
		}
		if _, dup := seen[h.ReservationID]; dup {
			return 0, fmt.Errorf("hold %q appears twice", h.ReservationID)
		}
		seen[h.ReservationID] = struct{}{}
		units += int64(h.Quantity)
	}
	return units, nil
}

var errSep = errors.New(`memory gate: ids, keys, fingerprints and hashes must not contain "\x1f"`)

// hasSep reports whether s contains "\x1f". It runs on every reserve,
// sold-out ones included, over a handful of short ids, where a word at a
// time beats a call to strings.IndexByte per id.
func hasSep(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(s) >= 8 {
		_ = s[7]
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		// A byte of w is 0x1f iff that byte of x is zero; the classic test
		// for a zero byte is exact with the &^ x term.
		x := w ^ 0x1f*ones
		if (x-ones)&^x&highs != 0 {
			return true
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1f {
			return true
		}
	}
	return false
}

func errDuplicate(reservationID string) error {
	return fmt.Errorf("memory gate: reservation id %q already holds units", reservationID)
}
