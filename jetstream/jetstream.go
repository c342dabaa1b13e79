// Package jetstream is an outbox sink that publishes events to a NATS
// JetStream stream.
//
// Each event is one message on the subject <prefix>.<type> (for example
// flashsale.events.order.shipped), its data the event's JSON envelope
// exactly as written to the outbox, with the event id as the Nats-Msg-Id
// header. JetStream drops a second message with the same Nats-Msg-Id
// within the stream's duplicate window, so a relay that published and died
// before marking the event usually costs nothing; past the window, or when
// a consumer is redelivered a message it did not acknowledge, the event
// comes again, and consumers deduplicate on its id (package inbox, and
// examples/consumer). Delivery is at least once.
//
// A message counts as delivered only when JetStream acknowledges that the
// stream stored it (or already had it).
//
// Overselling is neither prevented nor caused here: events report changes,
// they never make them.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/outbox"
)

// Defaults of Config.
const (
	DefaultStream  = "FLASHSALE_EVENTS"
	DefaultSubject = "flashsale.events"
	// DefaultDuplicates is the duplicate window of a stream the sink
	// creates.
	DefaultDuplicates = 10 * time.Minute
)

// Config configures a Sink. URL is required.
type Config struct {
	// URL of the NATS server(s), as nats.Connect takes it.
	URL string
	// Stream is the JetStream stream the events go to (default
	// FLASHSALE_EVENTS). If it does not exist, Open creates it, capturing
	// <Subject>.> with a duplicate window of Duplicates; an existing stream
	// is used as it is.
	Stream string
	// Subject is the subjects' prefix (default flashsale.events).
	Subject    string
	Duplicates time.Duration
	// Name names the connection to the server (default "flashsale").
	Name string
}

// Sink publishes events to JetStream. Safe for concurrent use; Close it
// when done.
type Sink struct {
	cfg Config
	nc  *nats.Conn
	js  js.JetStream
}

var _ outbox.Sink = (*Sink)(nil)

// Open connects to NATS and makes sure the stream exists.
func Open(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.URL == "" {
		return nil, errors.New("jetstream: a NATS URL is required")
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	cfg.Subject = strings.TrimSuffix(cfg.Subject, ".")
	if cfg.Duplicates <= 0 {
		cfg.Duplicates = DefaultDuplicates
	}
	if cfg.Name == "" {
		cfg.Name = "flashsale"
	}
	nc, err := nats.Connect(cfg.URL, nats.Name(cfg.Name), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		// Not the URL: it may carry a user and password, and errors reach logs.
		return nil, fmt.Errorf("jetstream: connect: %w", err)
	}
	stream, err := js.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &Sink{cfg: cfg, nc: nc, js: stream}
	if err := s.ensureStream(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sink) ensureStream(ctx context.Context) error {
	_, err := s.js.Stream(ctx, s.cfg.Stream)
	if err == nil {
		return nil
	}
	if !errors.Is(err, js.ErrStreamNotFound) {
		return fmt.Errorf("jetstream: look up stream %s: %w", s.cfg.Stream, err)
	}
	_, err = s.js.CreateStream(ctx, js.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "flashsale events, relayed from the record's outbox",
		Subjects:    []string{s.cfg.Subject + ".>"},
		Storage:     js.FileStorage,
		Duplicates:  s.cfg.Duplicates,
	})
	if err != nil && !errors.Is(err, js.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("jetstream: create stream %s: %w", s.cfg.Stream, err)
	}
	return nil
}

// Subject returns the subject an event of type typ is published on.
func (s *Sink) Subject(typ flashsale.EventType) string { return s.cfg.Subject + "." + string(typ) }

// Name returns "nats".
func (s *Sink) Name() string { return "nats" }

// Publish sends every event without waiting, then waits for each
// acknowledgement (or ctx's end). It returns nil when JetStream stored
// (or already had) every one, else one error per event.
func (s *Sink) Publish(ctx context.Context, events []*flashsale.OutboxEvent) []error {
	errs := make([]error, len(events))
	futures := make([]js.PubAckFuture, len(events))
	failed := false
	for i, ev := range events {
		msg := &nats.Msg{Subject: s.Subject(ev.Type), Data: ev.Payload, Header: nats.Header{}}
		msg.Header.Set("Flashsale-Event-Type", string(ev.Type))
		f, err := s.js.PublishMsgAsync(msg, js.WithMsgID(ev.ID), js.WithExpectStream(s.cfg.Stream))
		if err != nil {
			errs[i], failed = fmt.Errorf("jetstream: publish %s: %w", ev.ID, err), true
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i], failed = fmt.Errorf("jetstream: publish %s: %w", events[i].ID, err), true
		case <-ctx.Done():
			errs[i], failed = fmt.Errorf("jetstream: publish %s: no acknowledgement: %w", events[i].ID, ctx.Err()), true
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// Close closes the connection; Publish calls in flight fail. It returns
// nil.
func (s *Sink) Close() error {
	s.nc.Close()
	return nil
}
