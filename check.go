package flashsale

import (
	"errors"
	"fmt"
)

// ErrSeparator: an id, key, fingerprint or hash contains the byte 0x1f,
// the one byte none of them may contain: the gates join fields with it.
var ErrSeparator = errors.New(`ids, keys, fingerprints and hashes must not contain "\x1f"`)

// Validate rejects a reserve that only a bug could send: every gate runs
// it before anything else.
func (r *GateReserve) Validate() error {
	switch {
	case r.Quantity < 1:
		return fmt.Errorf("reserve of %d units: quantity must be at least 1", r.Quantity)
	case r.SaleID == "" || r.ReservationID == "" || r.UserID == "" || r.IdempotencyKey == "":
		return errors.New("reserve needs a sale id, a reservation id, a user id and an idempotency key")
	case HasSeparator(r.SaleID) || HasSeparator(r.ReservationID) || HasSeparator(r.UserID) ||
		HasSeparator(r.IdempotencyKey) || HasSeparator(r.Instrument) || HasSeparator(r.AdmissionID) ||
		HasSeparator(r.RequestHash):
		return ErrSeparator
	}
	return nil
}

// ValidateHolds rejects holds a reserve could not have made (a gate loads
// them when it is rebuilt from the record) and returns the units they take.
func ValidateHolds(holds []Hold) (int64, error) {
	var units int64
	seen := make(map[string]struct{}, len(holds))
	for i := range holds {
		h := &holds[i]
		switch {
		case h.Quantity < 1 || h.ReservationID == "" || h.UserID == "":
			return 0, fmt.Errorf("hold %q: needs a reservation id, a user id and a quantity of at least 1", h.ReservationID)
		case HasSeparator(h.ReservationID) || HasSeparator(h.UserID) || HasSeparator(h.Instrument) ||
			HasSeparator(h.IdempotencyKey) || HasSeparator(h.AdmissionID) || HasSeparator(h.RequestHash):
			return 0, ErrSeparator
		}
		if _, dup := seen[h.ReservationID]; dup {
			return 0, fmt.Errorf("hold %q appears twice", h.ReservationID)
		}
		seen[h.ReservationID] = struct{}{}
		units += int64(h.Quantity)
	}
	return units, nil
}

// ValidateSpent rejects spent admissions a reserve could not have made: an
// empty user or admission id, or one with the separator byte 0x1f.
func ValidateSpent(spent []SpentAdmission) error {
	for _, sp := range spent {
		switch {
		case sp.UserID == "" || sp.AdmissionID == "":
			return fmt.Errorf("spent admission %q of %q: needs a user id and an admission id", sp.AdmissionID, sp.UserID)
		case HasSeparator(sp.UserID) || HasSeparator(sp.AdmissionID):
			return ErrSeparator
		}
	}
	return nil
}

// HasSeparator reports whether s contains the separator byte 0x1f. It runs on every
// reserve, sold-out ones included, over a handful of short ids, where a
// word at a time beats a call to strings.IndexByte per id.
func HasSeparator(s string) bool {
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
