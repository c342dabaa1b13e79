package redis

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestAnswersKeepTheFirstValue: the first value kept for a key is what
// every later read gets, whoever tries to keep another; and it is gone
// once its time is up.
func TestAnswersKeepTheFirstValue(t *testing.T) {
	client, prefix := testenv.Redis(t)
	a := NewAnswers(client, prefix)
	ctx := t.Context()
	if _, ok, err := a.Answer(ctx, "k"); err != nil || ok {
		t.Fatalf("before any: %t, %v", ok, err)
	}
	if err := a.Remember(ctx, "k", "first", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.Remember(ctx, "k", "second", time.Minute); err != nil {
		t.Fatalf("keeping a second value is no error: %v", err)
	}
	if v, ok, err := a.Answer(ctx, "k"); err != nil || !ok || v != "first" {
		t.Fatalf("read: %q, %t, %v; want the first value", v, ok, err)
	}
	pttl, err := client.Do(ctx, client.B().Pttl().Key(prefix+"answer:k").Build()).AsInt64()
	if err != nil || pttl <= 0 || pttl > time.Minute.Milliseconds() {
		t.Fatalf("time to live %d ms (%v); want up to a minute", pttl, err)
	}
}
