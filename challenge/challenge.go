// Package challenge is the proof of work at the waiting room's admission
// step: one challenge in the funnel, where it costs the most to automation
// and least to everyone else, rather than on every request.
//
// A challenge is stateless: its salt is bound, by a MAC, to the sale, the
// shopper and an expiry, so the edge issues and checks it with no lookup,
// and a salt solved for one shopper is worthless to another. A solved salt
// is spent once (the only write, and only on success): a wrong nonce does
// not spend it. Difficulty adapts per shopper: harder for young accounts
// and under queue pressure, easier for long-standing ones, and solvable on
// a phone in seconds at the defaults.
//
// Overselling is neither prevented nor caused here; the gate (packages
// memory and redis) counts the stock.
package challenge

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Algorithm is the contract's only proof of work: find a decimal nonce such
// that SHA-256(salt + nonce) begins with at least difficultyBits zero bits.
const Algorithm = "sha256"

// Challenge is what the waiting room hands an admitted shopper to solve.
type Challenge struct {
	Algorithm      string
	Salt           string
	DifficultyBits int
	Expires        time.Time
}

// Spender marks a salt used, once, and tells whether it was (waitroom.Queue
// does).
type Spender interface {
	Spend(ctx context.Context, saleID, id string, ttl time.Duration) (bool, error)
	Spent(ctx context.Context, saleID, id string) (bool, error)
}

// Issuer issues and checks challenges. Safe for concurrent use.
type Issuer struct {
	key    []byte
	spent  Spender
	window time.Duration
}

// NewIssuer returns an Issuer whose salts are MACed with key (derive it
// from the token keyring, so every edge shares it) and spent in spent.
func NewIssuer(key []byte, spent Spender) *Issuer {
	return &Issuer{key: append([]byte(nil), key...), spent: spent, window: time.Minute}
}

// ErrFailed is the contract's challenge_failed: a wrong nonce, an expired,
// foreign or forged salt, or one already spent.
var ErrFailed = errors.New("challenge failed")

// Issue returns the shopper's challenge at the given difficulty. Within one
// minute every call returns the same salt, so a client that polls while it
// solves does not have to start over; the salt lives one to two minutes.
func (i *Issuer) Issue(saleID, userID string, difficulty int, now time.Time) Challenge {
	expires := time.Unix((now.Unix()/int64(i.window.Seconds())+2)*int64(i.window.Seconds()), 0).UTC()
	head := "v1." + strconv.FormatInt(expires.Unix(), 10) + "." + strconv.Itoa(difficulty)
	return Challenge{Algorithm: Algorithm, Salt: head + "." + i.mac(saleID, userID, head), DifficultyBits: difficulty, Expires: expires}
}

func (i *Issuer) mac(saleID, userID, head string) string {
	m := hmac.New(sha256.New, i.key)
	m.Write([]byte(saleID))
	m.Write([]byte{0})
	m.Write([]byte(userID))
	m.Write([]byte{0})
	m.Write([]byte(head))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// Verify checks a solution: the salt is this issuer's, for this sale and
// shopper, unexpired; the nonce is a decimal string that meets the salt's
// difficulty; and the salt was not spent before. Only then is it spent.
// It returns ErrFailed (wrapped with the reason), or a Spender's error.
func (i *Issuer) Verify(ctx context.Context, saleID, userID, salt, nonce string, now time.Time) error {
	expires, difficulty, ok := i.parse(saleID, userID, salt)
	switch {
	case !ok:
		return fmtFailed("the salt is not one this waiting room gave you")
	case !now.Before(expires):
		return fmtFailed("the salt has expired; ask for a new one")
	case !decimal(nonce):
		return fmtFailed("the nonce must be a decimal number")
	case LeadingZeroBits(salt, nonce) < difficulty:
		return fmtFailed("the nonce does not solve the challenge")
	}
	// Marked a little past the salt's life, so no clock can outrun it.
	ok, err := i.spent.Spend(ctx, saleID, "pow:"+salt, expires.Sub(now)+time.Minute)
	if err != nil {
		return err
	}
	if !ok {
		return fmtFailed("this salt was already used")
	}
	return nil
}

// Solved reports whether the challenge's salt was already solved and spent
// (by its shopper: a salt is bound to one). The waiting room then asks for
// no new proof of work in the salt's window, instead of handing the
// shopper a salt it can never be accepted for again.
func (i *Issuer) Solved(ctx context.Context, saleID string, c Challenge) (bool, error) {
	return i.spent.Spent(ctx, saleID, "pow:"+c.Salt)
}

type failed string

func (f failed) Error() string { return "challenge failed: " + string(f) }
func (f failed) Unwrap() error { return ErrFailed }

func fmtFailed(why string) error { return failed(why) }

func (i *Issuer) parse(saleID, userID, salt string) (time.Time, int, bool) {
	if len(salt) > 128 {
		return time.Time{}, 0, false
	}
	head, mac, ok := cutLast(salt, '.')
	if !ok || !hmac.Equal([]byte(mac), []byte(i.mac(saleID, userID, head))) {
		return time.Time{}, 0, false
	}
	parts := strings.Split(head, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return time.Time{}, 0, false
	}
	exp, err1 := strconv.ParseInt(parts[1], 10, 64)
	d, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		return time.Time{}, 0, false
	}
	return time.Unix(exp, 0), d, true
}

func cutLast(s string, sep byte) (string, string, bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func decimal(s string) bool {
	if len(s) == 0 || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// LeadingZeroBits returns how many zero bits SHA-256(salt + nonce) begins
// with.
func LeadingZeroBits(salt, nonce string) int {
	h := sha256.New()
	h.Write([]byte(salt))
	h.Write([]byte(nonce))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Solve finds the smallest nonce that solves salt at difficulty, as a
// client does: by trying 0, 1, 2, ... It is for tests, the rehearsal's
// shoppers and the benchmark of solve against verify cost.
func Solve(salt string, difficulty int) string {
	h := sha256.New()
	var sum [sha256.Size]byte
	buf := make([]byte, 0, 24)
	for n := uint64(0); ; n++ {
		buf = strconv.AppendUint(buf[:0], n, 10)
		h.Reset()
		h.Write([]byte(salt))
		h.Write(buf)
		h.Sum(sum[:0])
		if zeroBits(sum[:]) >= difficulty {
			return string(buf)
		}
	}
}

func zeroBits(sum []byte) int {
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Policy sets a shopper's difficulty from the sale's base (its
// challengeBits; zero means no challenge at all).
type Policy struct {
	// MaxBits caps any difficulty (default 22: about 4 million hashes, a
	// few seconds of a phone's JavaScript; see docs/benchmarks.md).
	MaxBits int
}

// Difficulty returns the bits asked of a shopper: the base, plus 4 for an
// account younger than a week (or of unknown age) and 2 younger than a
// month, minus 2 for one older than a year; plus 1 to 3 as the queue
// outnumbers the units left ten, a hundred or a thousand times. It stays
// within base−4 and base+8, at least 1 and at most MaxBits.
func (p Policy) Difficulty(base int, accountCreated time.Time, waiting, unitsLeft int64, now time.Time) int {
	if base <= 0 {
		return 0
	}
	d := base
	age := now.Sub(accountCreated)
	switch {
	case accountCreated.IsZero() || age < 7*24*time.Hour:
		d += 4
	case age < 30*24*time.Hour:
		d += 2
	case age > 365*24*time.Hour:
		d -= 2
	}
	pressure := float64(waiting) / float64(max(unitsLeft, 1))
	switch {
	case pressure > 1000:
		d += 3
	case pressure > 100:
		d += 2
	case pressure > 10:
		d++
	}
	maxBits := p.MaxBits
	if maxBits <= 0 {
		maxBits = 22
	}
	return min(max(d, base-4, 1), base+8, maxBits)
}
