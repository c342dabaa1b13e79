package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Limiter spends each shopper's and each payment instrument's request
// budget of a sale in Redis, so every server shares them. It runs GCRA
// (the generic cell rate algorithm: one "theoretical arrival time" per key,
// no counters to reset) for both keys in one script, so a request passes
// only if both budgets have room and spends from both or neither. The keys
// share the sale's hash slot and expire when idle. Safe for concurrent use.
type Limiter struct {
	client              rueidis.Client
	prefix              string
	account, instrument Budget
}

// Budget is a token bucket: Burst requests at once, refilled one every
// Every.
type Budget struct {
	Every time.Duration
	Burst int
}

// NewLimiter returns a Limiter keeping its keys under prefix.
func NewLimiter(client rueidis.Client, prefix string, account, instrument Budget) *Limiter {
	if prefix == "" {
		prefix = "fs:"
	}
	return &Limiter{client: client, prefix: prefix, account: account, instrument: instrument}
}

// gcraScript: KEYS are the budgets' keys; ARGV[1] now (ms), then for each
// key its emission interval (ms) and burst. Returns 0 when allowed (and
// spends from every key), else the ms to wait (and spends nothing).
var gcraScript = rueidis.NewLuaScript(`
local now = tonumber(ARGV[1])
local wait = 0
local tats = {}
for i, key in ipairs(KEYS) do
  local every = tonumber(ARGV[2*i])
  local burst = tonumber(ARGV[2*i+1])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local new = tat + every
  local allowAt = new - burst * every
  if now < allowAt and allowAt - now > wait then wait = allowAt - now end
  tats[i] = new
end
if wait > 0 then return wait end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, tats[i], 'PX', math.max(1, tats[i] - now))
end
return 0
`)

// Allow spends one request of the shopper's budget for the sale, and of
// the instrument's when one is given.
func (l *Limiter) Allow(ctx context.Context, saleID, userID, instrument string, now time.Time) (time.Duration, bool, error) {
	keys := []string{l.prefix + "{" + saleID + "}:rl:a:" + userID}
	args := []string{strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(l.account.Every.Milliseconds(), 10), strconv.Itoa(l.account.Burst)}
	if instrument != "" {
		keys = append(keys, l.prefix+"{"+saleID+"}:rl:i:"+instrument)
		args = append(args, strconv.FormatInt(l.instrument.Every.Milliseconds(), 10), strconv.Itoa(l.instrument.Burst))
	}
	wait, err := gcraScript.Exec(ctx, l.client, keys, args).AsInt64()
	if err != nil {
		return 0, false, fmt.Errorf("redis limiter: %w", err)
	}
	if wait > 0 {
		return time.Duration(wait) * time.Millisecond, false, nil
	}
	return 0, true, nil
}
