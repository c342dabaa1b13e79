package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// effects sets up a consumer's own table beside the inbox: a count per
// event, which would go above one if an effect were applied twice.
func effects(t *testing.T, in *Inbox) func(id string) func(tx *sql.Tx) error {
	t.Helper()
	if err := in.Exec(t.Context(), `CREATE TABLE IF NOT EXISTS applied (event_id TEXT PRIMARY KEY, times INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return func(id string) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO applied (event_id, times) VALUES (?1, 1)
				ON CONFLICT (event_id) DO UPDATE SET times = times + 1`, id)
			return err
		}
	}
}

func times(t *testing.T, in *Inbox) map[string]int {
	t.Helper()
	rows, err := in.db.QueryContext(t.Context(), `SELECT event_id, times FROM applied`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// TestDeliverTwice: every event is delivered twice, some of them at the
// same moment from two goroutines, and again after the consumer restarts;
// each effect is applied exactly once.
func TestDeliverTwice(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "inbox.db")
	in, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	apply := effects(t, in)
	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied int
	)
	for i := range n {
		id := fmt.Sprintf("evt_%02d", i)
		for range 2 {
			wg.Go(func() {
				did, err := in.Process(ctx, id, "order.confirmed", apply(id))
				if err != nil {
					t.Errorf("Process(%s): %v", id, err)
				}
				if did {
					mu.Lock()
					applied++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if applied != n {
		t.Errorf("Process applied %d effects for %d events delivered twice, want %d", applied, n, n)
	}
	in.Close()

	// A restart: the inbox is durable, so a third delivery is dropped too.
	in, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	apply = effects(t, in)
	for i := range n {
		id := fmt.Sprintf("evt_%02d", i)
		if did, err := in.Process(ctx, id, "order.confirmed", apply(id)); err != nil || did {
			t.Errorf("Process(%s) after a restart = %v, %v; want false, nil", id, did, err)
		}
	}
	for id, k := range times(t, in) {
		if k != 1 {
			t.Errorf("effect of %s applied %d times", id, k)
		}
	}
	if c, err := in.Count(ctx); err != nil || c != n {
		t.Errorf("Count = %d, %v; want %d", c, err, n)
	}
}

// TestFailedEffectIsNotRecorded: an effect that fails leaves no trace, so
// the redelivery applies it.
func TestFailedEffectIsNotRecorded(t *testing.T) {
	ctx := t.Context()
	in, err := Open(ctx, filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	apply := effects(t, in)
	boom := fmt.Errorf("the consumer's database is full")
	if did, err := in.Process(ctx, "evt_1", "x", func(tx *sql.Tx) error {
		if err := apply("evt_1")(tx); err != nil {
			return err
		}
		return boom
	}); did || err != boom {
		t.Fatalf("Process with a failing effect = %v, %v", did, err)
	}
	if seen, _ := in.Processed(ctx, "evt_1"); seen {
		t.Fatal("a failed effect was recorded as processed")
	}
	if did, err := in.Process(ctx, "evt_1", "x", apply("evt_1")); !did || err != nil {
		t.Fatalf("the redelivery = %v, %v; want applied", did, err)
	}
	if got := times(t, in)["evt_1"]; got != 1 {
		t.Errorf("effect applied %d times, want 1", got)
	}
	if _, err := in.Process(context.Background(), "", "x", nil); err == nil {
		t.Error("an event without an id was processed")
	}
}
