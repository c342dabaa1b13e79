// Package control is the operator's hand on a sale: create, change, pause,
// resume and rebuild it, and load (warm) its counter into the gate before it
// opens. Every pause says why, and a rebuild recomputes the gate only from
// the record, only while the sale is paused.
//
// Overselling could be caused here by a rebuild, which sets the gate's
// counter: so a counter is rebuilt only from the record (initial − confirmed
// − pending), only while the sale is paused, under a new epoch, and resumed
// by an operator. Order cancels and refunds give units back through package
// restock. Overselling is prevented in the gate, not here.
package control

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/catalog"
	"github.com/flashsale/flashsale/internal/loop"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/restock"
	"github.com/flashsale/flashsale/waitroom"
)

// Service carries out operator actions. Safe for concurrent use.
type Service struct {
	store   flashsale.Store
	gate    flashsale.GateAdmin
	restock *restock.Service
	catalog *catalog.Catalog
	now     func() time.Time
	source  string
	logger  *slog.Logger
	metrics *metrics.Metrics

	pausing singleflight.Group
	probing singleflight.Group
}

// Config configures a Service. Store, Gate, Restock and Catalog are
// required.
type Config struct {
	Store flashsale.Store
	Gate  flashsale.GateAdmin
	// Restock gives back the units of cancelled and refunded orders.
	Restock *restock.Service
	Catalog *catalog.Catalog
	Now     func() time.Time
	// Source names this server in the gate's audit log.
	Source  string
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Source == "" {
		cfg.Source = "flashsale"
	}
	return &Service{store: cfg.Store, gate: cfg.Gate, restock: cfg.Restock, catalog: cfg.Catalog, now: cfg.Now,
		source: cfg.Source, logger: cfg.Logger, metrics: cfg.Metrics}
}

// Create validates and records a new sale. A sale whose opensAt is already
// past opens at once, so its counter is loaded now; otherwise the Warmer
// loads it before it opens.
func (s *Service) Create(ctx context.Context, in *flashsale.Sale) (*flashsale.Sale, error) {
	sale := *in
	sale.ApplyDefaults()
	if err := sale.Validate(); err != nil {
		return nil, err
	}
	now := s.now()
	sale.ID = flashsale.NewID("sale_")
	sale.OpensAt = sale.OpensAt.UTC()
	sale.State = flashsale.SaleScheduled
	if !now.Before(sale.OpensAt) {
		sale.State = flashsale.SaleOpen
	}
	sale.Epoch = 1
	sale.Version = 1
	sale.CreatedAt, sale.UpdatedAt = now, now
	if sale.Fairness != flashsale.FairnessFIFO {
		// The draw's seed is fixed now, before anyone enters, and only its
		// commitment is published until the draw reveals it.
		sale.DrawSeed = make([]byte, 32)
		if _, err := rand.Read(sale.DrawSeed); err != nil {
			return nil, err
		}
		sale.SeedCommitment = waitroom.SeedCommitment(sale.DrawSeed)
	}
	if err := s.store.CreateSale(ctx, &sale); err != nil {
		return nil, err
	}
	sale.DrawSeed = nil // kept by the record alone until the draw
	s.catalog.Put(&sale)
	if sale.State == flashsale.SaleOpen {
		if err := s.load(ctx, &sale); err != nil {
			// The warmer retries; until then reserve fails closed.
			s.logger.Error("control: load the counter of a new sale", "sku", sale.SKU, "err", err)
		}
	}
	s.logger.Info("sale created", "sku", sale.SKU, "sale", sale.ID, "stock", sale.InitialStock, "opensAt", sale.OpensAt)
	return &sale, nil
}

// Patch is a change to a sale; nil fields stay as they are.
type Patch struct {
	Name                 *string
	ClosesAt             *time.Time
	AdmissionPerSecond   *int
	HoldSeconds          *int
	PerUserLimit         *int
	MinAccountAgeSeconds *int
	ChallengeBits        *int
	InitialStock         *int
	RequireInstrument    *bool
	// NotifiedAdmissionSeconds, when set, changes how long an admission
	// lasts from a notified turn (0 stops notifying).
	NotifiedAdmissionSeconds *int
	// Display, when set, replaces the sale's display as a whole (an
	// empty one clears it).
	Display *flashsale.Display
}

// Update applies p to the SKU's sale if its version is still version. It
// returns flashsale.ErrVersionConflict if the sale moved since it was read,
// and refuses InitialStock once the sale has opened.
func (s *Service) Update(ctx context.Context, sku string, version int64, p Patch) (*flashsale.Sale, error) {
	cur, err := s.store.SaleBySKU(ctx, sku)
	if err != nil {
		return nil, err
	}
	if cur.Version != version {
		return nil, flashsale.ErrVersionConflict
	}
	sale := *cur
	now := s.now()
	if p.Name != nil {
		sale.Name = *p.Name
	}
	if p.ClosesAt != nil {
		sale.ClosesAt = p.ClosesAt.UTC()
	}
	if p.AdmissionPerSecond != nil {
		sale.AdmissionPerSecond = *p.AdmissionPerSecond
	}
	if p.HoldSeconds != nil {
		sale.HoldSeconds = *p.HoldSeconds
	}
	if p.PerUserLimit != nil {
		sale.PerUserLimit = *p.PerUserLimit
	}
	if p.MinAccountAgeSeconds != nil {
		sale.MinAccountAgeSeconds = *p.MinAccountAgeSeconds
	}
	if p.ChallengeBits != nil {
		sale.ChallengeBits = *p.ChallengeBits
	}
	if p.RequireInstrument != nil {
		sale.RequireInstrument = *p.RequireInstrument
	}
	if p.Display != nil {
		sale.Display = *p.Display
	}
	if p.NotifiedAdmissionSeconds != nil {
		sale.NotifiedAdmissionSeconds = *p.NotifiedAdmissionSeconds
	}
	stockChanged := p.InitialStock != nil && *p.InitialStock != sale.InitialStock
	if stockChanged {
		if !now.Before(sale.OpensAt) {
			return nil, flashsale.Errorf(flashsale.CodeInvalidState, "initialStock can change only before the sale opens")
		}
		sale.InitialStock = *p.InitialStock
	}
	if err := sale.Validate(); err != nil {
		return nil, err
	}
	if err := s.store.UpdateSale(ctx, &sale, version); err != nil {
		return nil, err
	}
	s.catalog.Put(&sale)
	if stockChanged {
		// The counter may have been loaded early (warm); nothing was sold
		// yet, so it is reloaded with the new stock.
		if err := s.gate.Drop(ctx, sale.ID); err != nil {
			s.logger.Error("control: drop the counter after a stock change", "sku", sku, "err", err)
		}
	}
	return &sale, nil
}

// Pause pauses the SKU's sale with a reason. Pausing a paused sale keeps
// its first reason.
func (s *Service) Pause(ctx context.Context, sku, reason string) (*flashsale.Sale, error) {
	sale, err := s.store.SaleBySKU(ctx, sku)
	if err != nil {
		return nil, err
	}
	return s.pause(ctx, sale, reason)
}

// FailClosed pauses the sale because the gate could not be asked, or the
// invariant failed. Concurrent calls for one sale make one pause. It is
// meant to be called from the request path: it returns once the pause is
// recorded (or could not be).
func (s *Service) FailClosed(ctx context.Context, saleID, reason string) {
	_, _, _ = s.pausing.Do(saleID, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		sale, err := s.store.Sale(ctx, saleID)
		if err != nil {
			s.logger.Error("control: fail closed: read the sale", "sale", saleID, "reason", reason, "err", err)
			return nil, err
		}
		if _, err := s.pause(ctx, sale, reason); err != nil {
			s.logger.Error("control: fail closed: pause", "sale", saleID, "reason", reason, "err", err)
			return nil, err
		}
		return nil, nil
	})
}

// GateFailed is told that a gate call for the sale failed. One slow call
// does not make an outage: the gate is probed, and only if the probe fails
// too is the sale paused (fail closed). Concurrent calls for one sale share
// one probe. It waits for the verdict at most ProbeWait, so the request
// that saw the failure is answered within a second either way; the probe
// and the pause finish in the background.
func (s *Service) GateFailed(ctx context.Context, saleID string, cause error) {
	ch := s.probing.DoChan(saleID, func() (any, error) {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ProbeTimeout)
		err := s.gate.Ping(pctx)
		cancel()
		if err == nil {
			s.logger.Warn("control: a gate call failed but the gate answers a probe; the sale stays open",
				"sale", saleID, "cause", cause)
			return nil, nil
		}
		s.FailClosed(ctx, saleID, flashsale.PauseGateUnreachable)
		return nil, err
	})
	t := time.NewTimer(ProbeWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// ProbeTimeout bounds the probe of a gate that failed a call; ProbeWait
// is how long the failing request waits for the probe's verdict.
const (
	ProbeTimeout = time.Second
	ProbeWait    = 300 * time.Millisecond
)

func (s *Service) pause(ctx context.Context, sale *flashsale.Sale, reason string) (*flashsale.Sale, error) {
	if sale.State == flashsale.SalePaused {
		return sale, nil
	}
	// The record first: it is what every server reads. Then the gate, so
	// that reserves in flight on other servers stop at once; if the gate
	// is unreachable it is not selling anyway.
	paused, err := s.store.SetSaleState(ctx, sale.ID, flashsale.SalePaused, reason, s.now())
	if err != nil {
		return nil, err
	}
	s.catalog.Put(paused)
	if err := s.gate.SetPaused(ctx, sale.ID, true, s.source); err != nil {
		s.logger.Warn("control: the gate did not take the pause (the record did)", "sku", sale.SKU, "err", err)
	}
	s.metrics.SalePaused(sale.SKU, PauseCause(reason))
	s.logger.Warn("sale paused", "sku", sale.SKU, "sale", sale.ID, "reason", reason)
	return paused, nil
}

// ChangeOrder moves an order for an operator (actor names them): one
// conditional UPDATE on the order's id and version, with its audit row and
// its event in the same transaction (see flashsale.OrderStore.ChangeOrder).
// Cancelling or refunding gives the order's units back through the same
// exactly-once restock as an expired hold (restock.Service.ChangeOrder):
// the record decides, in that transaction, by moving the reservation from
// confirmed to cancelled with restocked_at set, and only if that took the
// row is the gate restocked. A restock cut off between the two steps (the
// gate did not answer, the process died) is finished by the sweeper's
// reconciler, which restocks any hold the gate keeps whose reservation is
// no longer live.
//
// Errors: flashsale.ErrNotFound, flashsale.ErrVersionConflict (the order
// moved since version), CodeInvalidState (its state forbids the move),
// CodeBadRequest.
func (s *Service) ChangeOrder(ctx context.Context, id string, version int64, to flashsale.OrderState, actor, reason string) (*flashsale.Order, error) {
	o, restocked, err := s.restock.ChangeOrder(ctx, flashsale.OrderChange{
		OrderID: id, Version: version, To: to, Actor: actor, Reason: reason, At: s.now()})
	if err != nil {
		return nil, err
	}
	if to.Restocks() {
		s.logger.Info("order "+string(to), "order", o.ID, "sku", o.SKU, "actor", actor, "version", o.Version, "restocked", restocked)
	}
	return o, nil
}

// ErrRebuildRequired: the gate has no counter for a sale that has taken
// holds, so it must be rebuilt from the record before it sells again.
var ErrRebuildRequired = &flashsale.Error{Code: "rebuild_required",
	Message: "The stock gate lost this sale's counter; rebuild it from the record before resuming."}

// Resume reopens a paused sale. It is the operator's deliberate act after a
// pause: the gate must hold a counter (loaded, or rebuilt from the record).
func (s *Service) Resume(ctx context.Context, sku string) (*flashsale.Sale, error) {
	sale, err := s.store.SaleBySKU(ctx, sku)
	if err != nil {
		return nil, err
	}
	if sale.State != flashsale.SalePaused {
		return sale, nil
	}
	snap, err := s.gate.Snapshot(ctx, sale.ID)
	if err != nil {
		return nil, gateUnavailable(err)
	}
	switch {
	case !snap.Loaded:
		if err := s.load(ctx, sale); err != nil {
			return nil, err
		}
	case snap.Unloaded > 0:
		return nil, &flashsale.Error{Code: ErrRebuildRequired.Code, Message: fmt.Sprintf(
			"%d of the sale's %d shards lost their counters; rebuild the sale from the record before resuming.",
			snap.Unloaded, snap.Shards)}
	case snap.Drift() != 0 || snap.ShardDrift != 0 || snap.Counter != snap.AuditedCounter:
		// Something wrote to the counter behind the gate; resuming would
		// sell on a number nobody can vouch for.
		return nil, &flashsale.Error{Code: ErrRebuildRequired.Code, Message: fmt.Sprintf(
			"The counter disagrees with the gate's own bookkeeping by %d units; rebuild it from the record before resuming.",
			snap.Drift())}
	}
	if err := s.gate.SetPaused(ctx, sale.ID, false, s.source); err != nil {
		return nil, gateUnavailable(err)
	}
	state := flashsale.SaleOpen
	if s.now().Before(sale.OpensAt) {
		state = flashsale.SaleScheduled
	}
	resumed, err := s.store.SetSaleState(ctx, sale.ID, state, "", s.now())
	if err != nil {
		return nil, err
	}
	s.catalog.Put(resumed)
	s.metrics.SalePaused(sale.SKU, "")
	s.logger.Info("sale resumed", "sku", sku, "sale", sale.ID)
	return resumed, nil
}

// Rebuild recomputes the gate of a paused sale from the record: counter =
// initial − confirmed − pending, the buyers and idempotency keys of the live
// holds, the admissions every hold spent (so that a rebuild hands out no
// turn), and a new epoch that invalidates every admission token issued
// before (the waiting room hands the same place the same admission id
// again, under the new epoch). It answers CodeNotPaused unless the sale is paused, and leaves the
// sale paused: resuming is a separate, deliberate act.
func (s *Service) Rebuild(ctx context.Context, sku string) (*flashsale.Sale, error) {
	sale, err := s.store.SaleBySKU(ctx, sku)
	if err != nil {
		return nil, err
	}
	if sale.State != flashsale.SalePaused {
		return nil, flashsale.Errorf(flashsale.CodeNotPaused, "Pause the sale before rebuilding its counter.")
	}
	epoch, holds, err := s.store.BeginRebuild(ctx, sale.ID, s.now())
	if err != nil {
		return nil, err
	}
	spent, err := s.store.SpentAdmissions(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	if err := s.gate.Rebuild(ctx, sale.ID, int64(sale.InitialStock), epoch, holds, spent, s.source+" rebuild"); err != nil {
		return nil, gateUnavailable(err)
	}
	rebuilt, err := s.store.Sale(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	s.catalog.Put(rebuilt)
	var held int
	for _, h := range holds {
		held += h.Quantity
	}
	s.logger.Warn("sale rebuilt from the record", "sku", sku, "sale", sale.ID, "epoch", epoch,
		"holds", len(holds), "counter", sale.InitialStock-held)
	return rebuilt, nil
}

// shardGate is what RebuildShards needs of a gate that splits sales over
// shards (redis.ShardedGate).
type shardGate interface {
	RebuildShards(ctx context.Context, saleID string, shards []int, initial, epoch int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission, source string) error
	ResumeShards(ctx context.Context, saleID string, shards []int, source string) error
}

// RebuildShards rebuilds the lost shards of an open sale from the record
// (see redis.ShardedGate.RebuildShards) while its other shards keep
// selling: a shard whose Redis master failed over may lack decrements its
// master acknowledged, so its counter is never trusted, only recomputed.
// It is what the rebalancer calls when it finds a shard lost; the
// shoppers of that shard are told to come back (503 sale_paused) until it
// is done.
//
// Like Rebuild, it starts a new epoch, which fences every reservation
// write in flight (those are voided and their shoppers retry), and reads
// the complete live holds. Unlike Rebuild it needs no pause and resumes
// the shards by itself, but only once the gate's sums check out: every
// shard loaded, every unit of the initial stock accounted for, no shard
// drifting. A rebuild that cannot be done, or does not check out, pauses
// the whole sale (fail closed) for the operator, whose Rebuild then
// recomputes every shard. It does nothing to a paused sale.
func (s *Service) RebuildShards(ctx context.Context, saleID string, lost []int) error {
	g, ok := s.gate.(shardGate)
	if !ok {
		return errors.New("control: the gate does not split sales over shards")
	}
	sale, err := s.store.Sale(ctx, saleID)
	if err != nil {
		return err
	}
	if sale.State == flashsale.SalePaused {
		return nil
	}
	epoch, holds, err := s.store.BeginRebuild(ctx, sale.ID, s.now())
	if err != nil {
		return err
	}
	spent, err := s.store.SpentAdmissions(ctx, sale.ID)
	if err != nil {
		return err
	}
	source := s.source + " shard rebuild"
	if err := g.RebuildShards(ctx, sale.ID, lost, int64(sale.InitialStock), epoch, holds, spent, source); err != nil {
		if flashsale.ErrorCode(err) != flashsale.CodeUnavailable {
			s.FailClosed(ctx, sale.ID, "lost shards of the stock gate could not be rebuilt from the record")
		}
		return fmt.Errorf("control: rebuild shards %v of %s: %w", lost, sale.SKU, err)
	}
	rebuilt, err := s.store.Sale(ctx, sale.ID)
	if err != nil {
		return err
	}
	s.catalog.Put(rebuilt)
	snap, err := s.gate.Snapshot(ctx, sale.ID)
	if err != nil {
		return gateUnavailable(err)
	}
	if snap.Unloaded != 0 || snap.Drift() != 0 || snap.ShardDrift != 0 || snap.Counter != snap.AuditedCounter ||
		snap.Initial != int64(sale.InitialStock) {
		s.FailClosed(ctx, sale.ID, "shards rebuilt from the record do not add up to the sale's stock")
		return fmt.Errorf("control: shards %v of %s rebuilt, but the gate reads %+v", lost, sale.SKU, snap)
	}
	if rebuilt.State == flashsale.SalePaused {
		// Paused meanwhile: the operator's resume lifts every shard.
		return nil
	}
	if err := g.ResumeShards(ctx, sale.ID, lost, source); err != nil {
		return gateUnavailable(err)
	}
	s.logger.Warn("lost shards rebuilt from the record; the sale kept selling on the others", "sku", sale.SKU,
		"sale", sale.ID, "shards", lost, "epoch", epoch, "holds", len(holds), "counter", snap.Counter, "inFlight", snap.InFlight)
	return nil
}

// load puts the sale's counter into the gate, but only where that cannot
// forget a hold: when the record has no reservation of the sale at all. A
// gate that lost the counter of a sale that has taken holds must be rebuilt
// from the record instead, with the sale paused.
func (s *Service) load(ctx context.Context, sale *flashsale.Sale) error {
	totals, err := s.store.SaleTotals(ctx, sale.ID)
	if err != nil {
		return err
	}
	if totals != (flashsale.SaleTotals{}) {
		return ErrRebuildRequired
	}
	loaded, err := s.gate.Load(ctx, sale.ID, int64(sale.InitialStock), sale.Epoch, s.source+" load")
	if err != nil {
		return gateUnavailable(err)
	}
	if !loaded {
		// Load leaves alone a counter it finds: one another server loaded
		// a moment ago, or one the gate keeps but does not trust (its
		// stock key gone, or written by a Redis master that has since
		// failed over), which only a rebuild may replace.
		snap, err := s.gate.Snapshot(ctx, sale.ID)
		if err != nil {
			return gateUnavailable(err)
		}
		if !snap.Loaded {
			return ErrRebuildRequired
		}
	}
	return nil
}

func gateUnavailable(err error) error {
	return &flashsale.Error{Code: flashsale.CodeUnavailable, Message: "The stock gate did not answer.",
		RetryAfter: time.Second, Err: err}
}

// Warmer loads each sale's counter into the gate before the sale opens (the
// design's "warm everything before the gate opens"), fails a sale closed
// when its open counter has gone missing from the gate, and announces each
// sale's opening (sale.opened) once the sale is open and warm. It runs
// until Stop.
type Warmer struct {
	svc      *Service
	lead     time.Duration
	interval time.Duration

	loop loop.Loop
	mu   sync.Mutex
	warm map[string]bool
	// opened lists the sales whose sale.opened this process has written
	// (or found written), so it writes each at most once.
	opened map[string]bool
}

// WarmerConfig configures a Warmer.
type WarmerConfig struct {
	// Lead is how long before opensAt the counter is loaded (default 1m).
	Lead time.Duration
	// Interval is how often sales are checked (default 1s).
	Interval time.Duration
}

// NewWarmer returns a Warmer for the service's sales.
func NewWarmer(svc *Service, cfg WarmerConfig) *Warmer {
	if cfg.Lead <= 0 {
		cfg.Lead = time.Minute
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	return &Warmer{svc: svc, lead: cfg.Lead, interval: cfg.Interval, warm: make(map[string]bool), opened: make(map[string]bool)}
}

// Start runs the warmer in the background.
func (w *Warmer) Start(ctx context.Context) {
	w.loop.Start(ctx, w.interval, "warmer", w.svc.logger, w.WarmOnce)
}

// Stop stops the warmer and waits for it.
func (w *Warmer) Stop() { w.loop.Stop() }

// Warm reports whether the sale's counter was in the gate at the last
// round.
func (w *Warmer) Warm(saleID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.warm[saleID]
}

// WarmOnce does one round over the active sales.
func (w *Warmer) WarmOnce(ctx context.Context) error {
	sales, err := w.svc.catalog.Active(ctx)
	if err != nil {
		return err
	}
	now := w.svc.now()
	var errs []error
	for _, sale := range sales {
		if now.Before(sale.OpensAt.Add(-w.lead)) {
			continue
		}
		snap, err := w.svc.gate.Snapshot(ctx, sale.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("snapshot %s: %w", sale.SKU, err))
			w.setWarm(sale.ID, false)
			if sale.State != flashsale.SalePaused && !now.Before(sale.OpensAt) {
				w.svc.FailClosed(ctx, sale.ID, flashsale.PauseGateUnreachable)
			}
			continue
		}
		if snap.Loaded {
			w.setWarm(sale.ID, true)
			if err := w.announce(ctx, sale, now); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		err = w.svc.load(ctx, sale)
		switch {
		case err == nil:
			w.setWarm(sale.ID, true)
			if err := w.announce(ctx, sale, now); err != nil {
				errs = append(errs, err)
			}
		case errors.Is(err, ErrRebuildRequired):
			w.setWarm(sale.ID, false)
			if sale.State != flashsale.SalePaused {
				w.svc.FailClosed(ctx, sale.ID, flashsale.PauseGateLost)
			}
		default:
			w.setWarm(sale.ID, false)
			errs = append(errs, fmt.Errorf("load %s: %w", sale.SKU, err))
		}
	}
	return errors.Join(errs...)
}

// announce writes the sale's sale.opened once it is open with its counter
// in the gate. Every server's warmer notices the opening; the event's id is
// the sale's, so the outbox keeps one. Each process writes it at most once,
// so the record sees one statement per sale per server, never one per
// request.
func (w *Warmer) announce(ctx context.Context, sale *flashsale.Sale, now time.Time) error {
	if sale.StateAt(now) != flashsale.SaleOpen {
		return nil
	}
	w.mu.Lock()
	done := w.opened[sale.ID]
	w.mu.Unlock()
	if done {
		return nil
	}
	if _, err := w.svc.store.AppendEvents(ctx, flashsale.SaleOpenedEvent(sale)); err != nil {
		return fmt.Errorf("announce the opening of %s: %w", sale.SKU, err)
	}
	w.mu.Lock()
	w.opened[sale.ID] = true
	w.mu.Unlock()
	return nil
}

func (w *Warmer) setWarm(saleID string, warm bool) {
	w.mu.Lock()
	w.warm[saleID] = warm
	w.mu.Unlock()
}
