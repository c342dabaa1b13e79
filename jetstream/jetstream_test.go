package jetstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

var t0 = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

func openTest(t *testing.T) (*Sink, string) {
	t.Helper()
	url, name := testenv.NATS(t)
	sink, err := Open(t.Context(), Config{URL: url, Stream: name, Subject: strings.ToLower(name) + ".events"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return sink, name
}

// readBack reads every message of the stream, in order.
func readBack(t *testing.T, sink *Sink, stream string) []js.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cons, err := sink.js.OrderedConsumer(ctx, stream, js.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := sink.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := int(info.CachedInfo().State.Msgs)
	var msgs []js.Msg
	for len(msgs) < want {
		batch, err := cons.Fetch(want-len(msgs), js.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return msgs
}

// TestPublishAndReadBack: events published through JetStream are stored
// once each, on the subject of their type, with their id as Nats-Msg-Id
// and their envelope as data; an event published again (a relay that died
// before marking it) is dropped by JetStream's duplicate window.
func TestPublishAndReadBack(t *testing.T) {
	sink, stream := openTest(t)
	types := []flashsale.EventType{flashsale.EventReservationCreated, flashsale.EventOrderConfirmed, flashsale.EventSaleSoldOut}
	var events []*flashsale.OutboxEvent
	for i := range 30 {
		ev := flashsale.NewEvent("", types[i%3], "sale_1", "sku-1", t0.Add(time.Duration(i)*time.Second),
			flashsale.SaleData{State: flashsale.SaleOpen, Epoch: int64(i)})
		events = append(events, &flashsale.OutboxEvent{Event: ev, CreatedAt: ev.OccurredAt, Attempts: 1})
	}
	if errs := sink.Publish(t.Context(), events); errs != nil {
		t.Fatalf("Publish: %v", errs)
	}
	if errs := sink.Publish(t.Context(), events[10:20]); errs != nil {
		t.Fatalf("Publish again: %v", errs)
	}

	msgs := readBack(t, sink, stream)
	if len(msgs) != len(events) {
		t.Fatalf("the stream holds %d messages for %d events published (10 twice), want %d", len(msgs), len(events), len(events))
	}
	for i, m := range msgs {
		ev := events[i]
		if m.Headers().Get(nats.MsgIdHdr) != ev.ID || m.Subject() != sink.Subject(ev.Type) || string(m.Data()) != string(ev.Payload) {
			t.Errorf("message %d: id %q subject %q data %s; want %s on %s with its payload",
				i, m.Headers().Get(nats.MsgIdHdr), m.Subject(), m.Data(), ev.ID, sink.Subject(ev.Type))
		}
		var env flashsale.Envelope
		if err := json.Unmarshal(m.Data(), &env); err != nil || env.ID != ev.ID || env.Type != ev.Type {
			t.Errorf("message %d: envelope %+v, %v", i, env, err)
		}
	}
}

// TestOpenUsesAnExistingStream: a second sink on the same stream neither
// fails nor changes it.
func TestOpenUsesAnExistingStream(t *testing.T) {
	sink, stream := openTest(t)
	again, err := Open(t.Context(), Config{URL: testenv.NATSURL(), Stream: stream, Subject: sink.cfg.Subject})
	if err != nil {
		t.Fatalf("Open on an existing stream: %v", err)
	}
	again.Close()
}

// TestPublishWithoutAnAnswer: a publish that gets no acknowledgement before
// ctx ends is a failure of that event, for the relay to retry.
func TestPublishWithoutAnAnswer(t *testing.T) {
	sink, _ := openTest(t)
	ev := flashsale.NewEvent("", flashsale.EventSaleOpened, "sale_1", "", t0, flashsale.SaleData{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sink.cfg.Subject = "nowhere.captured" // no stream listens: no acknowledgement comes
	errs := sink.Publish(ctx, []*flashsale.OutboxEvent{{Event: ev}})
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("Publish with no acknowledgement = %v, want an error", errs)
	}
}

// TestOpenErrorKeepsTheURLsSecret: a NATS URL may carry a user and
// password, and the error of a failed connection reaches the logs and
// the command line, so it never repeats the URL.
func TestOpenErrorKeepsTheURLsSecret(t *testing.T) {
	_, err := Open(t.Context(), Config{URL: "nats://shop:s3cret-pass@127.0.0.1:1", Stream: "S", Subject: "s.events"})
	if err == nil {
		t.Fatal("connected to a port nothing listens on")
	}
	if strings.Contains(err.Error(), "s3cret-pass") || strings.Contains(err.Error(), "shop:") {
		t.Fatalf("the error repeats the URL's credentials: %v", err)
	}
}
