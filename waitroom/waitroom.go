// Package waitroom is the top of the funnel: it gives every arriving shopper
// a place in the queue at once, as a signed ticket the shopper holds, and
// answers each poll from that ticket and a per-sale snapshot, with no lookup
// per request. Admission is paced; a shopper whose place comes up gets a
// short-lived admission token that the gate spends at most once.
package waitroom

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/catalog"
	"github.com/flashsale/flashsale/token"
)

// Queue hands out places in a sale's queue. A shopper asking again gets the
// same place, never a better one. Implementations are safe for concurrent
// use.
type Queue interface {
	// Join returns the shopper's place (from 1) and arrival time, giving
	// the next place only on the shopper's first call.
	Join(ctx context.Context, saleID, userID string, now time.Time) (position int64, arrival time.Time, err error)
	// Len returns how many places the sale's queue has given.
	Len(ctx context.Context, saleID string) (int64, error)
}

// Live is what the waiting room needs to know of a sale's stock, refreshed
// at most every SnapshotTTL: no poll reaches the gate or the record.
type Live struct {
	// Loaded is false when the gate has no counter for the sale.
	Loaded  bool
	Counter int64
	// Pending is the units held by reservations that may still expire
	// and come back.
	Pending int64
	Epoch   int64
	// Issued is how many places the queue has given.
	Issued int64
	At     time.Time
}

// LiveSource reads a sale's live figures. Implementations may be slow; the
// Room caches them.
type LiveSource interface {
	Live(ctx context.Context, sale *flashsale.Sale) (Live, error)
}

// Config configures a Room. Queue, Tokens, Catalog and Live are required.
type Config struct {
	Queue   Queue
	Tokens  *token.Keyring
	Catalog *catalog.Catalog
	Live    LiveSource
	Now     func() time.Time
	// AdmissionTTL is the lifetime of an admission token (default 120s).
	AdmissionTTL time.Duration
	// SnapshotTTL is how stale the live figures may be (default 100ms),
	// well inside the one second in which sold out must be announced.
	SnapshotTTL time.Duration
}

// Room answers tickets and status polls. Safe for concurrent use.
type Room struct {
	cfg Config

	mu     sync.RWMutex
	live   map[string]Live
	flight singleflight.Group
}

// New returns a Room.
func New(cfg Config) *Room {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AdmissionTTL <= 0 {
		cfg.AdmissionTTL = 120 * time.Second
	}
	if cfg.SnapshotTTL <= 0 {
		cfg.SnapshotTTL = 100 * time.Millisecond
	}
	return &Room{cfg: cfg, live: make(map[string]Live)}
}

// State is the state a status poll reports.
type State string

// The states of a status answer (contract: GET /sale/{sku}/status).
const (
	StateScheduled   State = "scheduled"
	StateWaiting     State = "waiting"
	StateAdmitted    State = "admitted"
	StateChallenge   State = "challenge"
	StateSoldOut     State = "sold_out"
	StatePaused      State = "paused"
	StateNotSelected State = "not_selected"
	StateClosed      State = "closed"
)

// Status is the answer to a poll.
type Status struct {
	State State
	// OpensAt, for StateScheduled.
	OpensAt time.Time
	// Position is how many places are ahead of the shopper's plus one,
	// and EstimatedWait a conservative estimate of the wait, for
	// StateWaiting.
	Position      int64
	EstimatedWait time.Duration
	// AdmissionToken and ExpiresIn, for StateAdmitted.
	AdmissionToken string
	ExpiresIn      time.Duration
	// Final, for StateSoldOut: true once no pending hold can return units.
	Final bool
	// RetryAfter is when the client should poll again; zero for answers
	// that need no further poll.
	RetryAfter time.Duration
}

// Ticket is the answer to a ticket request.
type Ticket struct {
	Token         string
	Position      int64
	EstimatedWait time.Duration
	RetryAfter    time.Duration
}

// Ticket gives the shopper a place in the sale's queue (the same place on
// every call) as a signed token. accountCreated is the shopper's
// acct_created claim (zero if absent): a sale with a minimum account age
// turns ineligible shoppers away here, before they wait.
func (r *Room) Ticket(ctx context.Context, sale *flashsale.Sale, userID string, accountCreated time.Time) (Ticket, error) {
	now := r.cfg.Now()
	switch sale.StateAt(now) {
	case flashsale.SaleClosed:
		return Ticket{}, flashsale.Errorf(flashsale.CodeClosed, "The sale has closed.")
	}
	if err := eligible(sale, accountCreated, now); err != nil {
		return Ticket{}, err
	}
	live, err := r.Live(ctx, sale)
	if err != nil {
		return Ticket{}, err
	}
	if open(sale, now) && live.Loaded && live.Counter <= 0 && live.Pending <= 0 {
		return Ticket{}, flashsale.Errorf(flashsale.CodeSoldOut, "Sold out: nothing is left and no hold can come back.")
	}
	pos, arrival, err := r.cfg.Queue.Join(ctx, sale.ID, userID, now)
	if err != nil {
		return Ticket{}, err
	}
	tok := r.cfg.Tokens.SignTicket(token.Ticket{UserID: userID, SaleID: sale.ID, Arrival: arrival, Position: pos})
	ahead, wait := r.place(sale, pos, now)
	return Ticket{Token: tok, Position: ahead, EstimatedWait: wait, RetryAfter: pollAfter(wait)}, nil
}

func eligible(sale *flashsale.Sale, accountCreated, now time.Time) error {
	min := sale.MinAccountAge()
	if min <= 0 {
		return nil
	}
	if accountCreated.IsZero() {
		return flashsale.Errorf(flashsale.CodeNotEligible,
			"This sale needs the account's creation time, which your sign-in does not carry.")
	}
	if now.Sub(accountCreated) < min {
		return flashsale.Errorf(flashsale.CodeNotEligible, "This sale is open to accounts older than %s.", min)
	}
	return nil
}

func open(sale *flashsale.Sale, now time.Time) bool { return sale.StateAt(now) == flashsale.SaleOpen }

// ErrInvalidTicket: the ticket is forged, malformed, or for another sale.
var ErrInvalidTicket = &flashsale.Error{Code: flashsale.CodeInvalidToken,
	Message: "The waiting-room token is not valid for this sale; ask for a new ticket."}

// Status answers a poll from the shopper's ticket token.
func (r *Room) Status(ctx context.Context, sale *flashsale.Sale, ticketToken string) (Status, error) {
	t, err := r.cfg.Tokens.VerifyTicket(ticketToken)
	if err != nil || t.SaleID != sale.ID {
		return Status{}, ErrInvalidTicket
	}
	now := r.cfg.Now()
	switch sale.StateAt(now) {
	case flashsale.SalePaused:
		return Status{State: StatePaused, RetryAfter: 5 * time.Second}, nil
	case flashsale.SaleClosed:
		return Status{State: StateClosed}, nil
	case flashsale.SaleScheduled:
		_, wait := r.place(sale, t.Position, now)
		return Status{State: StateScheduled, OpensAt: sale.OpensAt, RetryAfter: pollAfter(wait)}, nil
	}
	live, err := r.Live(ctx, sale)
	if err != nil {
		return Status{}, err
	}
	if !live.Loaded {
		// The gate lost the counter; the sale is failing closed.
		return Status{State: StatePaused, RetryAfter: 5 * time.Second}, nil
	}
	if live.Counter <= 0 {
		final := live.Pending <= 0
		st := Status{State: StateSoldOut, Final: final}
		if !final {
			// Holds may come back: a shopper who keeps polling keeps the
			// place.
			st.RetryAfter = time.Second
		}
		return st, nil
	}
	ahead, wait := r.place(sale, t.Position, now)
	if ahead > 0 {
		return Status{State: StateWaiting, Position: ahead, EstimatedWait: wait, RetryAfter: pollAfter(wait)}, nil
	}
	adm := token.Admission{
		UserID:  t.UserID,
		SaleID:  sale.ID,
		ID:      token.AdmissionID(sale.ID, t.UserID, t.Position, live.Epoch),
		Expires: now.Add(r.cfg.AdmissionTTL),
		Epoch:   live.Epoch,
	}
	return Status{State: StateAdmitted, AdmissionToken: r.cfg.Tokens.SignAdmission(adm), ExpiresIn: r.cfg.AdmissionTTL}, nil
}

// AdmittedUpTo returns the last place the queue has admitted at now: the
// sale's admissionPerSecond from the moment it opened, or every place at
// once when the sale sets no rate.
func AdmittedUpTo(sale *flashsale.Sale, now time.Time) int64 {
	if now.Before(sale.OpensAt) {
		return 0
	}
	if sale.AdmissionPerSecond <= 0 {
		return math.MaxInt64
	}
	elapsed := now.Sub(sale.OpensAt).Seconds()
	// One second's worth is admitted at the open, so the first shoppers
	// do not wait for the clock.
	n := float64(sale.AdmissionPerSecond) * (elapsed + 1)
	if n >= math.MaxInt64/2 {
		return math.MaxInt64
	}
	return int64(n)
}

// place returns how many places are ahead of position plus one (0 once
// admitted) and a conservative estimate of the wait.
func (r *Room) place(sale *flashsale.Sale, position int64, now time.Time) (int64, time.Duration) {
	upTo := AdmittedUpTo(sale, now)
	var untilOpen time.Duration
	if now.Before(sale.OpensAt) {
		untilOpen = sale.OpensAt.Sub(now)
		upTo = AdmittedUpTo(sale, sale.OpensAt)
	}
	if position <= upTo {
		return 0, untilOpen
	}
	ahead := position - upTo
	wait := untilOpen
	if sale.AdmissionPerSecond > 0 {
		// Conservative: a quarter more than the paced rate promises, so
		// shoppers are told too long rather than too short.
		secs := float64(ahead) / float64(sale.AdmissionPerSecond) * 1.25
		wait += time.Duration(math.Ceil(secs)) * time.Second
	}
	return ahead, wait
}

// pollAfter suggests when to poll again: often when the wait is short,
// rarely when it is long, never less than a second.
func pollAfter(wait time.Duration) time.Duration {
	d := wait / 20
	switch {
	case d < time.Second:
		return time.Second
	case d > 10*time.Second:
		return 10 * time.Second
	}
	return d.Truncate(time.Second)
}

// Live returns the sale's live figures, at most SnapshotTTL old. Concurrent
// callers share one read.
func (r *Room) Live(ctx context.Context, sale *flashsale.Sale) (Live, error) {
	now := r.cfg.Now()
	r.mu.RLock()
	l, ok := r.live[sale.ID]
	r.mu.RUnlock()
	if ok && now.Sub(l.At) < r.cfg.SnapshotTTL {
		return l, nil
	}
	v, err, _ := r.flight.Do(sale.ID, func() (any, error) {
		l, err := r.cfg.Live.Live(context.WithoutCancel(ctx), sale)
		if err != nil {
			return Live{}, err
		}
		l.At = r.cfg.Now()
		r.mu.Lock()
		r.live[sale.ID] = l
		r.mu.Unlock()
		return l, nil
	})
	if err != nil {
		if ok {
			// Serve the last figures rather than an error page: an error
			// is an instruction to press the button again.
			return l, nil
		}
		return Live{}, &flashsale.Error{Code: flashsale.CodeUnavailable,
			Message:    "The waiting room cannot see the sale right now; your place is kept, come back shortly.",
			RetryAfter: 2 * time.Second, Err: err}
	}
	return v.(Live), nil
}

// Invalidate drops the cached live figures of a sale, so the next poll
// reads them afresh.
func (r *Room) Invalidate(saleID string) {
	r.mu.Lock()
	delete(r.live, saleID)
	r.mu.Unlock()
}

// OriginLive reads live figures from the gate and the record directly: the
// origin's LiveSource.
type OriginLive struct {
	Gate  flashsale.GateAdmin
	Store interface {
		SaleTotals(ctx context.Context, saleID string) (flashsale.SaleTotals, error)
	}
	Queue Queue
}

// Live implements LiveSource.
func (o OriginLive) Live(ctx context.Context, sale *flashsale.Sale) (Live, error) {
	snap, err := o.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		return Live{}, err
	}
	l := Live{Loaded: snap.Loaded, Counter: snap.Counter, Epoch: snap.Epoch}
	if !snap.Loaded {
		l.Epoch = sale.Epoch
	}
	// Pending only matters once the counter is gone: it says whether sold
	// out is final. Reading it then, and only then, keeps the record out
	// of the poll path while stock lasts.
	if snap.Counter <= 0 {
		totals, err := o.Store.SaleTotals(ctx, sale.ID)
		if err != nil {
			return Live{}, err
		}
		l.Pending = totals.Pending
	}
	if o.Queue != nil {
		n, err := o.Queue.Len(ctx, sale.ID)
		if err != nil && !errors.Is(err, flashsale.ErrNotFound) {
			return Live{}, err
		}
		l.Issued = n
	}
	return l, nil
}
