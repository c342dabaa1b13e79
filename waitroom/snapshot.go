package waitroom

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/tally"
)

// Everyone is the AdmittedUpTo of a sale that paces no one: every place
// is admitted as soon as the sale opens.
const Everyone = math.MaxInt64

// Snapshot is all the waiting room needs to answer a sale's tickets and
// polls: the published sale, its live figures and how far its queue is
// admitted. The origin builds one per sale at most every SnapshotTTL; an
// edge fetches them all from the origin at least every 250ms. No poll
// touches the gate or the record.
type Snapshot struct {
	Sale SaleInfo `json:"sale"`
	// Loaded is false when the gate has no counter for the sale.
	Loaded  bool  `json:"loaded"`
	Counter int64 `json:"counter"`
	// Pending is the units held by reservations that may still expire;
	// read only once the counter is gone (it says whether sold out is
	// final).
	Pending int64 `json:"pending"`
	Epoch   int64 `json:"epoch"`
	// Issued is how many places the queue has given.
	Issued int64 `json:"issued"`
	// AdmittedUpTo is the last admitted place (Everyone: all of them).
	AdmittedUpTo int64 `json:"admittedUpTo"`
	// Rate is the admissions a second the room measured while it had
	// shoppers to admit, smoothed over about five seconds and starting
	// from the planned rate (see measure); zero until five seconds of
	// admissions have been measured, and for a sale that paces no one. Pace is the rate the pacer holds admissions to while the
	// purchase path struggles, below the sale's admissionPerSecond; zero
	// while it paces at the ceiling, or where this server does not pace
	// the sale. Wait estimates come from both (Room.ahead).
	Rate float64 `json:"rate"`
	Pace float64 `json:"pace,omitempty"`
	// Drawn, Seed (hex), Entrants and Winners describe a random or lottery
	// sale's draw once it has run; the seed is revealed only then.
	Drawn    bool   `json:"drawn"`
	Seed     string `json:"seed,omitempty"`
	Entrants int64  `json:"entrants,omitempty"`
	Winners  int64  `json:"winners,omitempty"`
	// Suspects are the shoppers held under the automation policy: their
	// places are kept, but never admitted.
	Suspects map[string]string `json:"suspects,omitempty"`
	At       time.Time         `json:"at"`

	// catalogGen is the catalog's generation its sale was read at (see
	// OriginSnapshots.Snapshot); zero when the catalog keeps none.
	catalogGen uint64
}

// SaleInfo is the part of a sale the waiting room publishes and decides
// on: never the draw's secret seed.
type SaleInfo struct {
	ID                   string              `json:"id"`
	SKU                  string              `json:"sku"`
	Name                 string              `json:"name"`
	State                flashsale.SaleState `json:"state"`
	PauseReason          string              `json:"pauseReason,omitempty"`
	InitialStock         int                 `json:"initialStock"`
	OpensAt              time.Time           `json:"opensAt"`
	ClosesAt             time.Time           `json:"closesAt"`
	HoldSeconds          int                 `json:"holdSeconds"`
	PerUserLimit         int                 `json:"perUserLimit"`
	Fairness             flashsale.Fairness  `json:"fairness"`
	RegistrationClosesAt time.Time           `json:"registrationClosesAt"`
	AdmissionPerSecond   int                 `json:"admissionPerSecond"`
	MinAccountAgeSeconds int                 `json:"minAccountAgeSeconds"`
	ChallengeBits        int                 `json:"challengeBits"`
	RequireInstrument    bool                `json:"requireInstrument,omitempty"`
	// NotifiedAdmissionSeconds travels to the edges, which hand out the
	// admissions it lengthens.
	NotifiedAdmissionSeconds int    `json:"notifiedAdmissionSeconds,omitempty"`
	SeedCommitment           string `json:"seedCommitment,omitempty"`
	Epoch                    int64  `json:"epoch"`
	// Display travels to the edges with the sale, so that their GET
	// /sale/{sku} publishes it too.
	Display flashsale.Display `json:"display"`
}

// InfoOf returns the published part of a sale.
func InfoOf(s *flashsale.Sale) SaleInfo {
	return SaleInfo{
		ID: s.ID, SKU: s.SKU, Name: s.Name, State: s.State, PauseReason: s.PauseReason, InitialStock: s.InitialStock,
		OpensAt: s.OpensAt, ClosesAt: s.ClosesAt, HoldSeconds: s.HoldSeconds, PerUserLimit: s.PerUserLimit,
		Fairness: s.Fairness, RegistrationClosesAt: s.RegistrationClosesAt, AdmissionPerSecond: s.AdmissionPerSecond,
		MinAccountAgeSeconds: s.MinAccountAgeSeconds, ChallengeBits: s.ChallengeBits, SeedCommitment: s.SeedCommitment,
		Epoch: s.Epoch, RequireInstrument: s.RequireInstrument, Display: s.Display,
		NotifiedAdmissionSeconds: s.NotifiedAdmissionSeconds,
	}
}

// Sale returns the info as a flashsale.Sale, for the code that decides on
// sales (StateAt, MinAccountAge).
func (i SaleInfo) Sale() *flashsale.Sale {
	return &flashsale.Sale{
		ID: i.ID, SKU: i.SKU, Name: i.Name, State: i.State, PauseReason: i.PauseReason, InitialStock: i.InitialStock,
		OpensAt: i.OpensAt, ClosesAt: i.ClosesAt, HoldSeconds: i.HoldSeconds, PerUserLimit: i.PerUserLimit,
		Fairness: i.Fairness, RegistrationClosesAt: i.RegistrationClosesAt, AdmissionPerSecond: i.AdmissionPerSecond,
		MinAccountAgeSeconds: i.MinAccountAgeSeconds, ChallengeBits: i.ChallengeBits, SeedCommitment: i.SeedCommitment,
		Epoch: i.Epoch, RequireInstrument: i.RequireInstrument, Display: i.Display,
		NotifiedAdmissionSeconds: i.NotifiedAdmissionSeconds,
	}
}

// Snapshots gives the waiting room its snapshots: OriginSnapshots at the
// origin, EdgeSnapshots at an edge.
type Snapshots interface {
	// Snapshot returns the SKU's snapshot; flashsale.ErrNotFound for an
	// unknown SKU; a CodeUnavailable error when it cannot be known.
	Snapshot(ctx context.Context, sku string) (*Snapshot, error)
	// DrawIndex returns the index of a drawn sale's entrants.
	DrawIndex(ctx context.Context, snap *Snapshot) (*DrawIndex, error)
	// DrawDocument returns a drawn sale's published draw.
	DrawDocument(ctx context.Context, snap *Snapshot) (*DrawDocument, error)
}

func hexSeed(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errors.New("the draw's seed is not hex")
	}
	return b, nil
}

// ErrOriginUnavailable is what an edge answers while it cannot see the
// origin: come back shortly, never a pass-through.
var ErrOriginUnavailable = &flashsale.Error{Code: flashsale.CodeUnavailable,
	Message: "The waiting room is busy; your place is kept. Please come back shortly.", RetryAfter: 5 * time.Second}

// OriginSnapshots builds snapshots from the catalog, the gate, the record
// and the queue, at most one per sale every TTL. Safe for concurrent use.
type OriginSnapshots struct {
	Catalog interface {
		BySKU(ctx context.Context, sku string) (*flashsale.Sale, error)
	}
	Gate  flashsale.GateAdmin
	Store interface {
		PendingUnits(ctx context.Context, saleID string) (int64, error)
		Draw(ctx context.Context, saleID string) (*flashsale.Draw, error)
	}
	Queue Queue
	// Pacing, when set, is the pacer's last decision per sale (Pacer):
	// while it holds admissions below the sale's rate, estimates say so at
	// once, not after the measured rate has caught up.
	Pacing interface {
		State(saleID string) (PaceState, bool)
	}
	Now func() time.Time
	// TTL is how stale a snapshot may be (default 100ms).
	TTL time.Duration

	mu sync.Mutex
	// cache holds the last snapshot of each SKU: read by every poll
	// without a lock.
	cache sync.Map // SKU → *Snapshot
	rates map[string]rateTrack
	draws map[string]*flashsale.Draw
	// pendings is the last count of units held, per sale.
	pendings map[string]pendingRead
	indexes  map[string]*DrawIndex
	flight   singleflight.Group
}

// rateTrack measures how fast a sale's places are admitted, from one
// snapshot to the next.
type rateTrack struct {
	at       time.Time
	admitted int64
	// counting: at the last sample the room was admitting (open, units
	// left, shoppers waiting past the admitted places), so the admissions
	// since measure its pace. Before the open, while paused or sold out,
	// or with nobody left to admit, admissions stop for reasons that say
	// nothing of the pace to come, and are not counted.
	counting bool
	// rate is the smoothed measure, over measured of admitting time.
	rate     float64
	measured time.Duration
}

func (o *OriginSnapshots) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// Snapshot implements Snapshots.
func (o *OriginSnapshots) Snapshot(ctx context.Context, sku string) (*Snapshot, error) {
	ttl := o.TTL
	if ttl <= 0 {
		ttl = 100 * time.Millisecond
	}
	// Every poll asks: the last snapshot answers while it is fresh and,
	// where the catalog can say so with one read, nothing in the catalog
	// has changed since it was built.
	gens, hasGen := o.Catalog.(generations)
	var gen uint64
	if hasGen {
		gen = gens.Generation()
		if cached, ok := o.cache.Load(sku); ok {
			if snap := cached.(*Snapshot); snap.catalogGen == gen && o.now().Sub(snap.At) < ttl {
				return snap, nil
			}
		}
	}
	sale, err := o.Catalog.BySKU(ctx, sku)
	if err != nil {
		return nil, err
	}
	var snap *Snapshot
	cached, ok := o.cache.Load(sku)
	if ok {
		snap = cached.(*Snapshot)
	}
	if ok && o.now().Sub(snap.At) < ttl && snap.Sale.ID == sale.ID && sameSale(snap.Sale, sale) {
		return snap, nil
	}
	// A snapshot serves every poll: its reads are the background's, not
	// the poll's that found the last one old.
	v, err, _ := o.flight.Do(sku, func() (any, error) {
		return o.build(tally.Detach(context.WithoutCancel(ctx)), sale, gen)
	})
	if err != nil {
		if ok && snap.Sale.ID == sale.ID {
			// Serve the last figures rather than an error page: an error is
			// an instruction to press the button again.
			return snap, nil
		}
		return nil, &flashsale.Error{Code: flashsale.CodeUnavailable,
			Message:    "The waiting room cannot see the sale right now; your place is kept, come back shortly.",
			RetryAfter: 2 * time.Second, Err: err}
	}
	return v.(*Snapshot), nil
}

// sameSale reports whether the snapshot was built from the sale as it is
// now (a pause or a change shows at once, not after the TTL).
func sameSale(info SaleInfo, s *flashsale.Sale) bool {
	return info.State == s.State && info.Epoch == s.Epoch && info.AdmissionPerSecond == s.AdmissionPerSecond &&
		info.ClosesAt.Equal(s.ClosesAt) && info.InitialStock == s.InitialStock && info.Display == s.Display
}

// generations is a catalog that says when its sales may have changed
// (catalog.Catalog).
type generations interface{ Generation() uint64 }

// build makes the sale's snapshot; gen is the catalog's generation read
// before the sale was.
func (o *OriginSnapshots) build(ctx context.Context, sale *flashsale.Sale, gen uint64) (*Snapshot, error) {
	now := o.now()
	g, err := o.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Sale: InfoOf(sale), Loaded: g.Loaded, Counter: g.Counter, Epoch: g.Epoch, At: now, catalogGen: gen}
	if !g.Loaded {
		snap.Epoch = sale.Epoch
	}
	// Pending only matters once the counter is gone: it says whether sold
	// out is final. Reading it then, and only then, keeps the record out
	// of the poll path while stock lasts.
	if g.Loaded && g.Counter <= 0 {
		if snap.Pending, err = o.pending(ctx, sale.ID, g, now); err != nil {
			return nil, err
		}
	}
	if snap.Issued, err = o.Queue.Len(ctx, sale.ID); err != nil {
		return nil, err
	}
	snap.AdmittedUpTo = Everyone
	if sale.AdmissionPerSecond > 0 {
		if snap.AdmittedUpTo, err = o.Queue.Admitted(ctx, sale.ID); err != nil {
			return nil, err
		}
	}
	if snap.Suspects, err = o.Queue.Suspects(ctx, sale.ID); err != nil {
		return nil, err
	}
	if sale.Fairness != flashsale.FairnessFIFO {
		d, err := o.draw(ctx, sale.ID)
		if err != nil && !errors.Is(err, flashsale.ErrNotFound) {
			return nil, err
		}
		if d != nil && !d.DrawnAt.IsZero() {
			snap.Drawn, snap.Seed = true, hex.EncodeToString(d.Seed)
			snap.Entrants, snap.Winners = int64(d.Entrants), int64(d.Winners)
		}
	}
	snap.Pace = o.pace(sale, now)
	admitting := sale.StateAt(now) == flashsale.SaleOpen && g.Loaded && g.Counter > 0 && snap.Issued > snap.AdmittedUpTo
	o.mu.Lock()
	if o.rates == nil {
		o.rates = map[string]rateTrack{}
	}
	snap.Rate = o.measure(sale, snap, admitting, now)
	o.cache.Store(sale.SKU, snap)
	o.mu.Unlock()
	return snap, nil
}

// paceFresh is how old the pacer's last tick may be for its decision to
// count: older, and this server no longer paces the sale (or the sale is
// not open).
const paceFresh = 2 * time.Second

// pace is the pacer's rate while it holds admissions below the sale's
// own, or zero.
func (o *OriginSnapshots) pace(sale *flashsale.Sale, now time.Time) float64 {
	if o.Pacing == nil || sale.AdmissionPerSecond <= 0 {
		return 0
	}
	p, ok := o.Pacing.State(sale.ID)
	if !ok || p.Healthy || p.Rate <= 0 || p.Rate >= float64(sale.AdmissionPerSecond) || now.Sub(p.At) > paceFresh {
		return 0
	}
	return p.Rate
}

// pendingTTL is how long a positive count of units held is reused: sold
// out becomes final at most this late.
const pendingTTL = time.Second

type pendingRead struct {
	at         time.Time
	epoch, won int64
	units      int64
}

// pending returns the units held by pending reservations. The record is
// read at most once a pendingTTL: while the gate has taken no unit since
// the last read (Won unchanged), the units held can only have fallen, so
// a positive count is an upper bound for a while, and a zero stays
// exact (sold out is final) without asking the record again.
func (o *OriginSnapshots) pending(ctx context.Context, saleID string, g flashsale.GateSnapshot, now time.Time) (int64, error) {
	o.mu.Lock()
	p, ok := o.pendings[saleID]
	o.mu.Unlock()
	if ok && p.epoch == g.Epoch && p.won == g.Won && (p.units == 0 || now.Sub(p.at) < pendingTTL) {
		return p.units, nil
	}
	units, err := o.Store.PendingUnits(ctx, saleID)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	if o.pendings == nil {
		o.pendings = map[string]pendingRead{}
	}
	o.pendings[saleID] = pendingRead{at: now, epoch: g.Epoch, won: g.Won, units: units}
	o.mu.Unlock()
	return units, nil
}

// rateWindow is about how long the measured rate takes to follow a
// change of pace.
const rateWindow = 5 * time.Second

// measure tracks the admissions a second while the room is admitting
// (see rateTrack.counting), for wait estimates. It starts from the
// planned rate (the pacer's, or the sale's), so that the measure takes
// over from the plan as admissions are seen rather than from nothing: a
// sale's first seconds, or a sale created an hour before its open and
// polled all along, are estimated from what the room will admit, never
// from a rate that decayed while nothing could be admitted. Called with
// o.mu held.
func (o *OriginSnapshots) measure(sale *flashsale.Sale, snap *Snapshot, admitting bool, now time.Time) float64 {
	if snap.AdmittedUpTo == Everyone {
		return 0
	}
	r := o.rates[sale.ID]
	if r.measured == 0 {
		r.rate = planned(snap)
	}
	if r.counting && now.After(r.at) && snap.AdmittedUpTo >= r.admitted {
		dt := now.Sub(r.at)
		inst := float64(snap.AdmittedUpTo-r.admitted) / dt.Seconds()
		alpha := math.Min(1, dt.Seconds()/rateWindow.Seconds())
		r.rate += alpha * (inst - r.rate)
		r.measured += dt
	}
	r.at, r.admitted, r.counting = now, snap.AdmittedUpTo, admitting
	o.rates[sale.ID] = r
	if r.measured < rateWindow {
		return 0 // not measured yet: estimates come from the plan
	}
	return r.rate
}

// draw returns the sale's draw from the record, cached once drawn (a draw
// never changes after).
func (o *OriginSnapshots) draw(ctx context.Context, saleID string) (*flashsale.Draw, error) {
	o.mu.Lock()
	d, ok := o.draws[saleID]
	o.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := o.Store.Draw(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if !d.DrawnAt.IsZero() {
		o.mu.Lock()
		if o.draws == nil {
			o.draws = map[string]*flashsale.Draw{}
		}
		o.draws[saleID] = d
		o.mu.Unlock()
	}
	return d, nil
}

// DrawIndex implements Snapshots, from the published document.
func (o *OriginSnapshots) DrawIndex(ctx context.Context, snap *Snapshot) (*DrawIndex, error) {
	o.mu.Lock()
	ix, ok := o.indexes[snap.Sale.ID]
	o.mu.Unlock()
	if ok {
		return ix, nil
	}
	v, err, _ := o.flight.Do("index:"+snap.Sale.ID, func() (any, error) {
		d, err := o.draw(ctx, snap.Sale.ID)
		if err != nil {
			return nil, err
		}
		doc, err := DecodeDrawDocument(d.Document)
		if err != nil {
			return nil, err
		}
		ix := NewDrawIndex(snap.Sale.ID, d.Seed, doc.Order)
		o.mu.Lock()
		if o.indexes == nil {
			o.indexes = map[string]*DrawIndex{}
		}
		o.indexes[snap.Sale.ID] = ix
		o.mu.Unlock()
		return ix, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*DrawIndex), nil
}

// DrawDocument implements Snapshots, from the record.
func (o *OriginSnapshots) DrawDocument(ctx context.Context, snap *Snapshot) (*DrawDocument, error) {
	d, err := o.draw(ctx, snap.Sale.ID)
	if err != nil {
		return nil, err
	}
	if d.DrawnAt.IsZero() {
		return nil, flashsale.ErrNotFound
	}
	return DecodeDrawDocument(d.Document)
}

// Snapshots returns the snapshots of every active sale, for the edges.
func (o *OriginSnapshots) All(ctx context.Context, sales []*flashsale.Sale) ([]*Snapshot, error) {
	out := make([]*Snapshot, 0, len(sales))
	for _, s := range sales {
		snap, err := o.Snapshot(ctx, s.SKU)
		if err != nil {
			return nil, err
		}
		out = append(out, snap)
	}
	return out, nil
}

// Invalidate drops a sale's cached snapshot, so the next poll builds a new
// one.
func (o *OriginSnapshots) Invalidate(sku string) {
	o.cache.Delete(sku)
}
