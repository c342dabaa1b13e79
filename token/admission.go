package token

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// Admission lets one shopper reserve once in one sale until it expires. The
// stock gate spends its ID at most once, and only with a win.
type Admission struct {
	UserID string
	SaleID string
	// ID is what the gate spends: AdmissionID of the shopper's admission.
	ID string
	// Expires is the end of the admission, kept to the millisecond; a
	// verified admission's Expires is in UTC.
	Expires time.Time
	// Epoch is the gate epoch the admission was issued under; the gate
	// refuses an admission of an older epoch.
	Epoch int64
}

// SignAdmission returns a as an "adm_" token signed with the ring's signing
// key. Expires is truncated to the millisecond. It is safe for concurrent
// use.
func (r *Keyring) SignAdmission(a Admission) string {
	return r.sign(kindAdmission, formatVersion, "", func(b []byte) []byte {
		b = appendString(b, a.UserID)
		b = appendString(b, a.SaleID)
		b = appendString(b, a.ID)
		b = appendVarint(b, a.Expires.UnixMilli())
		return appendVarint(b, a.Epoch)
	})
}

// VerifyAdmission returns the admission s holds if a key of the ring signed
// it as an admission. An admission is valid while now is before Expires.
//
// A malformed or forged token, a ticket, a token of a key the ring no longer
// holds, or input over MaxLen bytes is ErrInvalid, with a zero Admission. A
// genuine admission whose time is up returns the decoded Admission together
// with ErrExpired, so the caller can still tell an expired admission of this
// shopper and sale from one of another. It is safe for concurrent use and
// allocates only the returned strings.
func (r *Keyring) VerifyAdmission(s string, now time.Time) (Admission, error) {
	sc := r.getScratch()
	if sc == nil {
		return Admission{}, ErrInvalid
	}
	defer r.scratch.Put(sc)
	p, _, ok := r.open(sc, s, kindAdmission, "")
	if !ok {
		return Admission{}, ErrInvalid
	}
	u0, u1 := p.span()
	s0, s1 := p.span()
	i0, i1 := p.span()
	expires := p.varint()
	epoch := p.varint()
	if !p.done() {
		return Admission{}, ErrInvalid
	}
	str := string(p.b[u0:i1]) // the three strings in one allocation
	a := Admission{
		UserID:  str[:u1-u0],
		SaleID:  str[s0-u0 : s1-u0],
		ID:      str[i0-u0:],
		Expires: time.UnixMilli(expires).UTC(),
		Epoch:   epoch,
	}
	if !now.Before(a.Expires) {
		return a, ErrExpired
	}
	return a, nil
}

// AdmissionID returns the id of the shopper's admission to the sale: 32 hex
// digits of a SHA-256 over an unambiguous encoding of the two (so ("ab",
// "c") and ("a", "bc") differ). It is the shopper's one turn in the sale: a
// shopper has one place in a sale's queue, and the gate lets one admission
// of that id win (see flashsale.Gate). It is deterministic and depends on
// nothing else, so every admission handed to the shopper has the same id:
// every status poll's; the one after an expired token; the one under a new
// gate epoch after a rebuild; the one of a place given again by a queue
// that lost its state (a restart, a Redis without persistence). None of
// them is a fresh turn. It is keyed by nothing, so a key rotation does not
// mint a second spendable id either. Safe for concurrent use.
func AdmissionID(saleID, userID string) string {
	b := make([]byte, 0, 64+len(saleID)+len(userID))
	b = append(b, "flashsale admission id v2\x00"...)
	b = appendString(b, saleID)
	b = appendString(b, userID)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }
