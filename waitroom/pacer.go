package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
)

// Pacer decides how far each paced sale's queue is admitted, driven by
// what the purchase path absorbs rather than a number fixed in advance:
//
//   - additive increase, multiplicative decrease on the reserve path's
//     health: while reserves are fast and succeed, the rate climbs by a
//     tenth of the sale's ceiling (admissionPerSecond) each tick; when they
//     slow past TargetLatency or fail, it halves;
//   - inventory-aware: shoppers holding an admission they have not used
//     yet ("outstanding": admissions collected in the last AdmissionTTL
//     minus reserves decided in it) may not exceed Overbook times the units
//     left, so no one waits half an hour for stock gone twenty minutes
//     earlier; shoppers past that are told their odds instead;
//   - abandoned places do not stall the queue: a place whose shopper stopped
//     polling never collects its admission, so it never counts as
//     outstanding, and one collected but not used lapses after
//     AdmissionTTL.
//
// With several origins sharing a Redis queue, one of them paces each sale
// at a time (a lease in the queue store). Safe for concurrent use.
type Pacer struct {
	cfg PacerConfig

	mu    sync.Mutex
	sales map[string]*pace
	loop  loop.Loop
}

// PacerConfig configures a Pacer. Queue, Gate and Sales are required.
type PacerConfig struct {
	Queue Queue
	Gate  interface {
		Snapshot(ctx context.Context, saleID string) (flashsale.GateSnapshot, error)
	}
	Sales interface {
		Active(ctx context.Context) ([]*flashsale.Sale, error)
	}
	Now func() time.Time
	// Holder names this server for the pacing lease.
	Holder string
	// Tick is how often the pacer admits (default 250ms).
	Tick time.Duration
	// TargetLatency is the reserve latency above which the purchase path
	// counts as struggling (default 250ms); MaxErrorRate the share of
	// failed reserves (default 2%).
	TargetLatency time.Duration
	MaxErrorRate  float64
	// Overbook is how many outstanding admissions per unit left are
	// allowed (default 2).
	Overbook float64
	// AdmissionTTL is how long an admission lives (default 120s).
	AdmissionTTL time.Duration
	Logger       *slog.Logger
}

// pace is one sale's pacing state.
type pace struct {
	rate    float64
	carry   float64
	last    time.Time
	samples []sample // claims and attempts over the last AdmissionTTL
	obs     observations
	// For the operator: what the last tick decided.
	outstanding int64
	capacity    int64
	healthy     bool
}

type sample struct {
	at               time.Time
	claims, attempts int64
}

type observations struct {
	n, failed int
	latency   time.Duration
}

// NewPacer returns a Pacer.
func NewPacer(cfg PacerConfig) *Pacer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 250 * time.Millisecond
	}
	if cfg.TargetLatency <= 0 {
		cfg.TargetLatency = 250 * time.Millisecond
	}
	if cfg.MaxErrorRate <= 0 {
		cfg.MaxErrorRate = 0.02
	}
	if cfg.Overbook <= 0 {
		cfg.Overbook = 2
	}
	if cfg.AdmissionTTL <= 0 {
		cfg.AdmissionTTL = 120 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pacer{cfg: cfg, sales: map[string]*pace{}}
}

func (p *Pacer) state(saleID string) *pace {
	s, ok := p.sales[saleID]
	if !ok {
		s = &pace{healthy: true}
		p.sales[saleID] = s
	}
	return s
}

// Observe records one reserve decided for the sale: how long it took and
// whether it failed (the gate or the record did not answer). The purchase
// path calls it; it is cheap.
func (p *Pacer) Observe(saleID string, latency time.Duration, failed bool) {
	p.mu.Lock()
	s := p.state(saleID)
	s.obs.n++
	s.obs.latency += latency
	if failed {
		s.obs.failed++
	}
	p.mu.Unlock()
}

// PaceState is what the pacer last decided for a sale, at its last tick
// At (zero before the first).
type PaceState struct {
	Rate        float64
	Outstanding int64
	Capacity    int64
	Healthy     bool
	At          time.Time
}

// State returns the pacer's last decision for the sale.
func (p *Pacer) State(saleID string) (PaceState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sales[saleID]
	if !ok {
		return PaceState{}, false
	}
	return PaceState{Rate: s.rate, Outstanding: s.outstanding, Capacity: s.capacity, Healthy: s.healthy, At: s.last}, true
}

// Start runs TickOnce every Tick until Stop.
func (p *Pacer) Start(ctx context.Context) {
	p.loop.Start(ctx, p.cfg.Tick, "pacer", p.cfg.Logger, p.TickOnce)
}

// Stop stops the pacer and waits for its tick.
func (p *Pacer) Stop() { p.loop.Stop() }

// TickOnce admits, for every open paced sale this server leads, what the
// controller and the stock allow since the last tick.
func (p *Pacer) TickOnce(ctx context.Context) error {
	sales, err := p.cfg.Sales.Active(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, sale := range sales {
		if sale.AdmissionPerSecond <= 0 || sale.StateAt(p.cfg.Now()) != flashsale.SaleOpen {
			continue
		}
		lead, err := p.cfg.Queue.Lead(ctx, "pacer:"+sale.ID, p.cfg.Holder, 4*p.cfg.Tick+time.Second)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !lead {
			continue
		}
		if err := p.tick(ctx, sale); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sale.SKU, err))
		}
	}
	return errors.Join(errs...)
}

// paceFloor is the slowest the pacer admits when the purchase path
// struggles: a fiftieth of the sale's rate, at least one a second.
func paceFloor(ceiling float64) float64 { return math.Max(1, ceiling/50) }

func (p *Pacer) tick(ctx context.Context, sale *flashsale.Sale) error {
	now := p.cfg.Now()
	q := p.cfg.Queue
	claims, err := q.Counter(ctx, sale.ID, CounterClaims)
	if err != nil {
		return err
	}
	attempts, err := q.Counter(ctx, sale.ID, CounterAttempts)
	if err != nil {
		return err
	}
	g, err := p.cfg.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		return err
	}
	admitted, err := q.Admitted(ctx, sale.ID)
	if err != nil {
		return err
	}
	issued, err := q.Len(ctx, sale.ID)
	if err != nil {
		return err
	}

	p.mu.Lock()
	s := p.state(sale.ID)
	ceiling := float64(sale.AdmissionPerSecond)
	floor := paceFloor(ceiling)
	dt := 0.0
	if s.last.IsZero() {
		// Start at half the ceiling: fast enough to fill the first holds,
		// with room to find out what the path absorbs.
		s.rate = ceiling / 2
		// The first tick admits one second's worth.
		dt = 1
	} else {
		// At most a second's worth: after a pause (or a lost lease, or a
		// stalled loop) the time the pacer did not tick is not owed to
		// the queue, which would otherwise be let in all at once.
		dt = math.Min(1, now.Sub(s.last).Seconds())
	}
	s.last = now
	o := s.obs
	s.obs = observations{}
	s.healthy = o.n == 0 || (o.latency/time.Duration(o.n) <= p.cfg.TargetLatency &&
		float64(o.failed)/float64(o.n) <= p.cfg.MaxErrorRate)
	if s.healthy {
		s.rate = math.Min(ceiling, s.rate+ceiling/10)
	} else {
		s.rate = math.Max(floor, s.rate/2)
	}

	// Outstanding admissions over the last AdmissionTTL.
	s.samples = append(s.samples, sample{at: now, claims: claims, attempts: attempts})
	cut := 0
	for cut < len(s.samples)-1 && now.Sub(s.samples[cut+1].at) >= p.cfg.AdmissionTTL {
		cut++
	}
	s.samples = s.samples[cut:]
	base := s.samples[0]
	s.outstanding = max(0, (claims-base.claims)-(attempts-base.attempts))
	s.capacity = 0
	if g.Loaded && g.Counter > 0 {
		s.capacity = max(0, int64(math.Ceil(p.cfg.Overbook*float64(g.Counter)))-s.outstanding)
	}

	want := s.rate*dt + s.carry
	admit := math.Min(want, float64(s.capacity))
	n := int64(admit)
	if want <= float64(s.capacity) {
		s.carry = want - float64(n)
	} else {
		s.carry = 0 // held back by the stock: do not bank the difference
	}
	p.mu.Unlock()

	upTo := min(admitted+n, issued)
	if upTo <= admitted {
		return nil
	}
	_, err = q.Admit(ctx, sale.ID, upTo)
	return err
}
