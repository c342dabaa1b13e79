package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flashsale/flashsale/memory"
)

// A restart of the embedded default (the in-process gate and queue) is a
// non-event: the gate is rebuilt from the record when the process starts
// (control.Service.Restore), and the queue a clean stop saved in the data
// dir is loaded back. See docs/operations-restart.md.

// queueFile is the in-process queue's file in the data dir, written at a
// clean stop and read, then removed, at the next start.
const queueFile = "queue"

// openLocalQueue returns the in-process queue the last clean stop saved in
// the data dir, or an empty one. The file is removed once read: a snapshot
// is good for one start, and a process that dies without saving must not
// leave the next start a queue older than the tickets it handed out. A
// file that cannot be read is set aside (queue.unreadable) and the queue
// starts empty: shoppers keep their places in their tickets.
func (e *Engine) openLocalQueue() *memory.Queue {
	path := filepath.Join(e.Config.DataDir, queueFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return memory.NewQueue()
	}
	var q *memory.Queue
	if err == nil {
		q, err = memory.LoadQueue(f)
		f.Close()
	}
	if err != nil {
		e.Config.Logger.Warn("the saved waiting-room queue cannot be read; starting with an empty one",
			"file", path, "err", err)
		if err := os.Rename(path, path+".unreadable"); err != nil {
			e.Config.Logger.Warn("set the unreadable queue aside", "file", path, "err", err)
		}
		return memory.NewQueue()
	}
	if err := os.Remove(path); err != nil {
		e.Config.Logger.Warn("remove the saved queue once loaded", "file", path, "err", err)
	}
	e.Config.Logger.Info("waiting-room queue loaded from the last clean stop", "file", path)
	return q
}

// saveLocalQueue writes the in-process queue to the data dir (a new file,
// then renamed over the old, so a stop cut short leaves no torn queue).
func (e *Engine) saveLocalQueue(q *memory.Queue) error {
	dir := e.Config.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save the waiting-room queue: %w", err)
	}
	tmp, err := os.CreateTemp(dir, queueFile+".*")
	if err != nil {
		return fmt.Errorf("save the waiting-room queue: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := q.Save(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save the waiting-room queue: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save the waiting-room queue: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, queueFile)); err != nil {
		return fmt.Errorf("save the waiting-room queue: %w", err)
	}
	return nil
}

// restoreGate rebuilds the in-process gate from the record (see
// control.Service.Restore). A sale it cannot rebuild stays unloaded, and
// the warmer fails it closed, as before.
func (e *Engine) restoreGate(ctx context.Context) {
	restored, err := e.Control.Restore(ctx)
	if err != nil {
		e.Config.Logger.Error("restart: some sales could not be rebuilt from the record; they fail closed", "err", err)
	}
	reopened := 0
	for _, r := range restored {
		if r.Reopened {
			reopened++
		}
	}
	e.Config.Logger.Info("restart: the in-process gate is rebuilt from the record",
		"sales", len(restored), "reopened", reopened)
}
