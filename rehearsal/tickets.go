package rehearsal

import (
	"sync"
	"unsafe"
)

// tickets keeps the shoppers' ticket tokens, two million of them, in large
// chunks of bytes with no pointers: the garbage collector marks a chunk,
// not each token, and a token costs its bytes, not a string header and an
// allocation's rounding on top. A shopper holds a ticketRef. Safe for
// concurrent use: tokens are only appended, and a chunk never moves.
type tickets struct {
	mu     sync.Mutex
	chunks []*[ticketChunk]byte // made up front, so that readers never see it grow
	last   int                  // the chunk being filled
	used   int                  // of it
}

// ticketRef locates a token: where it starts, counted in 8-byte words
// from the first chunk's start, and its length. Eight bytes, so that a
// shopper, of whom there are millions, stays at 32. The zero value is no
// token.
type ticketRef struct {
	word uint32
	n    uint16
}

const ticketChunk = 4 << 20

func newTickets(users int) *tickets {
	// Room for every shopper's ticket twice over (a draw replaces a
	// pre-queue ticket), at the tokens' longest.
	n := (users*2*256)/ticketChunk + 2
	return &tickets{chunks: make([]*[ticketChunk]byte, n)}
}

// put keeps tok and returns where. A token too long to keep (none is), or
// one past the room made, is kept as no token.
func (t *tickets) put(tok string) ticketRef {
	if tok == "" || len(tok) > 1<<15 {
		return ticketRef{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Each token starts on an 8-byte boundary, so no two share a word.
	off := (t.used + 7) &^ 7
	if t.chunks[t.last] == nil || off+len(tok) > ticketChunk {
		if t.chunks[t.last] != nil {
			t.last++
		}
		if t.last >= len(t.chunks) {
			t.last = len(t.chunks) - 1
			return ticketRef{}
		}
		t.chunks[t.last], off = new([ticketChunk]byte), 0
	}
	copy(t.chunks[t.last][off:], tok)
	t.used = off + len(tok)
	return ticketRef{word: uint32((t.last*ticketChunk + off) / 8), n: uint16(len(tok))}
}

// get returns the token at r, as a string over the chunk's bytes (which
// never change once written).
func (t *tickets) get(r ticketRef) string {
	if r.n == 0 {
		return ""
	}
	at := int(r.word) * 8
	return unsafe.String(&t.chunks[at/ticketChunk][at%ticketChunk], int(r.n))
}
