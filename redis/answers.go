package redis

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Answers keeps short values by key with a time to live, the first value
// of a key winning: the purchase path keeps there the final rejections of
// reserve requests by idempotency key, so that a repeat on any server of
// the fleet replays the first answer (purchase.SharedAnswers). One key per
// rejection, under the prefix's "answer:"; in a Redis Cluster each lands
// on its own slot. Safe for concurrent use.
type Answers struct {
	client rueidis.Client
	prefix string
}

// NewAnswers returns an Answers keeping its keys under prefix.
func NewAnswers(client rueidis.Client, prefix string) *Answers {
	if prefix == "" {
		prefix = "fs:"
	}
	return &Answers{client: client, prefix: prefix + "answer:"}
}

// Answer returns the value kept for key, if any.
func (a *Answers) Answer(ctx context.Context, key string) (string, bool, error) {
	v, err := a.client.Do(ctx, a.client.B().Get().Key(a.prefix+key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return v, true, nil
}

// Remember keeps value for key for ttl (at least a millisecond), unless a
// value is kept for key already.
func (a *Answers) Remember(ctx context.Context, key, value string, ttl time.Duration) error {
	ms := max(ttl.Milliseconds(), 1)
	err := a.client.Do(ctx, a.client.B().Set().Key(a.prefix+key).Value(value).Nx().PxMilliseconds(ms).Build()).Error()
	if rueidis.IsRedisNil(err) { // NX: a value was there already
		return nil
	}
	return err
}
