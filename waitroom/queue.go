package waitroom

import (
	"context"
	"time"
)

// Queue is the waiting room's shared state: places, entrants, how far the
// queue is admitted, and the pacer's counters. Implementations (package
// memory in process, package redis shared by every edge and origin) are
// safe for concurrent use and pass the suite in package queuetest.
type Queue interface {
	// Join returns the shopper's place (from 1) and arrival time, giving
	// the next place only on the shopper's first call. After Seal, places
	// continue past the entrants.
	Join(ctx context.Context, saleID, userID string, now time.Time) (position int64, arrival time.Time, err error)
	// Len returns how many places the queue has given (with the sealed
	// entrants' places).
	Len(ctx context.Context, saleID string) (int64, error)

	// Enter adds the shopper to the sale's entrants (a random sale's
	// pre-queue, a lottery's registrations) and returns when they first
	// entered; flashsale.ErrSealed once the draw closed the entrants.
	Enter(ctx context.Context, saleID, userID string, now time.Time) (time.Time, error)
	// Entered reports whether the shopper is an entrant, and since when.
	Entered(ctx context.Context, saleID, userID string) (time.Time, bool, error)
	// Entrants returns the user ids of every entrant, in no order.
	Entrants(ctx context.Context, saleID string) ([]string, error)
	// Seal closes the entrants for the draw, once, and returns how many
	// there are.
	Seal(ctx context.Context, saleID string) (int64, error)

	// Admit raises the admitted-up-to place (never lowers it) and returns
	// it; Admitted reads it.
	Admit(ctx context.Context, saleID string, upTo int64) (int64, error)
	Admitted(ctx context.Context, saleID string) (int64, error)
	// Add and Counter keep the sale's named counters (claims, attempts).
	Add(ctx context.Context, saleID, counter string, delta int64) (int64, error)
	Counter(ctx context.Context, saleID, counter string) (int64, error)

	// Lead reports whether holder leads the named task among the servers
	// sharing the queue, taking or renewing a lease of ttl.
	Lead(ctx context.Context, task, holder string, ttl time.Duration) (bool, error)

	// Spend marks id (a proof-of-work salt) used for ttl and reports
	// whether this call did: an id is spent at most once while marked.
	Spend(ctx context.Context, saleID, id string, ttl time.Duration) (bool, error)
	// Spent reports whether id is marked spent, writing nothing.
	Spent(ctx context.Context, saleID, id string) (bool, error)

	// Flag holds a shopper suspected of automation (see the published
	// policy), with the first reason given; Suspects lists the held.
	Flag(ctx context.Context, saleID, userID, reason string) error
	Suspects(ctx context.Context, saleID string) (map[string]string, error)

	// Raise raises one of the sale's named counters to to if it is lower
	// (never lowers it) and returns its value: a cursor that several
	// servers may move, each only forward.
	Raise(ctx context.Context, saleID, counter string, to int64) (int64, error)

	// Await notes that the shopper at position waits to be told of its
	// turn (a sale that notifies turns): a place Join or a draw gave, or
	// Invited. Repeating it is harmless.
	Await(ctx context.Context, saleID, userID string, position int64) error
	// Awaiting returns the shoppers noted at places from+1 to to, in
	// place order; places nobody was noted at are left out.
	Awaiting(ctx context.Context, saleID string, from, to int64) ([]string, error)
	// AwaitingInvited returns the invited shoppers noted, in the order
	// they were first noted, from the index from (0 for all).
	AwaitingInvited(ctx context.Context, saleID string, from int64) ([]string, error)

	// Forget drops a sale's places, entrants and counters, once the sale
	// is over (see control.Retirer): millions of places a big sale, that
	// nothing reads after it closes. Its suspects stay, for the review
	// after the sale. Forgetting an unknown sale does nothing.
	Forget(ctx context.Context, saleID string) error
}

// Names of the pacer's counters.
const (
	// CounterClaims counts places that collected their admission token.
	CounterClaims = "claims"
	// CounterAttempts counts reserves the gate decided.
	CounterAttempts = "attempts"
	// CounterTurns is the last place whose turn was notified, and
	// CounterInvitedTurns how many invited shoppers' turns were (Turns).
	CounterTurns        = "turns"
	CounterInvitedTurns = "turns-invited"
	// CounterDrawnTurns is 1 once a drawn sale's entrants were noted.
	CounterDrawnTurns = "turns-drawn"
)
