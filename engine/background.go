package engine

// The background: the outbox relay and its sinks.

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale/jetstream"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/webhook"
)

// eventsWritten wakes the relay after a commit that wrote events.
func (e *Engine) eventsWritten() {
	if r := e.relay.Load(); r != nil {
		r.Notify()
	}
}

// openRelay sets up the sink the configuration names and the relay that
// drains the outbox into it.
func (e *Engine) openRelay(ctx context.Context) error {
	cfg := e.Config
	sink := cfg.Sink
	switch {
	case sink != nil:
	case cfg.EventsSink == "none":
		return nil
	case cfg.EventsSink == "" || cfg.EventsSink == "log":
		sink = outbox.LogSink{Logger: cfg.Logger}
	case cfg.EventsSink == "webhook":
		wh, err := webhook.New(webhook.Config{URL: cfg.WebhookURL, Secret: []byte(cfg.WebhookSecret)})
		if err != nil {
			return fmt.Errorf("--events-sink webhook: %w", err)
		}
		sink = wh
	case cfg.EventsSink == "nats":
		js, err := jetstream.Open(ctx, jetstream.Config{URL: cfg.NATSURL, Stream: cfg.NATSStream, Subject: cfg.NATSSubject})
		if err != nil {
			return fmt.Errorf("--nats-url: NATS at %s: %w", hostOf(cfg.NATSURL), err)
		}
		e.closers = append(e.closers, js.Close)
		sink = js
	default:
		return fmt.Errorf("--events-sink must be log, webhook, nats or none, not %q", cfg.EventsSink)
	}
	if e.relayStore == nil {
		return errors.New("the record gave the relay no store")
	}
	e.Sink = sink
	e.Relay = outbox.New(outbox.Config{Store: e.relayStore, Sink: sink, Name: cfg.Source, Now: cfg.Now,
		Interval: cfg.RelayInterval, Logger: cfg.Logger, Metrics: e.Metrics})
	e.relay.Store(e.Relay)
	return nil
}
