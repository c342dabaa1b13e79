package purchase

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// SharedAnswers keeps the final rejections of reserve requests where every
// server of a fleet reads them (Redis: package redis's Answers), so that a
// repeat that lands on another server replays the first answer too, as
// the contract says. Each server's own cache stays in front of it; without
// it (the in-process gate, one server) that cache is the whole memory.
//
// Values are opaque to it. Remember keeps the first value for a key: a
// value already kept stays until its time is up.
type SharedAnswers interface {
	Answer(ctx context.Context, key string) (value string, ok bool, err error)
	Remember(ctx context.Context, key, value string, ttl time.Duration) error
}

// encode and decode turn an answer into a SharedAnswers value and back:
// the request's hash, the code and the message, apart by unit separators
// (a hash and a code never hold one).
func (a answer) encode() string {
	e, _ := a.err.(*flashsale.Error)
	if e == nil {
		e = &flashsale.Error{Code: flashsale.ErrorCode(a.err), Message: a.err.Error()}
	}
	return a.hash + "\x1f" + string(e.Code) + "\x1f" + e.Message
}

func decodeAnswer(v string) (answer, bool) {
	hash, rest, ok := strings.Cut(v, "\x1f")
	if !ok {
		return answer{}, false
	}
	code, msg, ok := strings.Cut(rest, "\x1f")
	if !ok || code == "" {
		return answer{}, false
	}
	return answer{hash: hash, err: &flashsale.Error{Code: flashsale.Code(code), Message: msg}}, true
}

// answerCache remembers the final rejections of reserve requests by
// idempotency key, so a repeated request replays its first answer. Wins are
// not kept here: they are durable in the record and the gate. It is bounded
// in entries and in time. Safe for concurrent use.
type answerCache struct {
	limit int
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]answer
	order   []string // insertion order, for eviction; order[head:] is live
	head    int
}

type answer struct {
	hash    string
	err     error
	expires time.Time
}

func newAnswerCache(limit int, ttl time.Duration) *answerCache {
	return &answerCache{limit: limit, ttl: ttl, entries: make(map[string]answer)}
}

func answerKey(saleID, userID, key string) string {
	return saleID + "\x1f" + userID + "\x1f" + key
}

func (c *answerCache) get(k string, now time.Time) (answer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.entries[k]
	if !ok || !now.Before(a.expires) {
		return answer{}, false
	}
	return a, true
}

func (c *answerCache) put(k string, a answer, now time.Time) {
	a.expires = now.Add(c.ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok {
		c.order = append(c.order, k)
	}
	c.entries[k] = a
	// Evict from the oldest end while entries are expired or too many.
	for c.head < len(c.order) {
		old := c.order[c.head]
		e, ok := c.entries[old]
		if ok && now.Before(e.expires) && len(c.entries) <= c.limit {
			break
		}
		delete(c.entries, old)
		c.order[c.head] = ""
		c.head++
	}
	// Reclaim the evicted prefix once it is at least half the slice.
	if c.head > 1024 && c.head*2 >= len(c.order) {
		c.order = append([]string(nil), c.order[c.head:]...)
		c.head = 0
	}
}
