// Package waitroom is the top of the funnel: it gives every arriving shopper
// a place at once, as a signed ticket the shopper holds, and answers each
// poll from that ticket and a per-sale snapshot, with no call to the gate
// or the record per request. Places follow the sale's published fairness
// policy (fifo, random, lottery), with verifiable draws; admission is paced
// by what the purchase path absorbs and by the stock left; an admitted
// shopper gets a short-lived admission token that the gate spends at most
// once.
//
// The same Room runs at the origin (--role all) and at an edge (--role
// edge); only its Snapshots differ.
//
// Overselling is neither prevented nor caused here: the waiting room admits
// shoppers, it never sells. Its admission tokens are spent in the gate's
// atomic step (packages memory and redis), where overselling is prevented.
package waitroom

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/internal/window"
	"github.com/flashsale/flashsale/token"
)

// Config configures a Room. Queue, Tokens and Snapshots are required.
type Config struct {
	Queue     Queue
	Tokens    *token.Keyring
	Snapshots Snapshots
	// Challenges issues the proof of work of sales that set challengeBits;
	// Difficulty adapts it per shopper.
	Challenges *challenge.Issuer
	Difficulty challenge.Policy
	Now        func() time.Time
	// AdmissionTTL is the lifetime of an admission token (default 120s).
	AdmissionTTL time.Duration
	// PollLimit is how many polls of one shopper in PollWindow mark it as
	// automation (default 30 in 10s: three a second, when the room never
	// asks for more than one); EarlyLimit how many polls in the window
	// that came back in less than half the wait the room asked (default
	// 5), which catches a client polling ten times faster than asked
	// however slowly it was asked to poll.
	PollLimit  int
	EarlyLimit int
	PollWindow time.Duration
	// FailLimit is how many failed challenge answers mark a shopper as
	// automation (default 20).
	FailLimit int
	// Invites binds invite codes (the record, at the origin); nil at an
	// edge, which has no record and takes no code.
	Invites interface {
		RedeemInvite(ctx context.Context, sale *flashsale.Sale, hash, userID string, at time.Time) (*flashsale.Invite, error)
	}
	// RedeemLimit is how many invite redemptions one account may ask of
	// a sale in an hour, on this server (default 20): a shopper redeems
	// once or twice, and a guesser of codes, who would cost the record a
	// lookup per guess, is told 429 rate_limited without one.
	RedeemLimit int
	// PlaceCache is how many given places the room remembers, to answer a
	// shopper asking again without a call to the queue (default 1<<19,
	// about 200 bytes each; negative: none).
	PlaceCache int
}

// Room answers tickets, polls and registrations. Safe for concurrent use.
type Room struct {
	cfg Config

	mu     sync.Mutex
	claims map[string]*claimSet
	// polls and fails count what only the holder of the shopper's JWT can
	// send (polls and answers that carry it): they decide the automation
	// hold. anonPolls and anonFails count, apart, what anyone holding a
	// copy of the ticket can send: past the same limits those are told
	// 429, and hold no one (see StatusFor).
	polls, anonPolls *window.Pace
	fails, anonFails *window.Counter
	redeems          *window.Counter
	places           *places
}

// New returns a Room.
func New(cfg Config) *Room {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AdmissionTTL <= 0 {
		cfg.AdmissionTTL = 120 * time.Second
	}
	if cfg.PollLimit <= 0 {
		cfg.PollLimit = 30
	}
	if cfg.EarlyLimit <= 0 {
		cfg.EarlyLimit = 5
	}
	if cfg.PollWindow <= 0 {
		cfg.PollWindow = 10 * time.Second
	}
	if cfg.FailLimit <= 0 {
		cfg.FailLimit = 20
	}
	if cfg.RedeemLimit <= 0 {
		cfg.RedeemLimit = 20
	}
	if cfg.PlaceCache == 0 {
		cfg.PlaceCache = 1 << 19
	}
	return &Room{cfg: cfg, claims: map[string]*claimSet{}, places: newPlaces(cfg.PlaceCache),
		polls: window.NewPace(cfg.PollWindow), fails: window.New(time.Hour),
		anonPolls: window.NewPace(cfg.PollWindow), anonFails: window.New(time.Hour), redeems: window.New(time.Hour)}
}

// AutomationPolicy is the published policy on suspected automation, given
// with every sale (GET /sale/{sku}).
const AutomationPolicy = "Accounts that poll faster than the waiting room asks, fail the admission challenge " +
	"repeatedly or keep hitting the purchase rate limits keep their place but are not admitted; orders that " +
	"match automation patterns (shared payment instruments, burst timing, accounts created together) may be " +
	"cancelled after the sale, their units returning to stock."

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

// Places a ticket carries besides real ones.
const (
	// PendingDraw: a random sale's pre-queue or a lottery's registrant,
	// whose place the draw has not given yet.
	PendingDraw int64 = 0
	// NotSelected: a lottery shopper the draw did not select (or who did
	// not register).
	NotSelected int64 = -1
	// Invited: a shopper who redeemed an invite code, ahead of the line:
	// admitted at the open, or at once when open, whatever the pacing.
	Invited int64 = -2
)

// Chances a waiting shopper is told, from the stock left and the places
// ahead.
const (
	ChanceLikely   = "likely"
	ChancePossible = "possible"
	ChanceUnlikely = "unlikely"
)

// Status is the answer to a poll.
type Status struct {
	State State
	// OpensAt, for StateScheduled, and Position, the place the shopper
	// will have at the open (zero until a draw gives it).
	OpensAt time.Time
	// Position is the places ahead plus one and EstimatedWait a
	// conservative estimate, for StateWaiting; UnitsLeft and Chance give
	// the shopper honest odds.
	Position      int64
	EstimatedWait time.Duration
	UnitsLeft     int64
	Chance        string
	// Challenge, for StateChallenge: the proof of work to solve before
	// the admission is handed out.
	Challenge *challenge.Challenge
	// AdmissionToken and ExpiresIn, for StateAdmitted.
	AdmissionToken string
	ExpiresIn      time.Duration
	// Final, for StateSoldOut: true once no pending hold can return units.
	Final bool
	// Ticket, when set, replaces the shopper's ticket: the draw has given
	// its place.
	Ticket string
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

// Sale returns the SKU's snapshot: the published sale and its live state.
func (r *Room) Sale(ctx context.Context, sku string) (*Snapshot, error) {
	return r.cfg.Snapshots.Snapshot(ctx, sku)
}

// DrawDocument returns a drawn sale's published draw.
func (r *Room) DrawDocument(ctx context.Context, snap *Snapshot) (*DrawDocument, error) {
	return r.cfg.Snapshots.DrawDocument(ctx, snap)
}

// PublishedState is the sale's state with the live counter taken into
// account: an open sale with no units left is sold out.
func (r *Room) PublishedState(snap *Snapshot) flashsale.SaleState {
	state := snap.Sale.Sale().StateAt(r.cfg.Now())
	if state == flashsale.SaleOpen && snap.Loaded && snap.Counter <= 0 {
		return flashsale.SaleSoldOut
	}
	return state
}

// ErrNotRegistered: a lottery shopper asked for a ticket during the
// registration window without registering.
var ErrNotRegistered = &flashsale.Error{Code: flashsale.CodeNotRegistered,
	Message: "This sale is a lottery: register first (POST /sale/{sku}/register) before registration closes."}

// Register enters the shopper in a lottery sale's draw. Repeating it is
// harmless. Outside the window it answers registration_closed.
func (r *Room) Register(ctx context.Context, sku, userID string, accountCreated time.Time) error {
	snap, err := r.Sale(ctx, sku)
	if err != nil {
		return err
	}
	sale := snap.Sale.Sale()
	now := r.cfg.Now()
	if sale.Fairness != flashsale.FairnessLottery {
		return flashsale.Errorf(flashsale.CodeRegistrationClosed, "This sale is not a lottery; take a ticket instead.")
	}
	if err := eligible(sale, accountCreated, now); err != nil {
		return err
	}
	if !now.Before(sale.RegistrationClosesAt) || snap.Drawn || sale.StateAt(now) == flashsale.SaleClosed {
		return flashsale.Errorf(flashsale.CodeRegistrationClosed, "Registration for this lottery has closed.")
	}
	_, err = r.cfg.Queue.Enter(ctx, sale.ID, userID, now)
	if errors.Is(err, flashsale.ErrSealed) {
		return flashsale.Errorf(flashsale.CodeRegistrationClosed, "Registration for this lottery has closed.")
	}
	return err
}

// atTheDoor turns away, before they take a place or a code binds to
// them, the shoppers the sale cannot serve: after it closed, an account
// it does not admit, or once it is sold out for good (nothing left, no
// hold that could come back).
func atTheDoor(snap *Snapshot, sale *flashsale.Sale, accountCreated, now time.Time) error {
	if sale.StateAt(now) == flashsale.SaleClosed {
		return flashsale.Errorf(flashsale.CodeClosed, "The sale has closed.")
	}
	if err := eligible(sale, accountCreated, now); err != nil {
		return err
	}
	if sale.StateAt(now) == flashsale.SaleOpen && snap.Loaded && snap.Counter <= 0 && snap.Pending <= 0 {
		return flashsale.Errorf(flashsale.CodeSoldOut, "Sold out: nothing is left and no hold can come back.")
	}
	return nil
}

// Ticket gives the shopper a place in the sale's queue under its fairness
// policy (the same place on every call, never a better one) as a signed
// token. accountCreated is the shopper's acct_created claim (zero if
// absent): a sale with a minimum account age turns ineligible shoppers
// away here, before they wait.
func (r *Room) Ticket(ctx context.Context, sku, userID string, accountCreated time.Time) (Ticket, error) {
	snap, err := r.Sale(ctx, sku)
	if err != nil {
		return Ticket{}, err
	}
	sale, now := snap.Sale.Sale(), r.cfg.Now()
	if err := atTheDoor(snap, sale, accountCreated, now); err != nil {
		return Ticket{}, err
	}
	pl, err := r.remembered(ctx, snap, userID, now)
	if err != nil {
		return Ticket{}, err
	}
	r.await(ctx, snap, userID, pl.position)
	tk := r.cfg.Tokens.SignTicket(token.Ticket{UserID: userID, SaleID: snap.Sale.ID, Arrival: pl.arrivalTime(),
		Position: pl.position, AccountCreated: accountCreated})
	ahead, wait := r.ahead(snap, pl.position, now)
	return Ticket{Token: tk, Position: ahead, EstimatedWait: wait, RetryAfter: pollAfter(wait)}, nil
}

// remembered returns the shopper's place from memory when it was given
// before, else decides it (place) and remembers it once final.
func (r *Room) remembered(ctx context.Context, snap *Snapshot, userID string, now time.Time) (place, error) {
	saleID := snap.Sale.ID
	if pl, ok := r.places.get(saleID, userID); ok {
		return pl, nil
	}
	pos, arrival, err := r.place(ctx, snap, userID, now)
	if err != nil {
		return place{}, err
	}
	pl := place{position: pos, arrival: arrival.UnixMilli()}
	if pos > 0 || (pos == NotSelected && snap.Drawn) {
		r.places.put(saleID, userID, pl)
	}
	return pl, nil
}

// place decides the shopper's place under the sale's policy.
func (r *Room) place(ctx context.Context, snap *Snapshot, userID string, now time.Time) (int64, time.Time, error) {
	sale := snap.Sale.Sale()
	q := r.cfg.Queue
	switch sale.Fairness {
	case flashsale.FairnessRandom:
		if now.Before(sale.OpensAt) {
			// Before the open, everyone present is an entrant; the draw at
			// the open gives the places.
			at, err := q.Enter(ctx, sale.ID, userID, now)
			if err == nil {
				return PendingDraw, at, nil
			}
			if !errors.Is(err, flashsale.ErrSealed) {
				return 0, time.Time{}, err
			}
		}
		if at, ok, err := q.Entered(ctx, sale.ID, userID); err != nil {
			return 0, time.Time{}, err
		} else if ok {
			return r.drawnPlace(ctx, snap, userID, at)
		}
		// Arrivals after the open queue behind the entrants, in order of
		// arrival: sealing (idempotent) makes their places follow the
		// drawn ones even if the draw itself has not finished.
		if _, err := q.Seal(ctx, sale.ID); err != nil {
			return 0, time.Time{}, err
		}
		return q.Join(ctx, sale.ID, userID, now)
	case flashsale.FairnessLottery:
		at, ok, err := q.Entered(ctx, sale.ID, userID)
		if err != nil {
			return 0, time.Time{}, err
		}
		if !ok {
			if now.Before(sale.RegistrationClosesAt) {
				return 0, time.Time{}, ErrNotRegistered
			}
			// A shopper who did not register is never admitted.
			return NotSelected, now, nil
		}
		return r.drawnPlace(ctx, snap, userID, at)
	default:
		return q.Join(ctx, sale.ID, userID, now)
	}
}

// drawnPlace returns an entrant's place once drawn, or PendingDraw.
func (r *Room) drawnPlace(ctx context.Context, snap *Snapshot, userID string, at time.Time) (int64, time.Time, error) {
	if !snap.Drawn {
		return PendingDraw, at, nil
	}
	pos, err := r.drawn(ctx, snap, userID)
	return pos, at, err
}

// drawn looks an entrant up in the sale's draw: its place, or NotSelected.
func (r *Room) drawn(ctx context.Context, snap *Snapshot, userID string) (int64, error) {
	ix, err := r.cfg.Snapshots.DrawIndex(ctx, snap)
	if err != nil {
		return 0, err
	}
	pos, ok := ix.Position(userID)
	if !ok || (snap.Sale.Fairness == flashsale.FairnessLottery && pos > snap.Winners) {
		return NotSelected, nil
	}
	return pos, nil
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

// ErrInvalidTicket: the ticket is forged, malformed, or for another sale.
var ErrInvalidTicket = &flashsale.Error{Code: flashsale.CodeInvalidToken,
	Message: "The waiting-room token is not valid for this sale; ask for a new ticket."}

// ErrNotYourTicket: a poll or an answer carried a shopper JWT of another
// shopper than the ticket's.
var ErrNotYourTicket = &flashsale.Error{Code: flashsale.CodeInvalidToken,
	Message: "This waiting-room ticket is another shopper's; ask for your own."}

// errPollingTooFast answers a poll, not bound to the shopper's JWT, of a
// ticket polled faster than the room asks.
func errPollingTooFast(retry time.Duration) error {
	return &flashsale.Error{Code: flashsale.CodeRateLimited, RetryAfter: max(retry, time.Second),
		Message: "This ticket is polled faster than the waiting room asks; poll when told, with your sign-in (Authorization), and your place is kept."}
}

// Status answers a poll from the shopper's ticket token that carried no
// shopper JWT: StatusFor(ctx, sku, ticketToken, "").
func (r *Room) Status(ctx context.Context, sku, ticketToken string) (Status, error) {
	return r.StatusFor(ctx, sku, ticketToken, "")
}

// StatusFor answers a poll from the shopper's ticket token. userID is the
// user of the verified shopper JWT the poll carried, or "" for a poll that
// carried none; a JWT of another user than the ticket's is ErrNotYourTicket.
//
// A ticket is no weapon in another's hands: it travels in URLs, logs and
// referrers, and anyone holding a copy can poll it. So only polls bound to
// the shopper's JWT count towards the automation hold (polling faster than
// asked holds the shopper quietly); polls of the ticket alone are counted
// apart, and past the same limits are answered 429 rate_limited, which
// slows the copy's holder and holds no one. An admission handed to a copy
// is useless to anyone else: the reserve checks it against the JWT's user.
func (r *Room) StatusFor(ctx context.Context, sku, ticketToken, userID string) (Status, error) {
	snap, err := r.Sale(ctx, sku)
	if err != nil {
		return Status{}, err
	}
	t, err := r.cfg.Tokens.VerifyTicket(ticketToken, snap.Sale.ID)
	if err != nil {
		return Status{}, ErrInvalidTicket
	}
	if userID != "" && userID != t.UserID {
		return Status{}, ErrNotYourTicket
	}
	now := r.cfg.Now()
	st, _, err := r.status(ctx, snap, t, now)
	if err != nil {
		return st, err
	}
	if userID == "" {
		n, early, _ := r.anonPolls.Observe(snap.Sale.ID, t.UserID, now, st.RetryAfter)
		if n > r.cfg.PollLimit || early > r.cfg.EarlyLimit {
			return Status{}, errPollingTooFast(st.RetryAfter)
		}
		return st, nil
	}
	// Flagged once, as the shopper crosses a limit (again in a later
	// window if it keeps on): a write per poll of a client hammering the
	// room would make it cost the room most where it should cost least.
	n, early, wasEarly := r.polls.Observe(snap.Sale.ID, t.UserID, now, st.RetryAfter)
	earlyBefore := early
	if wasEarly {
		earlyBefore--
	}
	over := n > r.cfg.PollLimit || early > r.cfg.EarlyLimit
	overBefore := n-1 > r.cfg.PollLimit || earlyBefore > r.cfg.EarlyLimit
	if over && !overBefore {
		r.flag(ctx, snap.Sale.ID, t.UserID, "polled faster than the waiting room asks")
	}
	return st, nil
}

// status decides a poll's answer. admitted is the admission to hand out
// when the shopper's place has come up (the caller issues it, or first
// asks for the proof of work).
func (r *Room) status(ctx context.Context, snap *Snapshot, t token.Ticket, now time.Time) (Status, bool, error) {
	sale := snap.Sale.Sale()
	var st Status
	var err error
	if t.Position == PendingDraw && snap.Drawn {
		// The draw has run since the ticket was taken: its place is known
		// now, and a new ticket carries it.
		if t.Position, err = r.drawn(ctx, snap, t.UserID); err != nil {
			return Status{}, false, err
		}
		st.Ticket = r.cfg.Tokens.SignTicket(t)
	}
	switch sale.StateAt(now) {
	case flashsale.SalePaused:
		st.State, st.RetryAfter = StatePaused, 5*time.Second
		return st, false, nil
	case flashsale.SaleClosed:
		st.State = StateClosed
		return st, false, nil
	}
	if t.Position == NotSelected {
		st.State = StateNotSelected
		return st, false, nil
	}
	if now.Before(sale.OpensAt) {
		// The place is shown before the open too (zero while a draw has
		// yet to give it).
		ahead, wait := r.ahead(snap, t.Position, now)
		st.State, st.OpensAt, st.Position, st.RetryAfter = StateScheduled, sale.OpensAt, ahead, pollAfter(wait)
		return st, false, nil
	}
	if !snap.Loaded {
		// The gate lost the counter; the sale is failing closed.
		st.State, st.RetryAfter = StatePaused, 5*time.Second
		return st, false, nil
	}
	if snap.Counter <= 0 {
		st.State, st.Final = StateSoldOut, snap.Pending <= 0
		if !st.Final {
			// Holds may come back: a shopper who keeps polling keeps the
			// place. Those whose place the returning holds could reach
			// are asked back each second; those far behind them, whose
			// odds are poor, less often, so that a crowd told "sold out,
			// for now" does not poll the origin every second.
			st.RetryAfter = time.Second
			if ahead, _ := r.ahead(snap, t.Position, now); ahead > 2*snap.Pending {
				st.RetryAfter = farBehind
			}
		}
		return st, false, nil
	}
	if t.Position == PendingDraw {
		// Open, but the draw is still running: a moment more.
		st.State, st.Position = StateWaiting, max(snap.Entrants, 1)
		st.UnitsLeft, st.Chance, st.RetryAfter = snap.Counter, ChancePossible, time.Second
		return st, false, nil
	}
	ahead, wait := r.ahead(snap, t.Position, now)
	if ahead > 0 {
		st.State, st.Position, st.EstimatedWait, st.RetryAfter = StateWaiting, ahead, wait, pollAfter(wait)
		st.UnitsLeft, st.Chance = snap.Counter, chance(ahead, snap)
		return st, false, nil
	}
	if _, held := snap.Suspects[t.UserID]; held {
		// Held under the automation policy: no loud rejection to learn
		// from, a place that never comes up.
		st.State, st.Position, st.EstimatedWait = StateWaiting, max(ahead, 1), wait+time.Minute
		st.UnitsLeft, st.Chance, st.RetryAfter = snap.Counter, ChanceUnlikely, 10*time.Second
		return st, false, nil
	}
	if bits := r.difficulty(snap, t, now); bits > 0 {
		c := r.cfg.Challenges.Issue(sale.ID, t.UserID, bits, now)
		// A shopper back at its place (its reserve found the units gone,
		// and some came back) who already solved this window's salt has
		// done the work: it is admitted, not handed a spent salt.
		if solved, err := r.cfg.Challenges.Solved(ctx, sale.ID, c); err != nil || !solved {
			st.State, st.Challenge = StateChallenge, &c
			return st, true, nil
		}
	}
	st = r.admit(ctx, snap, t, now, st)
	return st, true, nil
}

// difficulty is the proof of work asked of the shopper: zero when the sale
// sets none.
func (r *Room) difficulty(snap *Snapshot, t token.Ticket, now time.Time) int {
	if snap.Sale.ChallengeBits <= 0 || r.cfg.Challenges == nil {
		return 0
	}
	waiting := int64(0)
	if snap.AdmittedUpTo != Everyone {
		waiting = max(0, snap.Issued-snap.AdmittedUpTo)
	}
	return r.cfg.Difficulty.Difficulty(snap.Sale.ChallengeBits, t.AccountCreated, waiting, snap.Counter, now)
}

// admit issues the shopper's admission token.
func (r *Room) admit(ctx context.Context, snap *Snapshot, t token.Ticket, now time.Time, st Status) Status {
	r.claim(ctx, snap.Sale.ID, claimKey(t), snap)
	ttl := r.cfg.AdmissionTTL
	if n := snap.Sale.NotifiedAdmissionSeconds; n > 0 {
		// The shopper may have left the page and been told of its turn
		// (shopper.turn): the admission lasts long enough to come back.
		ttl = time.Duration(n) * time.Second
	}
	adm := token.Admission{
		UserID:  t.UserID,
		SaleID:  snap.Sale.ID,
		ID:      token.AdmissionID(snap.Sale.ID, t.UserID),
		Expires: now.Add(ttl),
		Epoch:   snap.Epoch,
	}
	st.State, st.AdmissionToken, st.ExpiresIn = StateAdmitted, r.cfg.Tokens.SignAdmission(adm), ttl
	st.Challenge = nil
	return st
}

// ErrNotAdmitted: a proof of work was sent for a place that has not come
// up (or no longer can: see the status).
var ErrNotAdmitted = &flashsale.Error{Code: "not_admitted",
	Message: "Your place has not come up; keep polling your status.", RetryAfter: time.Second}

// Admission takes a solved proof of work that carried no shopper JWT:
// AdmissionFor(ctx, sku, ticketToken, salt, nonce, "").
func (r *Room) Admission(ctx context.Context, sku, ticketToken, salt, nonce string) (Status, error) {
	return r.AdmissionFor(ctx, sku, ticketToken, salt, nonce, "")
}

// AdmissionFor takes the shopper's solved proof of work and, if it holds
// and the place is still admitted, returns the admission token (contract:
// POST /sale/{sku}/admission). A wrong nonce does not spend the salt.
// userID is the user of the verified shopper JWT the request carried, or
// "": as for StatusFor, only wrong answers bound to the shopper's JWT count
// towards the automation hold; those of the ticket alone, past the same
// limit, are answered 429 rate_limited.
func (r *Room) AdmissionFor(ctx context.Context, sku, ticketToken, salt, nonce, userID string) (Status, error) {
	snap, err := r.Sale(ctx, sku)
	if err != nil {
		return Status{}, err
	}
	t, err := r.cfg.Tokens.VerifyTicket(ticketToken, snap.Sale.ID)
	if err != nil {
		return Status{}, ErrInvalidTicket
	}
	if userID != "" && userID != t.UserID {
		return Status{}, ErrNotYourTicket
	}
	now := r.cfg.Now()
	st, admitted, err := r.status(ctx, snap, t, now)
	if err != nil {
		return Status{}, err
	}
	switch {
	case !admitted:
		switch st.State {
		case StateSoldOut:
			return Status{}, flashsale.Errorf(flashsale.CodeSoldOut, "Sold out: no stock is left.")
		case StatePaused:
			return Status{}, &flashsale.Error{Code: flashsale.CodeSalePaused, Message: "The sale is paused.", RetryAfter: 5 * time.Second}
		case StateClosed:
			return Status{}, flashsale.Errorf(flashsale.CodeClosed, "The sale has closed.")
		case StateNotSelected:
			return Status{}, flashsale.Errorf(flashsale.CodeNotSelected, "The draw did not select you.")
		}
		return Status{}, ErrNotAdmitted
	case st.State == StateAdmitted && r.difficulty(snap, t, now) == 0:
		return st, nil // this sale asks no proof of work
	}
	// A proof of work is checked even for a shopper whose status no
	// longer asks one (it solved this window's salt): a salt is accepted
	// once.
	if err := r.cfg.Challenges.Verify(ctx, snap.Sale.ID, t.UserID, salt, nonce, now); err != nil {
		if !errors.Is(err, challenge.ErrFailed) {
			return Status{}, err
		}
		if userID == "" {
			if r.anonFails.Add(snap.Sale.ID, t.UserID, now) > r.cfg.FailLimit {
				return Status{}, &flashsale.Error{Code: flashsale.CodeRateLimited, RetryAfter: time.Minute,
					Message: "Too many wrong answers for this ticket; answer with your sign-in (Authorization)."}
			}
		} else if r.fails.Add(snap.Sale.ID, t.UserID, now) == r.cfg.FailLimit+1 {
			r.flag(ctx, snap.Sale.ID, t.UserID, "failed the admission challenge repeatedly")
		}
		return Status{}, &flashsale.Error{Code: flashsale.CodeChallengeFailed, Message: err.Error()}
	}
	return r.admit(ctx, snap, t, now, Status{}), nil
}

// flag holds a shopper under the automation policy; best effort.
func (r *Room) flag(ctx context.Context, saleID, userID, reason string) {
	_ = r.cfg.Queue.Flag(context.WithoutCancel(ctx), saleID, userID, reason)
}

// chance tells a waiting shopper the odds, from the units left (and those
// held that may come back) and the places ahead.
func chance(ahead int64, snap *Snapshot) string {
	switch {
	case ahead <= snap.Counter:
		return ChanceLikely
	case ahead <= 2*(snap.Counter+snap.Pending):
		return ChancePossible
	}
	return ChanceUnlikely
}

// WaitMargin is the published margin of wait estimates: a quarter more
// than the rate promises, so that shoppers are told too long rather than
// too short, and never much too long.
const WaitMargin = 1.25

// ahead returns how many places are ahead of position plus one (0 once
// admitted) and a conservative estimate of the wait.
func (r *Room) ahead(snap *Snapshot, position int64, now time.Time) (int64, time.Duration) {
	sale := snap.Sale
	var untilOpen time.Duration
	if now.Before(sale.OpensAt) {
		untilOpen = sale.OpensAt.Sub(now)
	}
	if position == Invited {
		// At the front of the line until the open, then admitted.
		if untilOpen > 0 {
			return 1, untilOpen
		}
		return 0, 0
	}
	if position <= 0 {
		return 0, untilOpen
	}
	upTo := snap.AdmittedUpTo
	if untilOpen > 0 {
		upTo = 0
		if sale.AdmissionPerSecond <= 0 {
			upTo = Everyone
		}
	}
	if position <= upTo {
		return 0, untilOpen
	}
	ahead := position - upTo
	wait := untilOpen
	if rate := admissionRate(snap, untilOpen > 0); rate > 0 {
		secs := float64(ahead) / rate * WaitMargin
		wait += time.Duration(math.Ceil(secs)) * time.Second
	}
	return ahead, wait
}

// admissionRate is the rate a wait is estimated at: what the room will
// admit (planned), or, once the sale is open, the measured rate where it
// is clearly slower (the stock holding admissions back); never under the
// pacer's own floor, a fiftieth of the sale's rate, so that a room that
// admitted nobody for a while does not promise a shopper days. A measure
// within a tenth of the plan is the plan, seen through the pacer's ticks.
func admissionRate(snap *Snapshot, beforeOpen bool) float64 {
	rate := planned(snap)
	if rate <= 0 {
		return 0
	}
	if !beforeOpen && snap.Rate > 0 && snap.Rate < 0.9*rate {
		rate = snap.Rate
	}
	return math.Max(rate, paceFloor(float64(snap.Sale.AdmissionPerSecond)))
}

// planned is the rate the room will admit at: the pacer's while it holds
// admissions back, else the sale's admissionPerSecond.
func planned(snap *Snapshot) float64 {
	ceiling := float64(snap.Sale.AdmissionPerSecond)
	if snap.Pace > 0 && snap.Pace < ceiling {
		return snap.Pace
	}
	return ceiling
}

// farBehind is how often a shopper is asked to poll while sold out is not
// final and its place is far behind the holds that may come back.
const farBehind = 10 * time.Second

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

// claimSet remembers which admitted places of a sale this server has seen
// collect their admission, so each counts once towards the pacer's
// outstanding admissions.
type claimSet struct {
	mu   sync.Mutex
	seen map[int64]struct{}
}

// claim counts the first admission a place collects here. Unpaced sales
// need no count.
func (r *Room) claim(ctx context.Context, saleID string, position int64, snap *Snapshot) {
	if snap.Sale.AdmissionPerSecond <= 0 {
		return
	}
	r.mu.Lock()
	cs, ok := r.claims[saleID]
	if !ok {
		cs = &claimSet{seen: map[int64]struct{}{}}
		r.claims[saleID] = cs
	}
	r.mu.Unlock()
	cs.mu.Lock()
	_, dup := cs.seen[position]
	if !dup {
		cs.seen[position] = struct{}{}
	}
	cs.mu.Unlock()
	if !dup {
		// Best effort: a lost count only makes the pacer a little bolder.
		_, _ = r.cfg.Queue.Add(context.WithoutCancel(ctx), saleID, CounterClaims, 1)
	}
}
