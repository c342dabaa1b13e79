package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/audit"
	"github.com/flashsale/flashsale/control"
	"github.com/flashsale/flashsale/waitroom"
)

type createSaleBody struct {
	SKU                  string             `json:"sku"`
	Name                 string             `json:"name"`
	InitialStock         *int               `json:"initialStock"`
	OpensAt              *time.Time         `json:"opensAt"`
	ClosesAt             *time.Time         `json:"closesAt"`
	HoldSeconds          *int               `json:"holdSeconds"`
	PerUserLimit         *int               `json:"perUserLimit"`
	Fairness             flashsale.Fairness `json:"fairness"`
	RegistrationClosesAt *time.Time         `json:"registrationClosesAt"`
	AdmissionPerSecond   int                `json:"admissionPerSecond"`
	MinAccountAgeSeconds int                `json:"minAccountAgeSeconds"`
	ChallengeBits        int                `json:"challengeBits"`
	Shards               *int               `json:"shards"`
	RequireInstrument    bool               `json:"requireInstrument"`
	Display              *flashsale.Display `json:"display"`
	// NotifiedAdmissionSeconds: see flashsale.Sale.
	NotifiedAdmissionSeconds int `json:"notifiedAdmissionSeconds"`
}

func (s *Server) createSale(w http.ResponseWriter, r *http.Request) {
	var b createSaleBody
	if err := decode(w, r, &b, false); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	if b.InitialStock == nil {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "initialStock is required."))
		return
	}
	if b.OpensAt == nil {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "opensAt is required (RFC 3339)."))
		return
	}
	in := &flashsale.Sale{
		SKU:                  b.SKU,
		Name:                 b.Name,
		InitialStock:         *b.InitialStock,
		OpensAt:              *b.OpensAt,
		Fairness:             b.Fairness,
		AdmissionPerSecond:   b.AdmissionPerSecond,
		MinAccountAgeSeconds: b.MinAccountAgeSeconds,
		ChallengeBits:        b.ChallengeBits,
		RequireInstrument:    b.RequireInstrument,

		NotifiedAdmissionSeconds: b.NotifiedAdmissionSeconds,
	}
	if b.Display != nil {
		in.Display = *b.Display
	}
	if b.ClosesAt != nil {
		in.ClosesAt = b.ClosesAt.UTC()
	}
	if b.RegistrationClosesAt != nil {
		in.RegistrationClosesAt = b.RegistrationClosesAt.UTC()
	}
	// Zero means "the default" in ApplyDefaults, so an explicit zero must
	// be refused here rather than silently replaced.
	for _, f := range []struct {
		name string
		v    *int
		dst  *int
	}{{"holdSeconds", b.HoldSeconds, &in.HoldSeconds}, {"perUserLimit", b.PerUserLimit, &in.PerUserLimit}, {"shards", b.Shards, &in.Shards}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "%s must be at least 1.", f.name))
			return
		}
		*f.dst = *f.v
	}
	sale, err := s.cfg.Control.Create(r.Context(), in)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.view(r.Context(), sale))
}

type pacingJSON struct {
	Rate        float64 `json:"rate"`
	Outstanding int64   `json:"outstanding"`
	Capacity    int64   `json:"capacity"`
	Healthy     bool    `json:"healthy"`
}

type drawJSON struct {
	DrawnAt  *time.Time `json:"drawnAt"`
	Entrants int        `json:"entrants"`
	Winners  int        `json:"winners,omitempty"`
}

type invariantJSON struct {
	OK         bool       `json:"ok"`
	CheckedAt  *time.Time `json:"checkedAt"`
	Difference int64      `json:"difference"`
	Reason     string     `json:"reason,omitempty"`
}

type adminSaleJSON struct {
	SaleID               string              `json:"saleId"`
	SKU                  string              `json:"sku"`
	Name                 string              `json:"name"`
	State                flashsale.SaleState `json:"state"`
	PauseReason          string              `json:"pauseReason,omitempty"`
	PausedAt             *time.Time          `json:"pausedAt,omitempty"`
	InitialStock         int                 `json:"initialStock"`
	OpensAt              time.Time           `json:"opensAt"`
	ClosesAt             *time.Time          `json:"closesAt"`
	HoldSeconds          int                 `json:"holdSeconds"`
	PerUserLimit         int                 `json:"perUserLimit"`
	Fairness             flashsale.Fairness  `json:"fairness"`
	RegistrationClosesAt *time.Time          `json:"registrationClosesAt,omitempty"`
	AdmissionPerSecond   int                 `json:"admissionPerSecond"`
	MinAccountAgeSeconds int                 `json:"minAccountAgeSeconds"`
	ChallengeBits        int                 `json:"challengeBits"`
	RequireInstrument    bool                `json:"requireInstrument"`
	Shards               int                 `json:"shards"`
	SeedCommitment       string              `json:"seedCommitment,omitempty"`
	Display              *flashsale.Display  `json:"display,omitempty"`
	// NotifiedAdmissionSeconds is left out when the sale notifies no
	// turns.
	NotifiedAdmissionSeconds int       `json:"notifiedAdmissionSeconds,omitempty"`
	Epoch                    int64     `json:"epoch"`
	Version                  int64     `json:"version"`
	CreatedAt                time.Time `json:"createdAt"`
	UpdatedAt                time.Time `json:"updatedAt"`

	// Live figures.
	Counter      *int64           `json:"counter"`
	Pending      int64            `json:"pending"`
	Confirmed    int64            `json:"confirmed"`
	Expired      int64            `json:"expired"`
	Cancelled    int64            `json:"cancelled"`
	Voided       int64            `json:"voided"`
	AdmittedUpTo int64            `json:"admittedUpTo"`
	Waiting      int64            `json:"waiting"`
	Rejections   map[string]int64 `json:"rejections"`
	Invariant    invariantJSON    `json:"invariant"`
	// Gate says whether the gate holds the sale's counter ("loaded"),
	// does not ("not_loaded"; "retired" for a closed sale) or did not
	// answer ("unreachable").
	Gate string `json:"gate"`
	// Warm says the counter is loaded and every edge holds the sale.
	Warm  bool       `json:"warm"`
	Edges []edgeJSON `json:"edges"`
	// HeldAsAutomation counts shoppers held under the automation policy.
	HeldAsAutomation int `json:"heldAsAutomation"`
	// Pacing is what the pacer last decided; Draw the draw, for random
	// and lottery sales.
	Pacing *pacingJSON `json:"pacing,omitempty"`
	Draw   *drawJSON   `json:"draw,omitempty"`
	// Outbox is the sale's events waiting to be published, the age of the
	// oldest (the relay's lag) and its dead letters.
	Outbox *outboxJSON `json:"outbox,omitempty"`
	// Invites counts the sale's invite codes, once it has any.
	Invites *invitesJSON `json:"invites,omitempty"`
	// Errors lists live figures that could not be read.
	Errors []string `json:"errors,omitempty"`
}

// view is the sale with its live figures. A figure that cannot be read is
// left out and named in Errors rather than failing the whole view: the
// operator needs it most when something is broken.
func (s *Server) view(ctx context.Context, sale *flashsale.Sale) adminSaleJSON {
	return s.viewFrom(ctx, sale, direct{s})
}

// viewFrom is the view with its figures read from src: straight from the
// gate, the record and the queue (direct), or from what the waiting room
// and the background services already keep (the live feed's, live.go).
func (s *Server) viewFrom(ctx context.Context, sale *flashsale.Sale, src figures) adminSaleJSON {
	now := s.cfg.Now()
	v := adminSaleJSON{
		SaleID: sale.ID, SKU: sale.SKU, Name: sale.Name, State: sale.StateAt(now), PauseReason: sale.PauseReason,
		PausedAt: timePtr(sale.PausedAt), InitialStock: sale.InitialStock, OpensAt: sale.OpensAt.UTC(),
		ClosesAt: timePtr(sale.ClosesAt), HoldSeconds: sale.HoldSeconds, PerUserLimit: sale.PerUserLimit,
		Fairness: sale.Fairness, RegistrationClosesAt: timePtr(sale.RegistrationClosesAt),
		AdmissionPerSecond: sale.AdmissionPerSecond, MinAccountAgeSeconds: sale.MinAccountAgeSeconds,
		ChallengeBits: sale.ChallengeBits, RequireInstrument: sale.RequireInstrument, Shards: sale.Shards, SeedCommitment: sale.SeedCommitment,
		Epoch: sale.Epoch, Version: sale.Version, CreatedAt: sale.CreatedAt.UTC(), UpdatedAt: sale.UpdatedAt.UTC(),
		NotifiedAdmissionSeconds: sale.NotifiedAdmissionSeconds,
		Rejections:               s.rejections.of(sale.SKU),
		Invariant:                invariantJSON{OK: true},
	}
	if !sale.Display.IsZero() {
		d := sale.Display
		v.Display = &d
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	snap, err := src.gate(ctx, sale)
	switch {
	case err != nil:
		v.Gate = "unreachable"
		v.Errors = append(v.Errors, "gate: unreachable")
	case !snap.Loaded && v.State == flashsale.SaleClosed:
		// Closed and not in the gate: retired (control.Retirer), or never
		// loaded again since a restart; either way there is nothing left
		// for the gate to sell or keep.
		v.Gate = "retired"
	case !snap.Loaded:
		v.Gate = "not_loaded"
	default:
		v.Gate = "loaded"
		c := snap.Counter
		v.Counter = &c
		if v.State == flashsale.SaleOpen && c <= 0 {
			v.State = flashsale.SaleSoldOut
		}
	}
	totals, err := src.totals(ctx, sale)
	if err != nil {
		v.Errors = append(v.Errors, "record: unreachable")
	}
	v.Pending, v.Confirmed, v.Expired, v.Cancelled, v.Voided = totals.Pending, totals.Confirmed, totals.Expired, totals.Cancelled, totals.Voided
	if st, ok, err := src.outbox(ctx, sale); err != nil {
		v.Errors = append(v.Errors, "outbox: unreachable")
	} else if ok {
		v.Outbox = outboxOut(st, now)
	}
	if c, err := src.invites(ctx, sale); err != nil {
		v.Errors = append(v.Errors, "invites: unreachable")
	} else if c.Issued > 0 {
		v.Invites = &invitesJSON{Issued: c.Issued, Redeemed: c.Redeemed, Won: c.Won}
	}
	issued := int64(0)
	upTo := int64(0)
	if s.cfg.Queue != nil {
		if n, err := src.issued(ctx, sale); err == nil {
			issued = n
		}
		switch {
		case now.Before(sale.OpensAt):
		case sale.AdmissionPerSecond <= 0:
			upTo = issued
		default:
			if n, err := src.admitted(ctx, sale); err == nil {
				upTo = min(n, issued)
			}
		}
	}
	v.AdmittedUpTo, v.Waiting = upTo, issued-upTo
	if s.cfg.Pacer != nil {
		if p, ok := s.cfg.Pacer.State(sale.ID); ok {
			v.Pacing = &pacingJSON{Rate: p.Rate, Outstanding: p.Outstanding, Capacity: p.Capacity, Healthy: p.Healthy}
		}
	}
	if sale.Fairness != flashsale.FairnessFIFO {
		if d, err := src.draw(ctx, sale); err == nil && !d.DrawnAt.IsZero() {
			at := d.DrawnAt.UTC()
			v.Draw = &drawJSON{DrawnAt: &at, Entrants: d.Entrants, Winners: d.Winners}
		} else if err == nil {
			v.Draw = &drawJSON{}
		}
	}
	v.Edges = s.edges.of(sale.SKU, now)
	if s.cfg.Queue != nil {
		if held, err := src.suspects(ctx, sale); err == nil {
			v.HeldAsAutomation = held
		}
	}
	if s.cfg.Watcher != nil {
		if res, ok := s.cfg.Watcher.Last(sale.ID); ok {
			at := res.CheckedAt.UTC()
			v.Invariant = invariantJSON{OK: res.OK, CheckedAt: &at, Difference: res.Difference, Reason: res.Reason}
		}
	}
	if s.cfg.Warmer != nil {
		// Warm: the counter is in the gate and every edge holds the sale's
		// snapshot, before the open.
		v.Warm = s.cfg.Warmer.Warm(sale.ID)
		for _, e := range v.Edges {
			v.Warm = v.Warm && e.HasSale
		}
	}
	return v
}

func (s *Server) listSales(w http.ResponseWriter, r *http.Request) {
	sales, err := s.cfg.Store.Sales(r.Context())
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	out := make([]adminSaleJSON, 0, len(sales))
	for _, sale := range sales {
		out = append(out, s.view(r.Context(), sale))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sales": out})
}

func (s *Server) showSale(w http.ResponseWriter, r *http.Request) {
	sale, err := s.cfg.Store.SaleBySKU(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(r.Context(), sale))
}

// ifMatch reads the required If-Match version: the number, quoted or not.
func ifMatch(r *http.Request) (int64, error) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" {
		return 0, flashsale.Errorf(flashsale.CodePreconditionRequired,
			"Send If-Match with the version you read, so a change made meanwhile is not overwritten.")
	}
	h = strings.TrimPrefix(h, "W/")
	h = strings.Trim(h, `"`)
	v, err := strconv.ParseInt(h, 10, 64)
	if err != nil || v < 1 {
		return 0, flashsale.Errorf(flashsale.CodeBadRequest, "If-Match must be a version number.")
	}
	return v, nil
}

type patchSaleBody struct {
	Name                     *string    `json:"name"`
	ClosesAt                 *time.Time `json:"closesAt"`
	AdmissionPerSecond       *int       `json:"admissionPerSecond"`
	HoldSeconds              *int       `json:"holdSeconds"`
	PerUserLimit             *int       `json:"perUserLimit"`
	MinAccountAgeSeconds     *int       `json:"minAccountAgeSeconds"`
	ChallengeBits            *int       `json:"challengeBits"`
	InitialStock             *int       `json:"initialStock"`
	RequireInstrument        *bool      `json:"requireInstrument"`
	NotifiedAdmissionSeconds *int       `json:"notifiedAdmissionSeconds"`
	// Display replaces the sale's display as a whole; {} clears it.
	Display *flashsale.Display `json:"display"`
}

func (s *Server) patchSale(w http.ResponseWriter, r *http.Request) {
	version, err := ifMatch(r)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	var b patchSaleBody
	if err := decode(w, r, &b, false); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	sale, err := s.cfg.Control.Update(r.Context(), r.PathValue("sku"), version, control.Patch{
		Name: b.Name, ClosesAt: b.ClosesAt, AdmissionPerSecond: b.AdmissionPerSecond, HoldSeconds: b.HoldSeconds,
		PerUserLimit: b.PerUserLimit, MinAccountAgeSeconds: b.MinAccountAgeSeconds, ChallengeBits: b.ChallengeBits,
		InitialStock: b.InitialStock, RequireInstrument: b.RequireInstrument, Display: b.Display,
		NotifiedAdmissionSeconds: b.NotifiedAdmissionSeconds,
	})
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(sale.Version, 10)))
	writeJSON(w, http.StatusOK, s.view(r.Context(), sale))
}

type pauseBody struct {
	Reason string `json:"reason"`
}

func (s *Server) pauseSale(w http.ResponseWriter, r *http.Request) {
	var b pauseBody
	if err := decode(w, r, &b, true); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	reason := strings.TrimSpace(b.Reason)
	if reason == "" {
		reason = "paused by an operator"
	}
	if len(reason) > 512 {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "reason must be at most 512 characters."))
		return
	}
	sale, err := s.cfg.Control.Pause(r.Context(), r.PathValue("sku"), reason)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(r.Context(), sale))
}

func (s *Server) resumeSale(w http.ResponseWriter, r *http.Request) {
	if err := decode(w, r, &struct{}{}, true); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	sale, err := s.cfg.Control.Resume(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	s.cfg.Snapshots.Invalidate(sale.SKU)
	writeJSON(w, http.StatusOK, s.view(r.Context(), sale))
}

func (s *Server) rebuildSale(w http.ResponseWriter, r *http.Request) {
	if err := decode(w, r, &struct{}{}, true); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	sale, err := s.cfg.Control.Rebuild(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	s.cfg.Snapshots.Invalidate(sale.SKU)
	writeJSON(w, http.StatusOK, s.view(r.Context(), sale))
}

type auditJSON struct {
	Seq           int64     `json:"seq"`
	At            time.Time `json:"at"`
	Op            string    `json:"op"`
	Source        string    `json:"source"`
	Delta         int64     `json:"delta"`
	Counter       int64     `json:"counter"`
	ReservationID string    `json:"reservationId,omitempty"`
}

// auditSale lists the newest entries of the sale's counter audit log
// (?limit=, default 100, at most 10000).
func (s *Server) auditSale(w http.ResponseWriter, r *http.Request) {
	sale, err := s.cfg.Store.SaleBySKU(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	limit := 100
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "limit must be from 1 to 10000."))
			return
		}
		limit = n
	}
	entries, err := s.cfg.Gate.Audit(r.Context(), sale.ID, limit)
	if err != nil {
		writeError(w, s.cfg.Logger, r, &flashsale.Error{Code: flashsale.CodeUnavailable, Message: "The stock gate did not answer.", Err: err})
		return
	}
	out := make([]auditJSON, len(entries))
	for i, e := range entries {
		out[i] = auditJSON{Seq: e.Seq, At: e.At.UTC(), Op: e.Op, Source: e.Source, Delta: e.Delta, Counter: e.Counter, ReservationID: e.ReservationID}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sku": sale.SKU, "entries": out})
}

type orderJSON struct {
	OrderID       string               `json:"orderId"`
	ReservationID string               `json:"reservationId"`
	SKU           string               `json:"sku"`
	UserID        string               `json:"userId"`
	Quantity      int                  `json:"quantity"`
	State         flashsale.OrderState `json:"state"`
	Version       int64                `json:"version"`
	CreatedAt     time.Time            `json:"createdAt"`
}

func orderOut(o *flashsale.Order) orderJSON {
	return orderJSON{OrderID: o.ID, ReservationID: o.ReservationID, SKU: o.SKU, UserID: o.UserID,
		Quantity: o.Quantity, State: o.State, Version: o.Version, CreatedAt: o.CreatedAt.UTC()}
}

func (s *Server) listOrders(w http.ResponseWriter, r *http.Request) {
	sku := r.URL.Query().Get("sku")
	if sku == "" {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "The sku query parameter is required."))
		return
	}
	if !flashsale.ValidSKU(sku) {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeNotFound, "No such sale."))
		return
	}
	sale, err := s.cfg.Store.SaleBySKU(r.Context(), sku)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	orders, err := s.cfg.Store.Orders(r.Context(), sale.ID)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	out := make([]orderJSON, len(orders))
	for i, o := range orders {
		out[i] = orderOut(o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": out})
}

// orderChangeBody is the optional body of an order move.
type orderChangeBody struct {
	Reason string `json:"reason"`
}

// changeOrder answers POST /admin/orders/{id}/{ship,cancel,refund}: the
// order moves to to only if it is still at the If-Match version (428
// without one, 412 when it moved since), and the answer is the order with
// its new version (also as ETag).
func (s *Server) changeOrder(to flashsale.OrderState) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b orderChangeBody
		if err := decode(w, r, &b, true); err != nil {
			writeError(w, s.cfg.Logger, r, err)
			return
		}
		version, err := ifMatch(r)
		if err != nil {
			writeError(w, s.cfg.Logger, r, err)
			return
		}
		reason := strings.TrimSpace(b.Reason)
		if len(reason) > 512 {
			writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "reason must be at most 512 characters."))
			return
		}
		o, err := s.cfg.Control.ChangeOrder(r.Context(), r.PathValue("id"), version, to, operator(r), reason)
		if err != nil {
			writeError(w, s.cfg.Logger, r, err)
			return
		}
		w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(o.Version, 10)))
		writeJSON(w, http.StatusOK, orderOut(o))
	}
}

// operator names who made an operator change, for the audit trail: the
// admin token identifies no one, so an X-Operator header may say who
// (letters, digits and ._@- only, at most 64), else "operator".
func operator(r *http.Request) string {
	name := strings.TrimSpace(r.Header.Get("X-Operator"))
	if name == "" || len(name) > 64 {
		return "operator"
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._@-", c)) {
			return "operator"
		}
	}
	return "operator:" + name
}

type findingJSON struct {
	OrderID       string               `json:"orderId"`
	OrderVersion  int64                `json:"orderVersion"`
	OrderState    flashsale.OrderState `json:"orderState"`
	ReservationID string               `json:"reservationId"`
	UserID        string               `json:"userId"`
	Quantity      int                  `json:"quantity"`
	Patterns      []string             `json:"patterns"`
	Cancel        bool                 `json:"cancel"`
	// Outcome, after a cancelling run: "cancelled", or why not.
	Outcome string `json:"outcome,omitempty"`
}

// automation audits the sale's orders for automation patterns; with
// cancel, it cancels those the published policy cancels (each through the
// normal order cancel: one conditional UPDATE on its version, the units
// returned exactly once).
func (s *Server) automation(cancel bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if cancel {
			if err := decode(w, r, &struct{}{}, true); err != nil {
				writeError(w, s.cfg.Logger, r, err)
				return
			}
		}
		ctx := r.Context()
		sale, err := s.cfg.Store.SaleBySKU(ctx, r.PathValue("sku"))
		if err != nil {
			writeError(w, s.cfg.Logger, r, err)
			return
		}
		attempts, err := s.cfg.Store.Attempts(ctx, sale.ID)
		if err != nil {
			writeError(w, s.cfg.Logger, r, err)
			return
		}
		held, err := s.cfg.Queue.Suspects(ctx, sale.ID)
		if err != nil {
			writeError(w, s.cfg.Logger, r, &flashsale.Error{Code: flashsale.CodeUnavailable, Message: "The waiting room's store did not answer.", Err: err})
			return
		}
		rep := audit.Analyze(sale, attempts, held, audit.Policy{})
		out := make([]findingJSON, len(rep.Findings))
		cancelled := 0
		for i, f := range rep.Findings {
			out[i] = findingJSON{OrderID: f.OrderID, OrderVersion: f.OrderVersion, OrderState: f.OrderState,
				ReservationID: f.ReservationID, UserID: f.UserID, Quantity: f.Quantity, Patterns: f.Patterns, Cancel: f.Cancel}
			if !cancel || !f.Cancel {
				continue
			}
			o, err := s.cfg.Control.ChangeOrder(ctx, f.OrderID, f.OrderVersion, flashsale.OrderCancelled,
				"automation-audit", "matches automation patterns: "+strings.Join(f.Patterns, "; "))
			if err != nil {
				out[i].Outcome = flashsale.ErrorMessage(err)
				continue
			}
			out[i].Outcome, out[i].OrderState, out[i].OrderVersion = "cancelled", o.State, o.Version
			cancelled++
		}
		writeJSON(w, http.StatusOK, map[string]any{"sku": sale.SKU, "orders": rep.Orders, "findings": out,
			"cancelled": cancelled, "policy": waitroom.AutomationPolicy})
	}
}

// figures is where a sale view reads the figures that are not the sale's
// own: the gate's counter, the record's totals and outbox, the queue.
type figures interface {
	gate(ctx context.Context, sale *flashsale.Sale) (flashsale.GateSnapshot, error)
	totals(ctx context.Context, sale *flashsale.Sale) (flashsale.SaleTotals, error)
	// outbox reports ok false when the figures were not read (not an
	// error: the view leaves them out).
	outbox(ctx context.Context, sale *flashsale.Sale) (st flashsale.OutboxStats, ok bool, err error)
	issued(ctx context.Context, sale *flashsale.Sale) (int64, error)
	admitted(ctx context.Context, sale *flashsale.Sale) (int64, error)
	draw(ctx context.Context, sale *flashsale.Sale) (*flashsale.Draw, error)
	suspects(ctx context.Context, sale *flashsale.Sale) (int, error)
	invites(ctx context.Context, sale *flashsale.Sale) (flashsale.InviteCounts, error)
}

// direct reads every figure from where it is kept, at each call: the
// operator's one-off GET.
type direct struct{ s *Server }

func (d direct) gate(ctx context.Context, sale *flashsale.Sale) (flashsale.GateSnapshot, error) {
	return d.s.cfg.Gate.Snapshot(ctx, sale.ID)
}

func (d direct) totals(ctx context.Context, sale *flashsale.Sale) (flashsale.SaleTotals, error) {
	return d.s.cfg.Store.SaleTotals(ctx, sale.ID)
}

func (d direct) outbox(ctx context.Context, sale *flashsale.Sale) (flashsale.OutboxStats, bool, error) {
	st, err := d.s.cfg.Store.OutboxStats(ctx, sale.ID)
	return st, err == nil, err
}

func (d direct) issued(ctx context.Context, sale *flashsale.Sale) (int64, error) {
	return d.s.cfg.Queue.Len(ctx, sale.ID)
}

func (d direct) admitted(ctx context.Context, sale *flashsale.Sale) (int64, error) {
	return d.s.cfg.Queue.Admitted(ctx, sale.ID)
}

func (d direct) draw(ctx context.Context, sale *flashsale.Sale) (*flashsale.Draw, error) {
	return d.s.cfg.Store.Draw(ctx, sale.ID)
}

func (d direct) suspects(ctx context.Context, sale *flashsale.Sale) (int, error) {
	held, err := d.s.cfg.Queue.Suspects(ctx, sale.ID)
	return len(held), err
}

func (d direct) invites(ctx context.Context, sale *flashsale.Sale) (flashsale.InviteCounts, error) {
	return d.s.cfg.Store.InviteCounts(ctx, sale.ID)
}

type invitesJSON struct {
	Issued   int64 `json:"issued"`
	Redeemed int64 `json:"redeemed"`
	Won      int64 `json:"won"`
}

type issueInvitesBody struct {
	Count *int `json:"count"`
}

// issueInvites issues a batch of invite codes for the sale (contract: POST
// /admin/sales/{sku}/invites). The codes are in this answer only: the
// record keeps their hashes, so a lost answer is a lost batch (issue
// another; the lost codes can never be redeemed by anyone who did not
// see them).
func (s *Server) issueInvites(w http.ResponseWriter, r *http.Request) {
	var b issueInvitesBody
	if err := decode(w, r, &b, false); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	if b.Count == nil || *b.Count < 1 || *b.Count > flashsale.MaxInvites {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "count must be between 1 and %d.", flashsale.MaxInvites))
		return
	}
	sale, err := s.cfg.Store.SaleBySKU(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	if sale.StateAt(s.cfg.Now()) == flashsale.SaleClosed {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeClosed, "The sale has closed."))
		return
	}
	codes := make([]string, *b.Count)
	hashes := make([]string, *b.Count)
	for i := range codes {
		codes[i] = flashsale.NewInviteCode()
		hashes[i] = flashsale.InviteHash(codes[i])
	}
	by := operator(r)
	if err := s.cfg.Store.IssueInvites(r.Context(), sale, hashes, by, s.cfg.Now()); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	// Never the codes in the log: only how many, and by whom.
	s.cfg.Logger.Info("invites issued", "sku", sale.SKU, "sale", sale.ID, "count", len(codes), "by", by)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, map[string][]string{"codes": codes})
}
