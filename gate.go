package flashsale

import (
	"context"
	"time"
)

// Gate is the stock gate: the one place where stock decreases, and so the
// one place where overselling is prevented. Reserve does, as one indivisible
// step, the idempotency check, the admission-token spend check, the sold-out
// check, the per-user and per-instrument checks and the decrement. Its
// sold-out branch writes nothing.
//
// Giving units back (Restock, Void) is not on this interface, nor on
// GateAdmin: it belongs to package restock alone, where the record decides
// first (restock.Gate is the gate whole).
//
// An admission is a shopper's one turn in a sale (see token.AdmissionID):
// a win spends it for as long as the gate keeps the sale, through restocks
// and rebuilds, and only Void gives it back. A hold that ends returns its
// units to the shoppers still waiting, not the turn to its shopper.
//
// Implementations (package memory, package redis) are safe for concurrent
// use and pass the conformance suite in package gatetest.
type Gate interface {
	// Reserve takes a hold of r.Quantity units for r.UserID if every check
	// passes. A rejection is a verdict, not an error; an error means the
	// gate could not be asked, and the caller must fail closed.
	Reserve(ctx context.Context, r GateReserve) (GateOutcome, error)

	// Lookup returns the hold recorded under the shopper's idempotency key,
	// so a repeated request can replay its first answer before any other
	// check. found is false when the key is unknown.
	Lookup(ctx context.Context, saleID, userID, key string) (h Hold, found bool, err error)
}

// GateAdmin is the gate as the operator and the background services see it.
// Every mutation of the counter is written to the gate's audit log with its
// source.
type GateAdmin interface {
	Gate

	// Load sets up a sale's counter with initial units at epoch, unless it
	// is already loaded; it reports whether it did.
	Load(ctx context.Context, saleID string, initial, epoch int64, source string) (bool, error)

	// Rebuild replaces the sale's counter, holds, buyers, instruments,
	// idempotency keys and spent admissions with what the record says:
	// counter = initial - units of holds; spent are the admissions the
	// sale's reservations spent (see SaleStore.SpentAdmissions), and the
	// holds' own AdmissionIDs are spent too. Whatever a shopper could do
	// before a rebuild it can do after, and nothing more: a rebuild hands
	// out no turn. It leaves the sale loaded and paused. Callers pause the
	// sale first.
	Rebuild(ctx context.Context, saleID string, initial, epoch int64, holds []Hold, spent []SpentAdmission, source string) error

	// Snapshot reads the counter and its bookkeeping in one atomic step.
	Snapshot(ctx context.Context, saleID string) (GateSnapshot, error)

	// Holds lists the holds the gate keeps for a sale.
	Holds(ctx context.Context, saleID string) ([]Hold, error)

	// SetPaused makes Reserve answer VerdictPaused (or stop doing so) for
	// every server that shares the gate.
	SetPaused(ctx context.Context, saleID string, paused bool, source string) error

	// Audit returns up to limit of the newest entries of the sale's audit
	// log, oldest first.
	Audit(ctx context.Context, saleID string, limit int) ([]AuditEntry, error)

	// Drop forgets everything the gate keeps for the sale.
	Drop(ctx context.Context, saleID string) error

	// Ping reports whether the gate answers.
	Ping(ctx context.Context) error
}

// GateReserve is one reserve decision asked of the gate.
type GateReserve struct {
	SaleID        string
	ReservationID string
	UserID        string
	Quantity      int
	// Instrument is the payment-instrument fingerprint; "" when none was
	// given.
	Instrument string
	// AdmissionID identifies the admission token being spent: its
	// shopper's place in the queue (token.AdmissionID). It is spent only
	// by a win, for as long as the gate keeps the sale.
	AdmissionID string
	// Epoch is the epoch the admission was issued under; a different epoch
	// than the gate's is VerdictStaleEpoch.
	Epoch          int64
	IdempotencyKey string
	RequestHash    string
	Now            time.Time
}

// Verdict is the gate's answer to a reserve.
type Verdict int

// The gate's verdicts, in the order its checks run.
const (
	// VerdictWon: the units are held under the new reservation id.
	VerdictWon Verdict = iota + 1
	// VerdictReplayed: the idempotency key already holds; Hold is that hold
	// and nothing changed.
	VerdictReplayed
	// VerdictKeyReused: the key holds a different request.
	VerdictKeyReused
	// VerdictNotLoaded: the gate has no counter for the sale (never loaded,
	// or lost): the sale must fail closed.
	VerdictNotLoaded
	// VerdictPaused: the sale is paused in the gate, or its counter
	// disagrees with the gate's own bookkeeping (Counter + Held !=
	// Initial: something wrote to it behind the gate), in which case the
	// gate sells nothing, not even units that exist, until a rebuild.
	// The extra units a second writer adds would otherwise sell through
	// the correct path before any watcher could look.
	VerdictPaused
	// VerdictStaleEpoch: the admission was issued before the last rebuild.
	VerdictStaleEpoch
	// VerdictAdmissionUsed: the admission was already spent by a win,
	// whether or not that win's hold still holds.
	VerdictAdmissionUsed
	// VerdictSoldOut: fewer units are left than asked for. Nothing was
	// written.
	VerdictSoldOut
	// VerdictLimitReached: the shopper or the payment instrument already
	// holds a live reservation of this sale.
	VerdictLimitReached
)

var verdictNames = [...]string{"", "won", "replayed", "key_reused", "not_loaded", "paused", "stale_epoch", "admission_used", "sold_out", "limit_reached"}

func (v Verdict) String() string {
	if v < 0 || int(v) >= len(verdictNames) {
		return "unknown"
	}
	return verdictNames[v]
}

// GateOutcome is what Reserve decided.
type GateOutcome struct {
	Verdict Verdict
	// Hold is the new hold (VerdictWon) or the replayed one
	// (VerdictReplayed).
	Hold Hold
	// Remaining is the counter after the decision.
	Remaining int64
	// Epoch is the gate's epoch.
	Epoch int64
}

// Hold is a reservation's units as the gate keeps them.
type Hold struct {
	ReservationID  string
	UserID         string
	Quantity       int
	Instrument     string
	IdempotencyKey string
	RequestHash    string
	// AdmissionID is the admission token the hold spent. Void gives it
	// back: a hold the record never took must not cost the shopper the
	// admission.
	AdmissionID string
	CreatedAt   time.Time
}

// GateSnapshot is a sale's counter and bookkeeping read in one atomic step.
type GateSnapshot struct {
	Loaded  bool
	Paused  bool
	Epoch   int64
	Initial int64
	// Counter is the units left to sell.
	Counter int64
	// Won and Restocked are the units taken by wins and given back by
	// restocks since the last load or rebuild, so Won - Restocked is the
	// units held. Counter + Won - Restocked == Initial unless something
	// wrote to the counter behind the gate.
	Won       int64
	Restocked int64
	// AuditedCounter is the counter as the audited mutations alone leave
	// it (each moves it by its own delta); a difference from Counter
	// means an unaudited writer, and stays visible after later audited
	// mutations.
	AuditedCounter int64

	// The fields below are for a sale whose counter is split over shards
	// (see ShardOf); for an unsplit counter they are zero. Then Counter,
	// Won, Restocked and AuditedCounter are sums over the loaded shards,
	// Counter and AuditedCounter including the units in flight, and
	// Initial is the sale's initial stock. The sums are read shard by
	// shard at one consistent point of the transfers between them.

	// Shards is how many shards the counter is split over.
	Shards int
	// Unloaded counts shards that sell nothing until rebuilt (see
	// ShardState.Loaded); their figures are missing from the sums.
	Unloaded int
	// InFlight is the units debited from one shard and not yet credited
	// to another.
	InFlight int64
	// ShardDrift is, over the loaded shards, the sum of each one's |Drift|
	// and |Counter - AuditedCounter|: zero unless something wrote to a
	// shard's counter behind the gate. Drift alone could hide writes to
	// two shards that cancel out.
	ShardDrift int64
}

// SpentAdmission is an admission a reservation of the sale spent: the turn
// of the shopper's place, taken. UserID says whose it was, so that a gate
// split over shards keeps it where that shopper's reserves go.
type SpentAdmission struct {
	UserID      string
	AdmissionID string
}

// Held is the units the gate holds for live reservations.
func (s GateSnapshot) Held() int64 { return s.Won - s.Restocked }

// Drift is Counter + Held - Initial: zero unless the counter was changed
// behind the gate. Positive drift means units that do not exist could be
// sold.
func (s GateSnapshot) Drift() int64 { return s.Counter + s.Held() - s.Initial }

// AuditEntry is one mutation of a sale's counter.
type AuditEntry struct {
	Seq int64
	At  time.Time
	// Op is load, reserve, restock, void, rebuild, pause, resume,
	// transfer-out, transfer-in, transfer-refund, or whatever a second
	// writer called itself.
	Op string
	// Source names the writer: the service, the server and, where there is
	// one, the operator.
	Source  string
	Delta   int64
	Counter int64
	// ReservationID is the hold the mutation took or gave back; for a
	// transfer between shards, the transfer's id.
	ReservationID string
	// Shard is the shard whose counter the entry moved (Counter is that
	// shard's), for a sale split over shards; 0 otherwise.
	Shard int
}
