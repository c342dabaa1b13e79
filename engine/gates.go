package engine

// The stock gate and the queue: in process, or in Redis (or a Redis Cluster).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/memory"
	fsredis "github.com/flashsale/flashsale/redis"
)

func (e *Engine) openGate(ctx context.Context) error {
	cfg := e.Config
	every, burst := cfg.ReserveEvery, cfg.ReserveBurst
	if every <= 0 {
		every = 2 * time.Second
	}
	if burst == 0 {
		burst = 5
	}
	if cfg.RedisURL == "" {
		e.gate = memory.New(memory.Config{Now: cfg.Now})
		q := e.openLocalQueue()
		e.Queue = q
		e.closers = append(e.closers, func() error { return e.saveLocalQueue(q) })
		if burst > 0 {
			b := memory.Budget{Every: every, Burst: burst}
			e.limiter = memory.NewLimiter(b, b)
		}
		return nil
	}
	// Two clients, each with connections of its own: one for the stock
	// gate and the purchase limits, one for the waiting room's queue. Every
	// shopper's first ticket is a queue call, so in a rush the queue's replies
	// are thousands a second; on shared connections a reserve's reply
	// would wait behind them, in Redis's answers and in the client's one
	// reader of each connection, and one sale's arrivals would slow every
	// other sale's purchases.
	client, err := OpenRedis(ctx, cfg.RedisURL, redisName("gate", cfg.RedisPrefix))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, func() error { client.Close(); return nil })
	queueClient, err := OpenRedis(ctx, cfg.RedisURL, redisName("queue", cfg.RedisPrefix))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, func() error { queueClient.Close(); return nil })
	// A sale's shards never change, so the gate asks the record once per
	// sale; a sale of one shard is the plain gate's.
	e.sharded = fsredis.NewSharded(fsredis.ShardedConfig{
		Config: fsredis.Config{Client: client, Prefix: cfg.RedisPrefix, Now: cfg.Now},
		Shards: func(ctx context.Context, saleID string) (int, error) {
			// A request waits on this read (the first snapshot of a sale
			// new to this server): it takes the catalog's connection, not
			// a turn behind the background work.
			st := e.Background
			if e.saleReader != nil {
				st = e.saleReader
			}
			sale, err := st.Sale(ctx, saleID)
			if err != nil {
				return 0, err
			}
			return sale.Shards, nil
		},
		Lost: func(string, int) {
			if e.Rebalancer != nil {
				e.Rebalancer.Notify()
			}
		},
	})
	e.gate = e.sharded
	e.Queue = fsredis.NewQueue(queueClient, cfg.RedisPrefix)
	if burst > 0 {
		b := fsredis.Budget{Every: every, Burst: burst}
		e.limiter = fsredis.NewLimiter(client, cfg.RedisPrefix, b, b)
	}
	e.answers = fsredis.NewAnswers(client, cfg.RedisPrefix)
	return nil
}

// OpenRedis connects to a Redis or a Redis Cluster (redis://host:port/db, or
// redis://host:port?addr=host:port&addr=host:port) with timeouts short
// enough that the sale fails closed within a second when Redis is gone.
// Its connections take name (CLIENT SETNAME; none when empty, or when the
// URL names them itself), so that CLIENT LIST tells an operator whose
// connection is whose. As with package redis's Open, the URL's dial_timeout
// and write_timeout parameters override those timeouts.
func OpenRedis(ctx context.Context, url, name string) (rueidis.Client, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: %w", err)
	}
	if opt.ClientName == "" {
		opt.ClientName = name
	}
	opt.DisableCache = true
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = fsredis.DialTimeout
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = fsredis.WriteTimeout
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: Redis at %s does not answer: %w", strings.Join(opt.InitAddress, ", "), err)
	}
	return client, nil
}

// redisName names a client's connections "flashsale-ROLE-PREFIX", the key
// prefix (default "fs:") telling one deployment from another on a shared
// Redis. Characters CLIENT SETNAME refuses (spaces, controls, non-ASCII)
// become '_'.
func redisName(role, prefix string) string {
	if prefix == "" {
		prefix = "fs:"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, "flashsale-"+role+"-"+prefix)
}
