package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
)

// Retirer forgets what the gate and the waiting room's queue keep for
// sales that are over: a sale closed for at least After, with no hold left
// pending in the record. Without it every sale ever run would stay there:
// a big sale's ten thousand holds, buyers, idempotency keys and spent
// admissions in the gate, and two million places in the queue, in the
// server's memory or in Redis, for as long as either lives.
//
// Nothing needs that state once the sale is over. A closed sale takes no
// ticket and no reserve; its holds have all ended in the record, so
// nothing is left to confirm, cancel or restock; and a shopper who repeats
// a reserve with the same Idempotency-Key gets the first answer from the
// record (see purchase.Service.Reserve). The queue keeps the sale's
// suspects, for the review after the sale. Dropping is idempotent, so
// every origin may retire the same sale, and a sale reopened after it
// (its closesAt moved) finds no counter and fails closed until an operator
// rebuilds it.
type Retirer struct {
	svc      *Service
	queue    Forgetter
	after    time.Duration
	interval time.Duration
	loop     loop.Loop

	mu      sync.Mutex
	retired map[string]bool
}

// Forgetter is the waiting room's queue as the Retirer uses it
// (waitroom.Queue).
type Forgetter interface {
	Forget(ctx context.Context, saleID string) error
}

// RetirerConfig configures a Retirer.
type RetirerConfig struct {
	// Queue, when set, forgets the sale's places too.
	Queue Forgetter
	// After is how long a sale stays closed before its state leaves the
	// gate and the queue (default DefaultRetireAfter).
	After time.Duration
	// Interval between rounds (default 1 minute).
	Interval time.Duration
}

// DefaultRetireAfter is how long after it closes a sale's state leaves
// the gate and the queue, unless configured: a day for the operator to
// look at the live figures that go with it (the counter, the queue's
// length), short enough that a shop running a sale a day keeps one or
// two.
const DefaultRetireAfter = 24 * time.Hour

// NewRetirer returns a Retirer for the service's sales.
func NewRetirer(svc *Service, cfg RetirerConfig) *Retirer {
	if cfg.After <= 0 {
		cfg.After = DefaultRetireAfter
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	return &Retirer{svc: svc, queue: cfg.Queue, after: cfg.After, interval: cfg.Interval, retired: make(map[string]bool)}
}

// Start runs the retirer in the background.
func (r *Retirer) Start(ctx context.Context) {
	r.loop.Start(ctx, r.interval, "retirer", r.svc.logger, func(ctx context.Context) error {
		_, err := r.RetireOnce(ctx)
		return err
	})
}

// Stop stops the retirer and waits for its round.
func (r *Retirer) Stop() { r.loop.Stop() }

// RetireOnce does one round over the record's sales and returns the IDs
// of the sales it retired.
func (r *Retirer) RetireOnce(ctx context.Context) ([]string, error) {
	sales, err := r.svc.store.Sales(ctx)
	if err != nil {
		return nil, err
	}
	now := r.svc.now()
	var done []string
	var errs []error
	for _, sale := range sales {
		if r.isRetired(sale.ID) || sale.StateAt(now) != flashsale.SaleClosed || now.Before(closedAt(sale).Add(r.after)) {
			continue
		}
		totals, err := r.svc.store.SaleTotals(ctx, sale.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("totals %s: %w", sale.SKU, err))
			continue
		}
		if totals.Pending > 0 {
			// The sweeper ends them when they expire.
			continue
		}
		if err := r.svc.gate.Drop(ctx, sale.ID); err != nil {
			errs = append(errs, fmt.Errorf("drop %s: %w", sale.SKU, err))
			continue
		}
		if r.queue != nil {
			if err := r.queue.Forget(ctx, sale.ID); err != nil {
				errs = append(errs, fmt.Errorf("forget the queue of %s: %w", sale.SKU, err))
				continue
			}
		}
		r.mu.Lock()
		r.retired[sale.ID] = true
		r.mu.Unlock()
		done = append(done, sale.ID)
		// Its per-sale series leave the metrics with it.
		r.svc.metrics.ForgetSale(sale.SKU)
		r.svc.logger.Info("retired a closed sale: the gate and the queue forgot it", "sku", sale.SKU, "sale", sale.ID)
	}
	return done, errors.Join(errs...)
}

func (r *Retirer) isRetired(saleID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retired[saleID]
}

// closedAt is when a closed sale closed: its closesAt, or, for a sale
// whose state says closed, its last change if that came first.
func closedAt(s *flashsale.Sale) time.Time {
	switch {
	case s.State != flashsale.SaleClosed:
		return s.ClosesAt
	case !s.ClosesAt.IsZero() && s.ClosesAt.Before(s.UpdatedAt):
		return s.ClosesAt
	default:
		return s.UpdatedAt
	}
}
