package waitroom

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/loop"
)

// EdgeSnapshots gives an edge its snapshots: it fetches every active sale's
// snapshot from the origin at each Interval (250ms by default, well inside
// the second in which sold out must reach every poller), so that polls are
// answered from memory. While it cannot reach the origin for longer than
// Stale, it answers "come back shortly" (503 with Retry-After), never a
// pass-through. Safe for concurrent use.
type EdgeSnapshots struct {
	cfg EdgeConfig

	mu      sync.RWMutex
	bySKU   map[string]*Snapshot
	missing map[string]time.Time
	fetched time.Time
	indexes map[string]*DrawIndex
	flight  singleflight.Group
	loop    loop.Loop
}

// EdgeConfig configures EdgeSnapshots. Origin is required.
type EdgeConfig struct {
	// Origin is the origin's base URL; Token its admin token (if any).
	Origin string
	Token  string
	// EdgeID names this edge to the origin, which shows in the sale view
	// which edges are warm.
	EdgeID   string
	Client   *http.Client
	Interval time.Duration
	// Stale is how old the snapshots may grow before the edge stops
	// answering from them (default 3s).
	Stale  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// NewEdgeSnapshots returns EdgeSnapshots; call Start to begin fetching.
func NewEdgeSnapshots(cfg EdgeConfig) *EdgeSnapshots {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 2 * time.Second}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Stale <= 0 {
		cfg.Stale = 3 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &EdgeSnapshots{cfg: cfg, bySKU: map[string]*Snapshot{}, missing: map[string]time.Time{}, indexes: map[string]*DrawIndex{}}
}

// Start fetches snapshots in the background until Stop.
func (e *EdgeSnapshots) Start(ctx context.Context) {
	e.loop.Start(ctx, e.cfg.Interval, "edge: the origin did not answer", e.cfg.Logger, e.Refresh)
}

// Stop stops fetching.
func (e *EdgeSnapshots) Stop() { e.loop.Stop() }

// Fetched returns when the snapshots were last fetched from the origin
// (zero before the first fetch): an edge that stops refreshing serves its
// last figures until they are Stale, then turns shoppers away.
func (e *EdgeSnapshots) Fetched() time.Time {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.fetched
}

// SnapshotsPath is the origin route edges fetch snapshots from.
const SnapshotsPath = "/admin/edge/snapshots"

// Refresh fetches every active sale's snapshot from the origin once.
func (e *EdgeSnapshots) Refresh(ctx context.Context) error {
	snaps, err := e.fetch(ctx, "")
	if err != nil {
		return err
	}
	by := make(map[string]*Snapshot, len(snaps))
	for _, s := range snaps {
		by[s.Sale.SKU] = s
	}
	e.mu.Lock()
	e.bySKU, e.fetched = by, e.cfg.Now()
	e.missing = map[string]time.Time{}
	e.mu.Unlock()
	return nil
}

func (e *EdgeSnapshots) fetch(ctx context.Context, sku string) ([]*Snapshot, error) {
	u := e.cfg.Origin + SnapshotsPath
	if sku != "" {
		u += "?sku=" + url.QueryEscape(sku)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if e.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.Token)
	}
	if e.cfg.EdgeID != "" {
		req.Header.Set("X-Edge-ID", e.cfg.EdgeID)
	}
	resp, err := e.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("origin answered %d", resp.StatusCode)
	}
	var out struct {
		Sales []*Snapshot `json:"sales"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("origin's snapshots: %w", err)
	}
	return out.Sales, nil
}

// Snapshot implements Snapshots.
func (e *EdgeSnapshots) Snapshot(ctx context.Context, sku string) (*Snapshot, error) {
	now := e.cfg.Now()
	e.mu.RLock()
	snap, ok := e.bySKU[sku]
	fresh := now.Sub(e.fetched) < e.cfg.Stale
	missedAt, missed := e.missing[sku]
	e.mu.RUnlock()
	if !fresh {
		return nil, ErrOriginUnavailable
	}
	if ok {
		return snap, nil
	}
	if !flashsale.ValidSKU(sku) {
		// No sale has it: no need to ask the origin, or to remember it.
		return nil, flashsale.ErrNotFound
	}
	if missed && now.Sub(missedAt) < time.Second {
		return nil, flashsale.ErrNotFound
	}
	// A SKU the last round did not have: ask once (shared by every caller
	// meanwhile), and remember a miss for a second so that a flood of
	// unknown SKUs cannot reach the origin.
	v, err, _ := e.flight.Do(sku, func() (any, error) {
		snaps, err := e.fetch(context.WithoutCancel(ctx), sku)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, s := range snaps {
			if s.Sale.SKU == sku {
				e.bySKU[sku] = s
				return s, nil
			}
		}
		e.missing[sku] = e.cfg.Now()
		return (*Snapshot)(nil), nil
	})
	if err != nil {
		return nil, ErrOriginUnavailable
	}
	if s := v.(*Snapshot); s != nil {
		return s, nil
	}
	return nil, flashsale.ErrNotFound
}

// DrawIndex implements Snapshots: the published draw, fetched once from
// the origin.
func (e *EdgeSnapshots) DrawIndex(ctx context.Context, snap *Snapshot) (*DrawIndex, error) {
	e.mu.RLock()
	ix, ok := e.indexes[snap.Sale.ID]
	e.mu.RUnlock()
	if ok {
		return ix, nil
	}
	v, err, _ := e.flight.Do("index:"+snap.Sale.ID, func() (any, error) {
		doc, err := e.document(context.WithoutCancel(ctx), snap.Sale.SKU)
		if err != nil {
			return nil, err
		}
		seed, err := hexSeed(doc.Seed)
		if err != nil {
			return nil, err
		}
		ix := NewDrawIndex(snap.Sale.ID, seed, doc.Order)
		e.mu.Lock()
		e.indexes[snap.Sale.ID] = ix
		e.mu.Unlock()
		return ix, nil
	})
	if err != nil {
		return nil, ErrOriginUnavailable
	}
	return v.(*DrawIndex), nil
}

// DrawDocument implements Snapshots, fetched from the origin.
func (e *EdgeSnapshots) DrawDocument(ctx context.Context, snap *Snapshot) (*DrawDocument, error) {
	doc, err := e.document(ctx, snap.Sale.SKU)
	if err != nil {
		return nil, ErrOriginUnavailable
	}
	return doc, nil
}

func (e *EdgeSnapshots) document(ctx context.Context, sku string) (*DrawDocument, error) {
	client := *e.cfg.Client
	client.Timeout = 60 * time.Second // a large draw takes a while to fetch
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.cfg.Origin+"/sale/"+url.PathEscape(sku)+"/draw", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("origin answered %d for the draw", resp.StatusCode)
	}
	var doc DrawDocument
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, err
	}
	return &doc, nil
}
