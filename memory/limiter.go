package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter spends each shopper's and each payment instrument's request
// budget of a sale, in process (golang.org/x/time/rate buckets). A request
// passes only if both budgets have room, and spends from both. Budgets of
// sales are separate, and keyed on what costs an attacker money (accounts,
// payment instruments), never on a network address. Buckets idle for a
// minute are forgotten, so memory stays bounded. Safe for concurrent use;
// use NewLimiter.
type Limiter struct {
	account, instrument Budget
	seed                maphash.Seed
	shards              [64]limiterShard
}

// Budget is a token bucket: Burst requests at once, refilled one every
// Every.
type Budget struct {
	Every time.Duration
	Burst int
}

type limiterShard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// NewLimiter returns a Limiter with the given budgets per sale.
func NewLimiter(account, instrument Budget) *Limiter {
	l := &Limiter{account: account, instrument: instrument, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].buckets = map[string]*bucket{}
	}
	return l
}

func (l *Limiter) bucket(key string, b Budget, now time.Time) *rate.Limiter {
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now.Sub(sh.swept) > time.Minute {
		for k, bk := range sh.buckets {
			if now.Sub(bk.used) > time.Minute {
				delete(sh.buckets, k)
			}
		}
		sh.swept = now
	}
	bk, ok := sh.buckets[key]
	if !ok {
		bk = &bucket{lim: rate.NewLimiter(rate.Every(b.Every), b.Burst)}
		sh.buckets[key] = bk
	}
	bk.used = now
	return bk.lim
}

// Allow spends one request of the shopper's budget for the sale, and of
// the instrument's when one is given. When either is spent it spends
// nothing and says how long to wait.
func (l *Limiter) Allow(_ context.Context, saleID, userID, instrument string, now time.Time) (time.Duration, bool, error) {
	acct := l.bucket(saleID+"\x1fa\x1f"+userID, l.account, now).ReserveN(now, 1)
	wait := acct.DelayFrom(now)
	var card *rate.Reservation
	if instrument != "" {
		card = l.bucket(saleID+"\x1fi\x1f"+instrument, l.instrument, now).ReserveN(now, 1)
		wait = max(wait, card.DelayFrom(now))
	}
	if wait > 0 {
		acct.CancelAt(now)
		if card != nil {
			card.CancelAt(now)
		}
		return wait, false, nil
	}
	return 0, true, nil
}
