package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
)

// Turns tells the shop when a shopper's turn comes, in sales that set
// notifiedAdmissionSeconds, so that a shopper who left the page can be
// told to come back: each round, for every place the room admitted since
// the last (and every invited shopper, once the sale is open), it writes
// the event shopper.turn {userId, admissionExpiresAt} to the record's
// outbox, which delivers it (webhook or NATS) at least once. The room
// notes who waits at which place as it gives tickets (Queue.Await); the
// admission then lasts notifiedAdmissionSeconds.
//
// With several servers sharing a Redis queue, one of them runs each
// sale's round at a time (a lease in the queue), its cursors live in the
// queue and only move forward (Queue.Raise), and an event's id is the
// sale's and the shopper's, so that a round repeated by another server
// after a lost lease writes nothing new: each turn is one event.
//
// Safe for concurrent use.
type Turns struct {
	cfg  TurnsConfig
	loop loop.Loop

	mu sync.Mutex
	// seen is each sale's count of places at the previous round: a round
	// notifies only places given before it, so that a place's note
	// (written just after the place is given) is never passed over.
	seen map[string]int64
}

// TurnsConfig configures Turns. Queue, Sales and Events are required.
type TurnsConfig struct {
	Queue Queue
	Sales interface {
		Active(ctx context.Context) ([]*flashsale.Sale, error)
	}
	// Snapshots are the origin's: a sale with no unit left (for now)
	// tells no one it is their turn, and a random or lottery sale's drawn
	// places are read from them (at the draw, every entrant's place is
	// noted at once, since an entrant who left the page never asks for
	// it). Nil notes only the places the room hands out, and notifies
	// whatever the stock.
	Snapshots interface {
		Snapshot(ctx context.Context, sku string) (*Snapshot, error)
		DrawIndex(ctx context.Context, snap *Snapshot) (*DrawIndex, error)
	}
	// Events is the record's outbox.
	Events interface {
		AppendEvents(ctx context.Context, events ...flashsale.Event) (int, error)
	}
	Now func() time.Time
	// Holder names this server for the lease.
	Holder string
	// Tick is how often a round runs (default 1s); Batch the most turns
	// one sale's round notifies (default 10000).
	Tick   time.Duration
	Batch  int
	Logger *slog.Logger
}

// NewTurns returns Turns.
func NewTurns(cfg TurnsConfig) *Turns {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 10000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Turns{cfg: cfg, seen: map[string]int64{}}
}

// Start runs TickOnce every Tick until Stop.
func (t *Turns) Start(ctx context.Context) {
	t.loop.Start(ctx, t.cfg.Tick, "turns", t.cfg.Logger, t.TickOnce)
}

// Stop stops the rounds and waits for the one in progress.
func (t *Turns) Stop() { t.loop.Stop() }

// TickOnce notifies, for every open sale that notifies turns and that
// this server leads, the turns that came since the last round.
func (t *Turns) TickOnce(ctx context.Context) error {
	sales, err := t.cfg.Sales.Active(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, sale := range sales {
		if sale.NotifiedAdmissionSeconds <= 0 || sale.StateAt(t.cfg.Now()) != flashsale.SaleOpen {
			continue
		}
		lead, err := t.cfg.Queue.Lead(ctx, "turns:"+sale.ID, t.cfg.Holder, 4*t.cfg.Tick+time.Second)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !lead {
			continue
		}
		if err := t.tick(ctx, sale); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sale.SKU, err))
		}
	}
	return errors.Join(errs...)
}

func (t *Turns) tick(ctx context.Context, sale *flashsale.Sale) error {
	q := t.cfg.Queue
	now := t.cfg.Now()
	// The places given so far, for the next round; this one notifies
	// those given before the last (given), every round, sold out or not.
	issued, err := q.Len(ctx, sale.ID)
	if err != nil {
		return err
	}
	t.mu.Lock()
	given := t.seen[sale.ID]
	t.seen[sale.ID] = issued
	t.mu.Unlock()
	if t.cfg.Snapshots != nil {
		snap, err := t.cfg.Snapshots.Snapshot(ctx, sale.SKU)
		if err != nil {
			return err
		}
		if snap.Sale.ID == sale.ID && snap.Loaded && snap.Counter <= 0 {
			// Sold out, for now: whoever's place comes up is told sold
			// out, not its turn. The cursors stay, so that the turns are
			// told if units come back.
			return nil
		}
		if err := t.noteDrawn(ctx, sale, snap); err != nil {
			return err
		}
	}
	// The invited first: their turn is the open.
	from, err := q.Counter(ctx, sale.ID, CounterInvitedTurns)
	if err != nil {
		return err
	}
	invited, err := q.AwaitingInvited(ctx, sale.ID, from)
	if err != nil {
		return err
	}
	invited = invited[:min(len(invited), t.cfg.Batch)]
	if err := t.notify(ctx, sale, invited, now); err != nil {
		return err
	}
	if len(invited) > 0 {
		if _, err := q.Raise(ctx, sale.ID, CounterInvitedTurns, from+int64(len(invited))); err != nil {
			return err
		}
	}

	upTo := given
	if sale.AdmissionPerSecond > 0 {
		admitted, err := q.Admitted(ctx, sale.ID)
		if err != nil {
			return err
		}
		upTo = min(admitted, given)
	}
	done, err := q.Counter(ctx, sale.ID, CounterTurns)
	if err != nil {
		return err
	}
	to := min(upTo, done+int64(t.cfg.Batch))
	if to <= done {
		return nil
	}
	users, err := q.Awaiting(ctx, sale.ID, done, to)
	if err != nil {
		return err
	}
	if err := t.notify(ctx, sale, users, now); err != nil {
		return err
	}
	_, err = q.Raise(ctx, sale.ID, CounterTurns, to)
	return err
}

// notify writes the shoppers' shopper.turn events, their admissions
// lasting the sale's notifiedAdmissionSeconds from now.
func (t *Turns) notify(ctx context.Context, sale *flashsale.Sale, users []string, now time.Time) error {
	if len(users) == 0 {
		return nil
	}
	expires := now.Add(sale.NotifiedAdmission())
	events := make([]flashsale.Event, len(users))
	for i, u := range users {
		events[i] = flashsale.ShopperTurnEvent(sale.ID, sale.SKU, u, now, expires)
	}
	_, err := t.cfg.Events.AppendEvents(ctx, events...)
	return err
}

// noteDrawn notes, once per sale, the drawn place of every entrant of a
// drawn random or lottery sale (a lottery's selected only). It runs in
// the round before the places are notified, so none is passed over; its
// cost is one note per entrant, once.
func (t *Turns) noteDrawn(ctx context.Context, sale *flashsale.Sale, snap *Snapshot) error {
	if sale.Fairness == flashsale.FairnessFIFO || !snap.Drawn || snap.Sale.ID != sale.ID {
		return nil
	}
	q := t.cfg.Queue
	if done, err := q.Counter(ctx, sale.ID, CounterDrawnTurns); err != nil || done > 0 {
		return err
	}
	ix, err := t.cfg.Snapshots.DrawIndex(ctx, snap)
	if err != nil {
		return err
	}
	entrants, err := q.Entrants(ctx, sale.ID)
	if err != nil {
		return err
	}
	for _, u := range entrants {
		pos, ok := ix.Position(u)
		if !ok || (sale.Fairness == flashsale.FairnessLottery && pos > snap.Winners) {
			continue
		}
		if err := q.Await(ctx, sale.ID, u, pos); err != nil {
			return err
		}
	}
	_, err = q.Raise(ctx, sale.ID, CounterDrawnTurns, 1)
	return err
}
