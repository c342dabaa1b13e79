package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Queue hands out places in each sale's waiting-room queue, shared by every
// server on the same Redis: the first call of a shopper takes the next
// place, every later call returns the same one. Safe for concurrent use.
type Queue struct {
	client rueidis.Client
	prefix string
}

// NewQueue returns a Queue keeping its keys under prefix (default "fs:"),
// in the sale's hash slot.
func NewQueue(client rueidis.Client, prefix string) *Queue {
	if prefix == "" {
		prefix = "fs:"
	}
	return &Queue{client: client, prefix: prefix}
}

// joinScript: KEYS[1] = places hash, KEYS[2] = sequence; ARGV[1] = user,
// ARGV[2] = now (ms). Returns "position:arrival".
var joinScript = rueidis.NewLuaScript(`
local p = redis.call('HGET', KEYS[1], ARGV[1])
if p then return p end
local n = redis.call('INCR', KEYS[2])
p = n .. ':' .. ARGV[2]
redis.call('HSET', KEYS[1], ARGV[1], p)
return p
`)

func (q *Queue) key(saleID, name string) string {
	return q.prefix + "{" + saleID + "}:q:" + name
}

// Join returns the shopper's place (from 1) and arrival time.
func (q *Queue) Join(ctx context.Context, saleID, userID string, now time.Time) (int64, time.Time, error) {
	s, err := joinScript.Exec(ctx, q.client,
		[]string{q.key(saleID, "places"), q.key(saleID, "seq")},
		[]string{userID, strconv.FormatInt(now.UnixMilli(), 10)}).ToString()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("redis queue join: %w", err)
	}
	posText, arrText, ok := strings.Cut(s, ":")
	pos, err1 := strconv.ParseInt(posText, 10, 64)
	arr, err2 := strconv.ParseInt(arrText, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, time.Time{}, fmt.Errorf("redis queue join: malformed place %q", s)
	}
	return pos, time.UnixMilli(arr).UTC(), nil
}

// Len returns how many places the sale's queue has given.
func (q *Queue) Len(ctx context.Context, saleID string) (int64, error) {
	n, err := q.client.Do(ctx, q.client.B().Get().Key(q.key(saleID, "seq")).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return n, err
}

// DropQueue forgets a sale's queue.
func (q *Queue) DropQueue(ctx context.Context, saleID string) error {
	return q.client.Do(ctx, q.client.B().Del().Key(q.key(saleID, "places"), q.key(saleID, "seq")).Build()).Error()
}
