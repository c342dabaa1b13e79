package queuetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/memory"
	fsredis "github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/waitroom"
	"github.com/flashsale/flashsale/waitroom/queuetest"
)

func TestMemoryQueue(t *testing.T) {
	queuetest.Exercise(t, func(t *testing.T) waitroom.Queue { return memory.NewQueue() })
}

func TestRedisQueue(t *testing.T) {
	queuetest.Exercise(t, func(t *testing.T) waitroom.Queue {
		client, prefix := testenv.Redis(t)
		return fsredis.NewQueue(client, prefix)
	})
}

// Only one server leads a task at a time in Redis; a lease that is not
// renewed passes to another.
func TestRedisLeaseIsExclusive(t *testing.T) {
	client, prefix := testenv.Redis(t)
	q := fsredis.NewQueue(client, prefix)
	ctx := context.Background()
	if ok, _ := q.Lead(ctx, "pacer:s", "a", 200*time.Millisecond); !ok {
		t.Fatal("a could not lead")
	}
	if ok, _ := q.Lead(ctx, "pacer:s", "b", 200*time.Millisecond); ok {
		t.Fatal("b leads while a holds the lease")
	}
	// The lease lapses in Redis's own time; wait for it.
	deadline := time.Now().Add(3 * time.Second)
	for {
		if ok, _ := q.Lead(ctx, "pacer:s", "b", 200*time.Millisecond); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never passed to b")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
