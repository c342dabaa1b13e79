package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/flashsale/flashsale"
)

// The operator's view of the outbox: what is waiting, what died, and the
// way back for a dead letter.

type outboxJSON struct {
	Pending int64 `json:"pending"`
	// OldestPendingAt is when the oldest pending event was written;
	// LagSeconds is its age now.
	OldestPendingAt *time.Time `json:"oldestPendingAt"`
	LagSeconds      float64    `json:"lagSeconds"`
	Dead            int64      `json:"dead"`
}

func outboxOut(st flashsale.OutboxStats, now time.Time) *outboxJSON {
	return &outboxJSON{Pending: st.Pending, OldestPendingAt: timePtr(st.OldestPending),
		LagSeconds: st.Lag(now).Seconds(), Dead: st.Dead}
}

type eventJSON struct {
	EventID       string              `json:"eventId"`
	Type          flashsale.EventType `json:"type"`
	SaleID        string              `json:"saleId"`
	CreatedAt     time.Time           `json:"createdAt"`
	Attempts      int                 `json:"attempts"`
	NextAttemptAt *time.Time          `json:"nextAttemptAt,omitempty"`
	PublishedAt   *time.Time          `json:"publishedAt,omitempty"`
	DeadAt        *time.Time          `json:"deadAt,omitempty"`
	// LastError is the sink's answer to the last failed delivery.
	LastError string          `json:"lastError,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

func eventOut(e *flashsale.OutboxEvent) eventJSON {
	out := eventJSON{EventID: e.ID, Type: e.Type, SaleID: e.SaleID, CreatedAt: e.CreatedAt.UTC(), Attempts: e.Attempts,
		PublishedAt: timePtr(e.PublishedAt), DeadAt: timePtr(e.DeadAt), LastError: e.LastError, Payload: e.Payload}
	if e.Pending() {
		out.NextAttemptAt = timePtr(e.NextAttemptAt)
	}
	if !json.Valid(out.Payload) {
		out.Payload = json.RawMessage("null")
	}
	return out
}

func eventsOut(evs []*flashsale.OutboxEvent) []eventJSON {
	out := make([]eventJSON, len(evs))
	for i, e := range evs {
		out[i] = eventOut(e)
	}
	return out
}

// limitParam reads ?limit= (default def, from 1 to 10000).
func limitParam(r *http.Request, def int) (int, error) {
	q := r.URL.Query().Get("limit")
	if q == "" {
		return def, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > 10000 {
		return 0, flashsale.Errorf(flashsale.CodeBadRequest, "limit must be from 1 to 10000.")
	}
	return n, nil
}

// outboxStats answers GET /admin/outbox: the figures of every sale's
// events.
func (s *Server) outboxStats(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.Store.OutboxStats(r.Context(), "")
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, outboxOut(st, s.cfg.Now()))
}

// deadEvents answers GET /admin/outbox/dead?limit=N (default 100): the
// dead letters, newest first.
func (s *Server) deadEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r, 100)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	evs, err := s.cfg.Store.DeadEvents(r.Context(), limit)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": eventsOut(evs)})
}

// replayEvent answers POST /admin/outbox/{id}/replay: a dead letter is
// pending again, due now, with its attempts reset. 404 for no such event,
// 409 invalid_state for one that is not dead.
func (s *Server) replayEvent(w http.ResponseWriter, r *http.Request) {
	if err := decode(w, r, &struct{}{}, true); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	e, err := s.cfg.Store.ReplayEvent(r.Context(), r.PathValue("id"), s.cfg.Now())
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	s.cfg.Logger.Warn("outbox: dead letter replayed by an operator", "event", e.ID, "type", e.Type, "operator", operator(r))
	writeJSON(w, http.StatusOK, eventOut(e))
}

// saleEvents answers GET /admin/sales/{sku}/events?limit=N (default 100):
// the sale's events, oldest first, with their delivery state.
func (s *Server) saleEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r, 100)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	sale, err := s.cfg.Store.SaleBySKU(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	evs, err := s.cfg.Store.SaleEvents(r.Context(), sale.ID, limit)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sku": sale.SKU, "events": eventsOut(evs)})
}

type transitionJSON struct {
	From    flashsale.OrderState `json:"from,omitempty"`
	To      flashsale.OrderState `json:"to"`
	Actor   string               `json:"actor"`
	Reason  string               `json:"reason,omitempty"`
	Version int64                `json:"version"`
	At      time.Time            `json:"at"`
	EventID string               `json:"eventId"`
}

// orderHistory answers GET /admin/orders/{id}/history: the order's audit
// trail, oldest first.
func (s *Server) orderHistory(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	o, err := s.cfg.Store.Order(r.Context(), id)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	history, err := s.cfg.Store.OrderHistory(r.Context(), id)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	out := make([]transitionJSON, len(history))
	for i, t := range history {
		out[i] = transitionJSON{From: t.From, To: t.To, Actor: t.Actor, Reason: t.Reason, Version: t.Version, At: t.At.UTC(), EventID: t.EventID}
	}
	writeJSON(w, http.StatusOK, map[string]any{"order": orderOut(o), "history": out})
}
