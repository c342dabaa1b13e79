package httpapi

import (
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/waitroom"
)

// edgeRegistry remembers which edges fetched snapshots, and when, so the
// operator sees whether every edge is warm.
type edgeRegistry struct {
	mu   sync.Mutex
	seen map[string]edgeSeen
}

type edgeSeen struct {
	at   time.Time
	skus map[string]bool
}

func (e *edgeRegistry) saw(id string, at time.Time, skus []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = map[string]edgeSeen{}
	}
	set := make(map[string]bool, len(skus))
	for _, s := range skus {
		set[s] = true
	}
	e.seen[id] = edgeSeen{at: at, skus: set}
}

type edgeJSON struct {
	ID       string    `json:"id"`
	LastSeen time.Time `json:"lastSeen"`
	HasSale  bool      `json:"hasSale"`
}

// of lists the edges seen in the last ten seconds and whether each holds
// the sale's snapshot.
func (e *edgeRegistry) of(sku string, now time.Time) []edgeJSON {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []edgeJSON{}
	for id, s := range e.seen {
		if now.Sub(s.at) > 10*time.Second {
			continue
		}
		out = append(out, edgeJSON{ID: id, LastSeen: s.at.UTC(), HasSale: s.skus[sku]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// edgeSnapshots gives an edge the snapshots of every active sale, or of
// ?sku= alone.
func (s *Server) edgeSnapshots(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var sales []*flashsale.Sale
	if sku := r.URL.Query().Get("sku"); sku != "" {
		sale, err := s.cfg.Catalog.BySKU(ctx, sku)
		if err != nil && flashsale.ErrorCode(err) != flashsale.CodeNotFound {
			writeError(w, s.cfg.Logger, r, err)
			return
		}
		if sale != nil {
			sales = append(sales, sale)
		}
	} else {
		active, err := s.cfg.Catalog.Active(ctx)
		if err != nil {
			writeError(w, s.cfg.Logger, r, err)
			return
		}
		sales = active
	}
	snaps, err := s.cfg.Snapshots.All(ctx, sales)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	if id := r.Header.Get("X-Edge-ID"); id != "" && r.URL.Query().Get("sku") == "" {
		skus := make([]string, len(snaps))
		for i, sn := range snaps {
			skus[i] = sn.Sale.SKU
		}
		s.edges.saw(id, s.cfg.Now(), skus)
	}
	if snaps == nil {
		snaps = []*waitroom.Snapshot{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sales": snaps})
}
