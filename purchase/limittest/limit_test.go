package limittest_test

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/purchase"
	"github.com/flashsale/flashsale/purchase/limittest"
	fsredis "github.com/flashsale/flashsale/redis"
)

func TestMemoryLimiter(t *testing.T) {
	limittest.Exercise(t, func(t *testing.T) purchase.Limiter {
		b := memory.Budget{Every: time.Second, Burst: 3}
		return memory.NewLimiter(b, b)
	})
}

func TestRedisLimiter(t *testing.T) {
	limittest.Exercise(t, func(t *testing.T) purchase.Limiter {
		client, prefix := testenv.Redis(t)
		b := fsredis.Budget{Every: time.Second, Burst: 3}
		return fsredis.NewLimiter(client, prefix, b, b)
	})
}
