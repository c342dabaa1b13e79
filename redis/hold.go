package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// sep joins the fields of a stored hold and of an idem field. Requests and
// holds that contain it are refused, so it can never be ambiguous.
const sep = "\x1f"

// idemField names a shopper's idempotency key in the idem hash.
func idemField(userID, key string) string { return userID + sep + key }

func holdOf(r *flashsale.GateReserve) flashsale.Hold {
	return flashsale.Hold{
		ReservationID:  r.ReservationID,
		UserID:         r.UserID,
		Quantity:       r.Quantity,
		Instrument:     r.Instrument,
		IdempotencyKey: r.IdempotencyKey,
		RequestHash:    r.RequestHash,
		AdmissionID:    r.AdmissionID,
		CreatedAt:      r.Now,
	}
}

// holdFields is how many fields an encoded hold has.
const holdFields = 8

// encodeHold writes a hold as reservation id, user, quantity, instrument,
// key, request hash, admission id and creation time (Unix nanoseconds, ""
// for the zero time). The scripts read only the first four fields (and
// match the reservation id as a prefix), so fields after them may be added
// without touching the scripts; decodeHold refuses any other count.
func encodeHold(h flashsale.Hold) string { return string(appendHold(nil, &h)) }

// appendHold appends encodeHold's encoding of h to buf.
func appendHold(buf []byte, h *flashsale.Hold) []byte {
	buf = append(buf, h.ReservationID...)
	buf = append(append(buf, sep...), h.UserID...)
	buf = strconv.AppendInt(append(buf, sep...), int64(h.Quantity), 10)
	buf = append(append(buf, sep...), h.Instrument...)
	buf = append(append(buf, sep...), h.IdempotencyKey...)
	buf = append(append(buf, sep...), h.RequestHash...)
	buf = append(append(buf, sep...), h.AdmissionID...)
	buf = append(buf, sep...)
	if !h.CreatedAt.IsZero() {
		buf = strconv.AppendInt(buf, h.CreatedAt.UnixNano(), 10)
	}
	return buf
}

func decodeHold(s string) (flashsale.Hold, error) {
	f := strings.Split(s, sep)
	if len(f) != holdFields {
		return flashsale.Hold{}, fmt.Errorf("redis gate: stored hold %q has %d fields, want %d", s, len(f), holdFields)
	}
	q, err := strconv.Atoi(f[2])
	if err != nil {
		return flashsale.Hold{}, fmt.Errorf("redis gate: stored hold %q: quantity: %w", s, err)
	}
	h := flashsale.Hold{
		ReservationID: f[0], UserID: f[1], Quantity: q, Instrument: f[3],
		IdempotencyKey: f[4], RequestHash: f[5], AdmissionID: f[6],
	}
	if f[7] != "" {
		ns, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil {
			return flashsale.Hold{}, fmt.Errorf("redis gate: stored hold %q: time: %w", s, err)
		}
		h.CreatedAt = time.Unix(0, ns).UTC()
	}
	return h, nil
}

// checkReserve rejects requests that only a bug could send.
func checkReserve(r *flashsale.GateReserve) error {
	switch {
	case r.Quantity < 1:
		return fmt.Errorf("redis gate: reserve of %d units: quantity must be at least 1", r.Quantity)
	case r.SaleID == "" || r.ReservationID == "" || r.UserID == "" || r.IdempotencyKey == "":
		return errors.New("redis gate: reserve needs a sale id, a reservation id, a user id and an idempotency key")
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

var errSep = errors.New(`redis gate: ids, keys, fingerprints and hashes must not contain "\x1f"`)

func hasSep(s string) bool { return strings.IndexByte(s, sep[0]) >= 0 }
