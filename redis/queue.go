package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
)

// Queue is the waiting room's shared state in Redis, shared by every edge
// and origin: places in each sale's queue (the first call of a shopper
// takes the next place, every later call returns the same one), the
// entrants of a random sale's pre-queue or a lottery's registration, how
// far the queue is admitted, and the counters the pacer reads. Its keys
// share the sale's hash slot. Safe for concurrent use.
type Queue struct {
	client rueidis.Client
	prefix string
}

// NewQueue returns a Queue keeping its keys under prefix (default "fs:").
func NewQueue(client rueidis.Client, prefix string) *Queue {
	if prefix == "" {
		prefix = "fs:"
	}
	return &Queue{client: client, prefix: prefix}
}

// joinScript: KEYS[1] places, KEYS[2] seq; ARGV[1] user, ARGV[2] now ms.
// Returns "position:arrival".
var joinScript = rueidis.NewLuaScript(`
local p = redis.call('HGET', KEYS[1], ARGV[1])
if p then return p end
local n = redis.call('INCR', KEYS[2])
p = n .. ':' .. ARGV[2]
redis.call('HSET', KEYS[1], ARGV[1], p)
return p
`)

// enterScript: KEYS[1] entrants, KEYS[2] sealed; ARGV[1] user, ARGV[2] now
// ms. Returns the arrival, or -1 once sealed.
var enterScript = rueidis.NewLuaScript(`
local at = redis.call('HGET', KEYS[1], ARGV[1])
if at then return tonumber(at) end
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return tonumber(ARGV[2])
`)

// sealScript: KEYS[1] entrants, KEYS[2] sealed, KEYS[3] seq. Returns the
// number of entrants; places given after continue past them.
var sealScript = rueidis.NewLuaScript(`
local n = redis.call('HLEN', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then return tonumber(redis.call('GET', KEYS[2])) end
redis.call('SET', KEYS[2], n)
local seq = tonumber(redis.call('GET', KEYS[3]) or '0')
if seq < n then redis.call('SET', KEYS[3], n) end
return n
`)

// admitScript: KEYS[1] admitted; ARGV[1] up to. Raises, never lowers.
var admitScript = rueidis.NewLuaScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if want > cur then redis.call('SET', KEYS[1], ARGV[1]); return want end
return cur
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
		err = fmt.Errorf("redis queue join: %w", err)
		if _, ok := rueidis.IsRedisErr(err); !ok {
			// Redis did not answer (a master failing over): the shopper
			// comes back for a place, which is theirs for good once given.
			return 0, time.Time{}, &flashsale.Error{Code: flashsale.CodeUnavailable,
				Message: "The waiting room cannot give places right now; come back shortly.", RetryAfter: time.Second, Err: err}
		}
		return 0, time.Time{}, err
	}
	posText, arrText, ok := strings.Cut(s, ":")
	pos, err1 := strconv.ParseInt(posText, 10, 64)
	arr, err2 := strconv.ParseInt(arrText, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, time.Time{}, fmt.Errorf("redis queue join: malformed place %q", s)
	}
	return pos, time.UnixMilli(arr).UTC(), nil
}

func (q *Queue) getInt(ctx context.Context, key string) (int64, error) {
	n, err := q.client.Do(ctx, q.client.B().Get().Key(key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return n, err
}

// Len returns how many places the sale's queue has given, counting the
// drawn entrants' places once sealed.
func (q *Queue) Len(ctx context.Context, saleID string) (int64, error) {
	return q.getInt(ctx, q.key(saleID, "seq"))
}

// Enter adds the shopper to the sale's entrants and returns when they first
// entered. It returns flashsale.ErrSealed once the draw has closed the entrants.
func (q *Queue) Enter(ctx context.Context, saleID, userID string, now time.Time) (time.Time, error) {
	at, err := enterScript.Exec(ctx, q.client,
		[]string{q.key(saleID, "entrants"), q.key(saleID, "sealed")},
		[]string{userID, strconv.FormatInt(now.UnixMilli(), 10)}).AsInt64()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis queue enter: %w", err)
	}
	if at < 0 {
		return time.Time{}, flashsale.ErrSealed
	}
	return time.UnixMilli(at).UTC(), nil
}

// Entered reports whether the shopper is an entrant, and since when.
func (q *Queue) Entered(ctx context.Context, saleID, userID string) (time.Time, bool, error) {
	at, err := q.client.Do(ctx, q.client.B().Hget().Key(q.key(saleID, "entrants")).Field(userID).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return time.UnixMilli(at).UTC(), true, nil
}

// Entrants returns the user ids of every entrant, in no order.
func (q *Queue) Entrants(ctx context.Context, saleID string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		e, err := q.client.Do(ctx, q.client.B().Hscan().Key(q.key(saleID, "entrants")).Cursor(cursor).Count(5000).Build()).AsScanEntry()
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			out = append(out, e.Elements[i])
		}
		if e.Cursor == 0 {
			return out, nil
		}
		cursor = e.Cursor
	}
}

// Seal closes the entrants for the draw and makes Join's places continue
// after them. It returns the number of entrants; sealing again returns the
// same number.
func (q *Queue) Seal(ctx context.Context, saleID string) (int64, error) {
	return sealScript.Exec(ctx, q.client,
		[]string{q.key(saleID, "entrants"), q.key(saleID, "sealed"), q.key(saleID, "seq")}, nil).AsInt64()
}

// Admit raises the sale's admitted-up-to place to upTo if it is lower, and
// returns the place admitted up to. It never lowers it.
func (q *Queue) Admit(ctx context.Context, saleID string, upTo int64) (int64, error) {
	return admitScript.Exec(ctx, q.client, []string{q.key(saleID, "admitted")},
		[]string{strconv.FormatInt(upTo, 10)}).AsInt64()
}

// Admitted returns the sale's admitted-up-to place.
func (q *Queue) Admitted(ctx context.Context, saleID string) (int64, error) {
	return q.getInt(ctx, q.key(saleID, "admitted"))
}

// Add adds delta to one of the sale's named counters and returns its value.
func (q *Queue) Add(ctx context.Context, saleID, counter string, delta int64) (int64, error) {
	return q.client.Do(ctx, q.client.B().Incrby().Key(q.key(saleID, "ctr:"+counter)).Increment(delta).Build()).AsInt64()
}

// Counter returns one of the sale's named counters.
func (q *Queue) Counter(ctx context.Context, saleID, counter string) (int64, error) {
	return q.getInt(ctx, q.key(saleID, "ctr:"+counter))
}

// leadScript: KEYS[1] lease; ARGV[1] holder, ARGV[2] ttl ms. Takes the
// lease if free, renews it if held by holder; returns 1 if holder leads.
var leadScript = rueidis.NewLuaScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]); return 1 end
if cur == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]); return 1 end
return 0
`)

// Lead reports whether holder leads the named task (the pacer of a sale,
// say) among the servers sharing this Redis, taking or renewing a lease of
// ttl. A leader that stops renewing loses the lease after ttl.
func (q *Queue) Lead(ctx context.Context, task, holder string, ttl time.Duration) (bool, error) {
	n, err := leadScript.Exec(ctx, q.client, []string{q.prefix + "lease:" + task},
		[]string{holder, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	return n == 1, err
}

// Spend marks id used for ttl and reports whether this call did (SET NX
// with an expiry relative to Redis's own clock, so marks clean themselves
// up and no clock skew can shorten them).
func (q *Queue) Spend(ctx context.Context, saleID, id string, ttl time.Duration) (bool, error) {
	err := q.client.Do(ctx, q.client.B().Set().Key(q.key(saleID, "spent:"+id)).Value("1").Nx().
		PxMilliseconds(max(ttl.Milliseconds(), 1)).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return err == nil, err
}

// Spent reports whether id is marked spent.
func (q *Queue) Spent(ctx context.Context, saleID, id string) (bool, error) {
	n, err := q.client.Do(ctx, q.client.B().Exists().Key(q.key(saleID, "spent:"+id)).Build()).AsInt64()
	return n > 0, err
}

// Flag holds a shopper suspected of automation, keeping the first reason.
func (q *Queue) Flag(ctx context.Context, saleID, userID, reason string) error {
	return q.client.Do(ctx, q.client.B().Hsetnx().Key(q.key(saleID, "suspects")).Field(userID).Value(reason).Build()).Error()
}

// Suspects returns the held shoppers and why.
func (q *Queue) Suspects(ctx context.Context, saleID string) (map[string]string, error) {
	return q.client.Do(ctx, q.client.B().Hgetall().Key(q.key(saleID, "suspects")).Build()).AsStrMap()
}

// Raise raises one of the sale's named counters to to if it is lower, in
// one script (admitScript's), so that servers moving it race safely.
func (q *Queue) Raise(ctx context.Context, saleID, counter string, to int64) (int64, error) {
	return admitScript.Exec(ctx, q.client, []string{q.key(saleID, "ctr:"+counter)},
		[]string{strconv.FormatInt(to, 10)}).AsInt64()
}

// awaitInvitedScript: KEYS[1] the set of invited shoppers noted, KEYS[2]
// their list in order; ARGV[1] the user. Appends a user once.
var awaitInvitedScript = rueidis.NewLuaScript(`
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then redis.call('RPUSH', KEYS[2], ARGV[1]) end
return 0
`)

// Await notes that the shopper at position waits for its turn: a hash of
// place to user, or, for a negative position (waitroom.Invited), the list
// of invited shoppers.
func (q *Queue) Await(ctx context.Context, saleID, userID string, position int64) error {
	if position > 0 {
		return q.client.Do(ctx, q.client.B().Hset().Key(q.key(saleID, "awaiting")).FieldValue().
			FieldValue(strconv.FormatInt(position, 10), userID).Build()).Error()
	}
	return awaitInvitedScript.Exec(ctx, q.client,
		[]string{q.key(saleID, "invited-set"), q.key(saleID, "invited")}, []string{userID}).Error()
}

// Awaiting returns the shoppers noted at places from+1 to to, in order,
// with one HMGET.
func (q *Queue) Awaiting(ctx context.Context, saleID string, from, to int64) ([]string, error) {
	if to <= from {
		return nil, nil
	}
	fields := make([]string, 0, to-from)
	for p := from + 1; p <= to; p++ {
		fields = append(fields, strconv.FormatInt(p, 10))
	}
	vals, err := q.client.Do(ctx, q.client.B().Hmget().Key(q.key(saleID, "awaiting")).Field(fields...).Build()).ToArray()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vals {
		if u, err := v.ToString(); err == nil {
			out = append(out, u)
		}
	}
	return out, nil
}

// AwaitingInvited returns the invited shoppers noted, from the index from.
func (q *Queue) AwaitingInvited(ctx context.Context, saleID string, from int64) ([]string, error) {
	return q.client.Do(ctx, q.client.B().Lrange().Key(q.key(saleID, "invited")).Start(max(from, 0)).Stop(-1).Build()).AsStrSlice()
}

// Forget drops the sale's places, entrants and counters, keeping its
// suspects. UNLINK, not DEL: a big sale's places are millions of hash
// fields, which Redis then frees on a thread of its own instead of
// stopping every other command while it does.
func (q *Queue) Forget(ctx context.Context, saleID string) error {
	keys := []string{q.key(saleID, "places"), q.key(saleID, "seq"), q.key(saleID, "entrants"), q.key(saleID, "sealed"),
		q.key(saleID, "admitted"), q.key(saleID, "ctr:claims"), q.key(saleID, "ctr:attempts"),
		q.key(saleID, "awaiting"), q.key(saleID, "invited"), q.key(saleID, "invited-set"),
		q.key(saleID, "ctr:turns"), q.key(saleID, "ctr:turns-invited"), q.key(saleID, "ctr:turns-drawn")}
	return q.client.Do(ctx, q.client.B().Unlink().Key(keys...).Build()).Error()
}
