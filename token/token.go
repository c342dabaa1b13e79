// Package token signs and verifies the waiting room's tokens: the ticket,
// which holds a shopper's place in a sale's queue, and the admission, which
// lets the shopper reserve once. Both are held by the client, so the waiting
// room keeps no state for two million shoppers, and both verify with no
// lookup, so an edge server can check one per status poll.
//
// A token is a kind prefix ("tkt_" or "adm_"), the base64url (no padding) of
// a compact binary payload, a dot, and the base64url of an HMAC-SHA256 of the
// prefix and payload, truncated to 16 bytes:
//
//	tkt_<payload>.<mac>
//
// The payload is a version byte, a kind byte, the signing key's id and the
// fields, strings length-prefixed and integers as varints, times in Unix
// milliseconds. The kind and key id are inside the MAC, so a ticket never
// verifies as an admission and a token names the key that signed it, which
// is how keys rotate (see ParseKeys). Tokens are signed, not encrypted: a
// shopper can read its own position and user id, which it knows anyway.
//
// A ticket (format 3) does not carry its sale's id: the MAC covers the sale
// id after the payload, length-prefixed, and the verifier supplies it (the
// sale the poll names, which an edge holds in memory). A ticket of one sale
// then fails the MAC in another, as it failed the comparison when it carried
// the id, and two million tickets are each about forty bytes shorter for the
// client and for whoever keeps them. Tickets of format 2, which carried the
// sale id, still verify (and are checked against the sale given), so that
// every ticket handed out before an upgrade stays valid.
//
// Verification rejects input longer than MaxLen before decoding anything,
// and never panics; it allocates only the strings it returns.
//
// Overselling is neither prevented nor caused here; an admission token is
// spent once in the gate's atomic step (packages memory and redis).
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"sync"
)

// MaxLen is the longest token that verifies. A token whose strings add up to
// more than about 640 bytes signs into a longer one, which then fails
// verification with ErrInvalid; user ids (at most 200 bytes, see package
// identity), sale ids and admission ids are far below that.
const MaxLen = 1024

// Errors of verification. They are the only errors Verify methods return.
var (
	// ErrInvalid: the token is malformed, forged, of the wrong kind, or
	// signed by a key the ring does not hold.
	ErrInvalid = errors.New("token: invalid token")
	// ErrExpired: the admission was genuine but its time is up.
	ErrExpired = errors.New("token: admission expired")
)

const (
	// formatVersion is the admission's format, and the ticket's before
	// ticketVersion; both are still verified.
	formatVersion = 2
	// ticketVersion is the ticket's format: the sale id bound in the MAC,
	// not carried.
	ticketVersion = 3
	macLen        = 16 // bytes of HMAC-SHA256 kept; 128 bits is beyond forging by trial
	macB64Len     = 22 // base64url length of macLen bytes
	prefixLen     = 4
)

type kind byte

const (
	kindTicket    kind = 1
	kindAdmission kind = 2
)

// prefix returns the text every token of kind k begins with.
func (k kind) prefix() string {
	if k == kindTicket {
		return "tkt_"
	}
	return "adm_"
}

// Keyring signs tokens with its first key and verifies tokens signed by any
// of its keys. It is immutable and safe for concurrent use by multiple
// goroutines. The zero Keyring holds no keys: its Verify methods return
// ErrInvalid and its Sign methods panic. Make one with NewKeyring.
type Keyring struct {
	keys []Key // keys[0] signs; secrets are the ring's own copies
	// scratch pools the per-call buffers and one HMAC state per key, so a
	// verification allocates nothing but the strings it returns.
	scratch sync.Pool
}

// scratch is the working memory of one sign or verify call.
type scratch struct {
	// buf holds the MAC input: the prefix, then the payload.
	buf  [MaxLen]byte
	mac  [macLen]byte // the decoded MAC
	sum  [sha256.Size]byte
	macs []hash.Hash // by key index, made on first use
}

// NewKeyring returns a ring that signs with keys[0] and verifies with every
// key. It copies the secrets, so later changes to keys do not affect it. It
// returns an error if no key is given, a key is invalid (see Key) or an id
// is given twice.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("token: a keyring needs at least one key")
	}
	r := &Keyring{keys: make([]Key, 0, len(keys))}
	for _, k := range keys {
		if err := k.validate(); err != nil {
			return nil, err
		}
		for _, prev := range r.keys {
			if prev.ID == k.ID {
				return nil, errors.New("token: key id " + k.ID + " is given twice")
			}
		}
		r.keys = append(r.keys, Key{ID: k.ID, Secret: append([]byte(nil), k.Secret...)})
	}
	n := len(r.keys)
	r.scratch.New = func() any { return &scratch{macs: make([]hash.Hash, n)} }
	return r, nil
}

// SigningKeyID returns the id of the key the ring signs with, or "" for a
// zero Keyring.
func (r *Keyring) SigningKeyID() string {
	if len(r.keys) == 0 {
		return ""
	}
	return r.keys[0].ID
}

// getScratch returns working memory from the pool, or nil for a zero
// Keyring, whose pool has no New.
func (r *Keyring) getScratch() *scratch {
	sc, _ := r.scratch.Get().(*scratch)
	return sc
}

// macOf returns the truncated HMAC of in under key i, in sc.sum.
func (r *Keyring) macOf(sc *scratch, i int, in []byte) []byte {
	h := sc.macs[i]
	if h == nil {
		h = hmac.New(sha256.New, r.keys[i].Secret)
		sc.macs[i] = h
	} else {
		h.Reset()
	}
	h.Write(in)
	return h.Sum(sc.sum[:0])[:macLen]
}

// sign returns the token of kind k and format version whose payload fields
// are appended by fields after the header. bound, when version is
// ticketVersion, is the sale id the MAC covers after the payload without the
// token carrying it.
func (r *Keyring) sign(k kind, version byte, bound string, fields func([]byte) []byte) string {
	sc := r.getScratch()
	if sc == nil {
		panic("token: sign with a zero Keyring; use NewKeyring")
	}
	defer r.scratch.Put(sc)

	in := append(sc.buf[:0], k.prefix()...)
	in = append(in, version, byte(k))
	in = appendString(in, r.keys[0].ID)
	in = fields(in)
	end := len(in)
	if version == ticketVersion {
		// Past MaxLen the append leaves sc.buf: such a token does not
		// verify anyway (see MaxLen).
		in = appendString(in, bound)
	}
	mac := r.macOf(sc, 0, in)

	payload := in[prefixLen:end]
	out := make([]byte, 0, prefixLen+base64.RawURLEncoding.EncodedLen(len(payload))+1+macB64Len)
	out = append(out, k.prefix()...)
	out = base64.RawURLEncoding.AppendEncode(out, payload)
	out = append(out, '.')
	out = base64.RawURLEncoding.AppendEncode(out, mac)
	return string(out)
}

// open checks that s is a genuine token of kind k and returns a reader of
// its fields, the part of the payload after the header, which is in sc.buf,
// and the token's format version. A ticket of ticketVersion is checked
// against bound, the sale id its MAC covers; other tokens carry their sale
// id in their fields, for the caller to compare. The caller parses the
// fields and then puts sc back.
func (r *Keyring) open(sc *scratch, s string, k kind, bound string) (reader, byte, bool) {
	if len(s) > MaxLen || len(s) < prefixLen+1+macB64Len || s[:prefixLen] != k.prefix() {
		return reader{}, 0, false
	}
	dot := len(s) - macB64Len - 1
	if s[dot] != '.' {
		return reader{}, 0, false
	}
	if n, ok := decodeB64(sc.mac[:], s[dot+1:]); !ok || n != macLen {
		return reader{}, 0, false
	}
	copy(sc.buf[:], s[:prefixLen])
	n, ok := decodeB64(sc.buf[prefixLen:], s[prefixLen:dot])
	if !ok {
		return reader{}, 0, false
	}
	in := sc.buf[:prefixLen+n]

	p := reader{b: in[prefixLen:]}
	version, kd := p.byte(), kind(p.byte())
	kid := p.bytes()
	if p.bad || kd != k || !(version == formatVersion || (k == kindTicket && version == ticketVersion)) {
		return reader{}, 0, false
	}
	if version == ticketVersion {
		// The sale id goes after the payload, inside the MAC only. A
		// bound too long for the buffer cannot have signed a token that
		// verifies.
		if len(in)+binary.MaxVarintLen64+len(bound) > len(sc.buf) {
			return reader{}, 0, false
		}
		in = appendString(in, bound)
	}
	key := -1
	for i := range r.keys {
		if r.keys[i].ID == string(kid) { // compared in place, without allocating
			key = i
			break
		}
	}
	if key < 0 || !hmac.Equal(r.macOf(sc, key, in), sc.mac[:macLen]) {
		return reader{}, 0, false
	}
	return p, version, true
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader reads a payload. After a short or malformed read bad is set and
// every later read returns zero values, so a parser checks once, at the end.
type reader struct {
	b   []byte
	off int
	bad bool
}

func (p *reader) byte() byte {
	if p.bad || p.off >= len(p.b) {
		p.bad = true
		return 0
	}
	c := p.b[p.off]
	p.off++
	return c
}

// span reads a length-prefixed string and returns its bounds in p.b.
func (p *reader) span() (start, end int) {
	if p.bad {
		return 0, 0
	}
	n, w := binary.Uvarint(p.b[p.off:])
	if w <= 0 || n > uint64(len(p.b)-p.off-w) {
		p.bad = true
		return 0, 0
	}
	start = p.off + w
	end = start + int(n)
	p.off = end
	return start, end
}

func (p *reader) bytes() []byte {
	start, end := p.span()
	return p.b[start:end]
}

func (p *reader) varint() int64 {
	if p.bad {
		return 0
	}
	v, w := binary.Varint(p.b[p.off:])
	if w <= 0 {
		p.bad = true
		return 0
	}
	p.off += w
	return v
}

// done reports whether every read succeeded and the payload was read to its
// last byte: trailing bytes make a token invalid.
func (p *reader) done() bool { return !p.bad && p.off == len(p.b) }

// Derive returns a secret for another purpose (the proof-of-work salts,
// say) derived from the signing key: HMAC-SHA256(key, "flashsale/derive/"
// + label). Different labels give unrelated secrets, and none reveals the
// signing key. Rotating the signing key changes every derived secret.
func (r *Keyring) Derive(label string) []byte {
	m := hmac.New(sha256.New, r.keys[0].Secret)
	m.Write([]byte("flashsale/derive/" + label))
	return m.Sum(nil)
}
