package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
)

// Drawer runs the draws of random and lottery sales at the origin: when a
// random sale opens, everyone who took a ticket before is shuffled; when a
// lottery's registration closes, the registrants are. It seals the
// entrants, orders them by the published algorithm with the seed committed
// at creation, and records the outcome — once, however many origins try —
// which reveals the seed. Safe for concurrent use.
type Drawer struct {
	cfg  DrawerConfig
	loop loop.Loop
}

// DrawerConfig configures a Drawer. All but Now, Interval, Logger and
// OnDraw are required.
type DrawerConfig struct {
	Queue Queue
	Store interface {
		Draw(ctx context.Context, saleID string) (*flashsale.Draw, error)
		SaveDraw(ctx context.Context, d *flashsale.Draw) (bool, error)
	}
	Sales interface {
		Active(ctx context.Context) ([]*flashsale.Sale, error)
	}
	Now func() time.Time
	// Interval is how often sales are checked (default 250ms): a draw runs
	// at most this long after it is due.
	Interval time.Duration
	// OnDraw is told of each draw this server recorded.
	OnDraw func(sale *flashsale.Sale)
	Logger *slog.Logger
}

// LotteryWinners is how many a lottery draws: twice the units, so that
// winners who do not buy leave room for others without admitting the
// whole crowd; all registrants when there are fewer. It is published with
// the sale's policy.
func LotteryWinners(sale *flashsale.Sale, entrants int) int {
	return min(entrants, 2*sale.InitialStock)
}

// DrawAt is when a sale's draw runs: a lottery's registration close, a
// random sale's open; zero for fifo.
func DrawAt(sale *flashsale.Sale) time.Time {
	switch sale.Fairness {
	case flashsale.FairnessRandom:
		return sale.OpensAt
	case flashsale.FairnessLottery:
		return sale.RegistrationClosesAt
	}
	return time.Time{}
}

// NewDrawer returns a Drawer.
func NewDrawer(cfg DrawerConfig) *Drawer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Drawer{cfg: cfg}
}

// Start runs DrawDue every Interval until Stop.
func (d *Drawer) Start(ctx context.Context) {
	d.loop.Start(ctx, d.cfg.Interval, "drawer", d.cfg.Logger, d.DrawDue)
}

// Stop stops the drawer and waits for its round.
func (d *Drawer) Stop() { d.loop.Stop() }

// DrawDue runs every draw that is due and has not run.
func (d *Drawer) DrawDue(ctx context.Context) error {
	sales, err := d.cfg.Sales.Active(ctx)
	if err != nil {
		return err
	}
	now := d.cfg.Now()
	var errs []error
	for _, sale := range sales {
		at := DrawAt(sale)
		if at.IsZero() || now.Before(at) {
			continue
		}
		if _, err := d.Run(ctx, sale); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sale.SKU, err))
		}
	}
	return errors.Join(errs...)
}

// Run draws the sale now if it has not been drawn, and returns the
// recorded draw either way.
func (d *Drawer) Run(ctx context.Context, sale *flashsale.Sale) (*flashsale.Draw, error) {
	rec, err := d.cfg.Store.Draw(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	if !rec.DrawnAt.IsZero() {
		return rec, nil
	}
	if _, err := d.cfg.Queue.Seal(ctx, sale.ID); err != nil {
		return nil, err
	}
	users, err := d.cfg.Queue.Entrants(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	pseudonyms := make([]string, len(users))
	for i, u := range users {
		pseudonyms[i] = Pseudonym(sale.ID, u)
	}
	now := d.cfg.Now().UTC()
	doc := &DrawDocument{
		SKU: sale.SKU, SaleID: sale.ID, Fairness: string(sale.Fairness), Algorithm: DrawAlgorithm,
		SeedCommitment: sale.SeedCommitment, Seed: fmt.Sprintf("%x", rec.Seed), DrawnAt: now,
		Order: Order(rec.Seed, pseudonyms),
	}
	if sale.Fairness == flashsale.FairnessLottery {
		doc.Winners = LotteryWinners(sale, len(users))
	}
	blob, err := EncodeDrawDocument(doc)
	if err != nil {
		return nil, err
	}
	rec.DrawnAt, rec.Entrants, rec.Winners, rec.Document = now, len(users), doc.Winners, blob
	saved, err := d.cfg.Store.SaveDraw(ctx, rec)
	if err != nil {
		return nil, err
	}
	if !saved {
		// Another origin drew first; its draw is the one.
		return d.cfg.Store.Draw(ctx, sale.ID)
	}
	d.cfg.Logger.Info("draw recorded", "sku", sale.SKU, "fairness", sale.Fairness, "entrants", len(users),
		"winners", doc.Winners, "seedCommitment", sale.SeedCommitment)
	if d.cfg.OnDraw != nil {
		d.cfg.OnDraw(sale)
	}
	return rec, nil
}
