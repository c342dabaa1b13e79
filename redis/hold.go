package redis

import (
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
