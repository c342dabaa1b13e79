package loop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The first round runs at once (not after the interval); Stop waits for
// the round in progress, and no round starts after it.
func TestLoop(t *testing.T) {
	var l Loop
	var rounds, finished atomic.Int32
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	l.Start(context.Background(), time.Hour, "test", nil, func(ctx context.Context) error {
		rounds.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		finished.Add(1)
		return errors.New("logged nowhere")
	})
	<-started // an hour's interval, yet the first round runs
	stopped := make(chan struct{})
	go func() {
		l.Stop()
		if finished.Load() != 1 {
			t.Error("Stop returned before the round in progress finished")
		}
		close(stopped)
	}()
	close(release)
	<-stopped
	if n := rounds.Load(); n != 1 {
		t.Fatalf("%d rounds ran, want 1", n)
	}
	l.Stop() // stopping a stopped loop is harmless
}
