// Package loop runs a background service's rounds: one round at once, then
// one every interval, until stopped. The sweeper, the invariant watcher,
// the warmer, the drawer, the pacer and the edge's snapshot fetcher share
// it, so each is only its round.
//
// Overselling is neither prevented nor caused here.
package loop

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Loop is a round run in the background. The zero value is ready to
// Start. Safe for concurrent use.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs round at once and then every interval until Stop or ctx
// ends. A round's error is logged under name, unless the loop is stopping.
// Starting a started loop stops the first run.
func (l *Loop) Start(ctx context.Context, interval time.Duration, name string, logger *slog.Logger,
	round func(context.Context) error) {
	l.Stop()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.mu.Lock()
	l.cancel, l.done = cancel, done
	l.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := round(ctx); err != nil && ctx.Err() == nil && logger != nil {
				logger.Error(name, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop stops the loop and waits for the round in progress to finish. It
// does nothing if the loop is not running.
func (l *Loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
