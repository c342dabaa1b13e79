package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inbox"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/jetstream"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

// lines is a concurrency-safe writer whose output the test can count.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

// consume runs the consumer until it printed processed and duplicate
// lines as asked, then stops it.
func consume(t *testing.T, args []string, processed, duplicates int) *lines {
	t.Helper()
	out := &lines{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, func(string) string { return "" }, out, out) }()
	deadline := time.After(20 * time.Second)
	for out.count("processed ") < processed || out.count("duplicate ") < duplicates {
		select {
		case err := <-done:
			t.Fatalf("the consumer stopped: %v\n%s", err, out.buf.String())
		case <-deadline:
			t.Fatalf("after 20s the consumer processed %d and dropped %d duplicates, want %d and %d",
				out.count("processed "), out.count("duplicate "), processed, duplicates)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("consumer: %v", err)
	}
	return out
}

// TestConsumerDeliverTwice: every event is in the stream twice (published
// again under another message id, so JetStream's own deduplication cannot
// help); the consumer applies each effect once, acknowledges every
// delivery, and, reading the whole stream again under a new durable name
// after a restart, applies nothing more.
func TestConsumerDeliverTwice(t *testing.T) {
	url, stream := testenv.NATS(t)
	subject := strings.ToLower(stream) + ".events"
	sink, err := jetstream.Open(t.Context(), jetstream.Config{URL: url, Stream: stream, Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	types := []flashsale.EventType{flashsale.EventOrderConfirmed, flashsale.EventOrderShipped}
	var events []*flashsale.OutboxEvent
	for i := range 20 {
		ev := flashsale.NewEvent("", types[i%2], "sale_1", "sku-1", t0, flashsale.OrderData{OrderID: "ord", To: flashsale.OrderShipped, Version: 1, Actor: "x"})
		events = append(events, &flashsale.OutboxEvent{Event: ev})
	}
	if errs := sink.Publish(t.Context(), events); errs != nil {
		t.Fatal(errs)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	raw, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if _, err := raw.Publish(t.Context(), sink.Subject(ev.Type), ev.Payload, js.WithMsgID(ev.ID+"-again")); err != nil {
			t.Fatal(err)
		}
	}

	db := filepath.Join(t.TempDir(), "consumer.db")
	args := []string{"--nats-url", url, "--nats-stream", stream, "--nats-subject", subject, "--inbox", db, "--durable", "first"}
	consume(t, args, 20, 20)

	cons, err := raw.Consumer(t.Context(), stream, "first")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("after consuming: %d deliveries unacknowledged, %d pending; want 0 and 0", info.NumAckPending, info.NumPending)
	}

	// A restart that reads everything again (a new durable consumer):
	// the inbox is durable, so all 40 deliveries are duplicates.
	args[len(args)-1] = "second"
	out := consume(t, args, 0, 40)
	if n := out.count("processed "); n != 0 {
		t.Errorf("after the restart %d events were processed again", n)
	}

	in, err := inbox.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if n, err := in.Count(t.Context()); err != nil || n != 20 {
		t.Errorf("inbox holds %d events, %v; want 20", n, err)
	}
	total := 0
	for _, typ := range types {
		did, err := Process(t.Context(), in, flashsale.Envelope{ID: events[0].ID, Type: typ})
		if err != nil || did {
			t.Errorf("a fourth delivery was applied: %v, %v", did, err)
		}
		var n int
		if err := in.QueryRow(t.Context(), `SELECT events FROM tallies WHERE type = ?1`, string(typ)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 20 {
		t.Errorf("tallies count %d effects for 20 events delivered twice (and again after a restart), want 20", total)
	}
}

// TestTurnHandOff: a shopper.turn event queues one message for the shop's
// sender, saying until when the admission lasts, however often it is
// delivered.
func TestTurnHandOff(t *testing.T) {
	in, err := inbox.Open(t.Context(), filepath.Join(t.TempDir(), "consumer.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := in.Exec(t.Context(), outgoingSchema); err != nil {
		t.Fatal(err)
	}
	if err := in.Exec(t.Context(), `CREATE TABLE tallies (type TEXT PRIMARY KEY, events INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	expires := t0.Add(15 * time.Minute)
	ev := flashsale.ShopperTurnEvent("sale_1", "sneaker", "alice", t0, expires)
	var env flashsale.Envelope
	if err := json.Unmarshal(ev.Payload, &env); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		did, err := Process(t.Context(), in, env)
		if err != nil || did != want {
			t.Fatalf("delivery %d: applied %v, %v; want %v", i+1, did, err, want)
		}
	}
	var n int
	var user, sku, until, msg string
	if err := in.QueryRow(t.Context(), `SELECT count(*), user_id, sku, expires_at, message FROM outgoing`).Scan(&n, &user, &sku, &until, &msg); err != nil {
		t.Fatal(err)
	}
	if n != 1 || user != "alice" || sku != "sneaker" || until != expires.Format(time.RFC3339) || !strings.Contains(msg, "10:15 UTC") {
		t.Fatalf("outgoing: %d %s %s %s %q", n, user, sku, until, msg)
	}
}
