// Command consumer is the project's example consumer of flashsale events:
// it reads the JetStream stream the relay publishes to, processes each event
// exactly once however often it is delivered, and acknowledges it only
// after processing.
//
// Delivery is at least once (a relay may publish an event again; JetStream
// redelivers what was not acknowledged), so the consumer deduplicates on the
// event's id with an inbox (package inbox): the id and the event's effect
// (here, a count per event type in the table tallies) commit in one SQLite
// transaction, and a delivery whose id is already there is acknowledged
// without effect. A crash between the commit and the acknowledgement
// redelivers the event, and the inbox drops it.
//
// It also shows the hand-off of "tell me when it's my turn": a shopper.turn
// event (a sale with notifiedAdmissionSeconds) puts, in the same
// transaction, one message in the table outgoing for the shop's e-mail or
// push service to send, saying until when the shopper's admission lasts;
// a second delivery of the event adds none. The sender (not shown) reads
// outgoing, sends, and marks each row sent.
//
//	consumer --nats-url nats://127.0.0.1:4222 --inbox ./consumer.db
//
// Every flag can also be set as CONSUMER_<NAME> in the environment.
//
// Overselling is neither prevented nor caused here: it consumes events.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

// run consumes until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("nats-url", "nats://127.0.0.1:4222", "NATS server")
	stream := fs.String("nats-stream", "FLASHSALE_EVENTS", "JetStream stream the relay publishes to")
	subject := fs.String("nats-subject", "flashsale.events", "subject prefix of the events")
	durable := fs.String("durable", "flashsale-example", "name of the durable consumer (its place in the stream survives restarts)")
	inboxPath := fs.String("inbox", "./consumer.db", "SQLite file of processed event ids and the effects")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv("CONSUMER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))); v != "" && !isSet(fs, f.Name) {
			_ = fs.Set(f.Name, v)
		}
	})

	in, err := inbox.Open(ctx, *inboxPath)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := in.Exec(ctx, `CREATE TABLE IF NOT EXISTS tallies (type TEXT PRIMARY KEY, events INTEGER NOT NULL) STRICT`); err != nil {
		return err
	}
	if err := in.Exec(ctx, outgoingSchema); err != nil {
		return err
	}

	nc, err := nats.Connect(*url, nats.Name("flashsale-example-consumer"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", *url, err)
	}
	defer nc.Close()
	jsx, err := js.New(nc)
	if err != nil {
		return err
	}
	cons, err := jsx.CreateOrUpdateConsumer(ctx, *stream, js.ConsumerConfig{
		Durable:       *durable,
		FilterSubject: strings.TrimSuffix(*subject, ".") + ".>",
		AckPolicy:     js.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		DeliverPolicy: js.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on stream %s: %w", *durable, *stream, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		msgs.Stop()
	}()
	fmt.Fprintf(stdout, "consuming %s as %s\n", *stream, *durable)
	for {
		msg, err := msgs.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, js.ErrMsgIteratorClosed) {
				return nil
			}
			return err
		}
		handle(ctx, in, msg, stdout)
	}
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// handle processes one delivery and acknowledges it once its effect (or
// its being a duplicate) is durable; a delivery it could not process is
// not acknowledged (Nak), so it comes again.
func handle(ctx context.Context, in *inbox.Inbox, msg js.Msg, stdout io.Writer) {
	var env flashsale.Envelope
	if err := json.Unmarshal(msg.Data(), &env); err != nil || env.ID == "" {
		// Not an event of ours: it would fail for ever. Drop it, loudly.
		fmt.Fprintf(stdout, "unreadable message on %s: %v\n", msg.Subject(), err)
		_ = msg.Term()
		return
	}
	applied, err := Process(ctx, in, env)
	if err != nil {
		fmt.Fprintf(stdout, "failed %s %s: %v\n", env.ID, env.Type, err)
		_ = msg.Nak()
		return
	}
	if err := msg.DoubleAck(ctx); err != nil {
		// The effect is durable; the redelivery will be a duplicate.
		fmt.Fprintf(stdout, "ack %s: %v\n", env.ID, err)
	}
	if applied {
		fmt.Fprintf(stdout, "processed %s %s\n", env.ID, env.Type)
		if env.Type == flashsale.EventShopperTurn {
			fmt.Fprintf(stdout, "queued a message: %s\n", turnMessage(env))
		}
	} else {
		fmt.Fprintf(stdout, "duplicate %s %s\n", env.ID, env.Type)
	}
}

// Process applies an event's effect (a count per type, and for
// shopper.turn a message to send) exactly once: it reports false for an
// event the inbox has seen.
func Process(ctx context.Context, in *inbox.Inbox, env flashsale.Envelope) (bool, error) {
	return in.Process(ctx, env.ID, string(env.Type), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO tallies (type, events) VALUES (?1, 1)
			ON CONFLICT (type) DO UPDATE SET events = events + 1`, string(env.Type))
		if err != nil || env.Type != flashsale.EventShopperTurn {
			return err
		}
		var d flashsale.TurnData
		if err := json.Unmarshal(env.Data, &d); err != nil || d.UserID == "" {
			return fmt.Errorf("shopper.turn %s: unreadable data: %v", env.ID, err)
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO outgoing (event_id, user_id, sku, expires_at, message) VALUES (?1, ?2, ?3, ?4, ?5)`,
			env.ID, d.UserID, env.SKU, d.AdmissionExpiresAt.UTC().Format(time.RFC3339), turnMessage(env))
		return err
	})
}

// outgoingSchema is the hand-off to the shop's e-mail or push service: one
// row per message to send (sent_at set by the sender once sent).
const outgoingSchema = `CREATE TABLE IF NOT EXISTS outgoing (
	event_id   TEXT PRIMARY KEY,
	user_id    TEXT NOT NULL,
	sku        TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	message    TEXT NOT NULL,
	sent_at    TEXT NULL
) STRICT`

// turnMessage is what the shopper is told when its turn came: come back
// to the sale's page before the admission lapses.
func turnMessage(env flashsale.Envelope) string {
	var d flashsale.TurnData
	_ = json.Unmarshal(env.Data, &d)
	return fmt.Sprintf("to %s: your turn for %s has come; come back before %s to buy",
		d.UserID, env.SKU, d.AdmissionExpiresAt.UTC().Format("15:04 MST"))
}
