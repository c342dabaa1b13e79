package engine

// The purchase path: its bounds on requests in flight (overall, per sale, per account), and what it tells the room.

import (
	"context"
	"math"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/bulkhead"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/waitroom"
)

// suspect holds a shopper under the automation policy.
func (e *Engine) suspect(ctx context.Context, saleID, userID, reason string) {
	if err := e.Queue.Flag(context.WithoutCancel(ctx), saleID, userID, reason); err != nil {
		e.Config.Logger.Warn("flag a suspected bot", "sale", saleID, "err", err)
	}
}

// decided feeds the pacer: every reserve the gate was asked about, with
// its latency and whether the path failed, and (for paced sales) one more
// attempt against the outstanding admissions.
func (e *Engine) decided(ctx context.Context, sale *flashsale.Sale, latency time.Duration, failed bool) {
	if sale.AdmissionPerSecond <= 0 {
		return
	}
	e.Pacer.Observe(sale.ID, latency, failed)
	if _, err := e.Queue.Add(context.WithoutCancel(ctx), sale.ID, waitroom.CounterAttempts, 1); err != nil {
		e.Config.Logger.Warn("pacer: count an attempt", "sale", sale.ID, "err", err)
	}
}

// DefaultInFlightWait is how long a purchase request waits for a slot
// unless Config.InFlightWait says otherwise: long enough to ride out a
// slot that frees within a record write, short enough that a shed shopper
// hears so at once.
const DefaultInFlightWait = 25 * time.Millisecond

// DefaultReservationWait is how long confirm, cancel and reading a
// reservation wait for one of their slots unless Config.InFlightWait is
// longer or below zero: a second, what Retry-After would tell them to
// wait anyway. They are at most a few requests per unit sold, each a
// shopper who won (most of them paying), and they wait in a line of their
// own, so the crowd's reserves, shed after 25 ms, cannot fill it; a
// payment is served as soon as a slot frees instead of told to come back.
const DefaultReservationWait = time.Second

// reservationLine is how many confirms, cancels and reads of a reservation
// may wait for a slot, per slot of theirs: about a quarter of a second of
// them at the rush's 10-20 ms a confirm, well within their wait. A line
// only as long as the slots (32 by default) drains in 40 ms, and in one
// rehearsal of three it still turned away 52 confirms that its second's
// wait would have served.
const reservationLine = 16

// purchaseConns is how many connections the purchase path reaches the
// record through: the PostgreSQL pool, or SQLite's writer and readers.
func (e *Engine) purchaseConns() int {
	switch {
	case e.Config.DatabaseURL == "":
		return 1 + sqlite.DefaultReadConns
	case e.Config.DatabaseMaxConns > 0:
		return int(e.Config.DatabaseMaxConns)
	}
	return postgres.DefaultMaxConns
}

// openInFlight sizes the purchase path's bulkhead from the configuration:
// by default twice its connections, so that every connection has a request
// ready for it and no more than one more waits.
func (e *Engine) openInFlight() {
	cfg := e.Config
	if cfg.MaxInFlight < 0 {
		return
	}
	limit := cfg.MaxInFlight
	if limit == 0 {
		limit = 2 * e.purchaseConns()
	}
	wait := cfg.InFlightWait
	if wait == 0 {
		wait = DefaultInFlightWait
	}
	share := cfg.SaleMaxInFlight
	if share <= 0 {
		share = max(limit/2, 1)
	}
	// The routes that name a reservation share half a sale's budget, so
	// that a big sale's reserves and its shoppers' confirms together leave
	// a quarter of the slots (by default) to every other sale; they wait
	// longer than the reserves, in a line of their own.
	reservationShare := max(share/2, 1)
	reservationWait := max(wait, DefaultReservationWait)
	if wait < 0 {
		reservationWait = wait
	}
	e.InFlight = bulkhead.New(bulkhead.Config{Max: limit, PerKey: share, Wait: wait,
		Shares: map[string]int{httpapi.ReservationRoutes: reservationShare},
		Patient: map[string]bulkhead.Patience{httpapi.ReservationRoutes: {Wait: reservationWait,
			MaxWaiting: reservationLine * reservationShare}}})
	sized := e.InFlight.Config()
	e.Metrics.PurchaseInFlight(e.InFlight.InFlight, sized.Max, sized.PerKey)
}

// How an account waits for its turn on the purchase path: each account
// has one request in flight per sale (and one on its reservations); up to
// accountLine more wait, for at most AccountTurnWait, and the rest are told
// 429 rate_limited at once. A shopper's page sends one request at a time
// (its retries reuse their Idempotency-Key, and concurrent copies of one
// request share one turn), so only a burst waits; half a second rides out
// a reserve or a confirm under load, a short line bounds what a burst
// parks.
const (
	AccountTurnWait = 500 * time.Millisecond
	accountLine     = 2
	// accountWaiting bounds the requests waiting for their account's turn
	// at once, over all accounts: each is a parked goroutine and a timer.
	accountWaiting = 10_000
)

// openAccountInFlight sizes the per-account bound on the purchase path
// (see AccountTurnWait). It has no bound over all accounts: that is
// InFlight's. It is this process's, like InFlight: with N servers behind a
// load balancer, an account has at most N requests in flight, while the
// gate's per-user check and the reserve budgets stay global.
func (e *Engine) openAccountInFlight() {
	e.AccountInFlight = bulkhead.New(bulkhead.Config{Max: math.MaxInt32, PerKey: 1, Wait: AccountTurnWait,
		MaxWaiting: accountWaiting, KeyWaiting: accountLine})
}
