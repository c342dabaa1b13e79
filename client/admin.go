package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Admin is the client speaking for an operator, with the admin token
// (empty for a server with none configured, which answers its operator
// routes on loopback only). Safe for concurrent use.
type Admin struct {
	c        *Client
	token    string
	operator string
}

// Admin returns the client speaking for an operator with token.
func (c *Client) Admin(token string) *Admin { return &Admin{c: c, token: token} }

// WithOperator returns a copy of a that names the operator in the audit
// trail of the orders it moves (X-Operator; letters, digits and ._@-, at
// most 64; the server records "operator" otherwise).
func (a *Admin) WithOperator(name string) *Admin {
	b := *a
	b.operator = name
	return &b
}

// Client returns the client the operator speaks through.
func (a *Admin) Client() *Client { return a.c }

func (a *Admin) header() http.Header {
	h := bearerHeader(a.token)
	if a.operator != "" {
		h.Set("X-Operator", a.operator)
	}
	return h
}

func ifMatch(h http.Header, version int64) http.Header {
	h.Set("If-Match", strconv.Quote(strconv.FormatInt(version, 10)))
	return h
}

func limitQuery(limit int) url.Values {
	if limit <= 0 {
		return nil
	}
	return url.Values{"limit": {strconv.Itoa(limit)}}
}

// saleCall sends an operator request whose answer is a sale's view.
func (a *Admin) saleCall(ctx context.Context, k *call) (*SaleView, error) {
	k.header = a.header()
	var v SaleView
	if _, err := a.c.do(ctx, k, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// CreateSale creates a sale: POST /admin/sales. It returns the sale with
// its saleId and version. ErrSaleExists while another sale for the SKU is
// scheduled or open; ErrBadRequest for a field out of range. It is not
// repeated after a lost answer (a repeat would find the sale it made):
// read the sale to find out.
func (a *Admin) CreateSale(ctx context.Context, s NewSale) (*SaleView, error) {
	return a.saleCall(ctx, &call{method: http.MethodPost, path: "/admin/sales", body: s})
}

// Sales returns every sale with its live figures: GET /admin/sales.
func (a *Admin) Sales(ctx context.Context) ([]SaleView, error) {
	var out struct {
		Sales []SaleView `json:"sales"`
	}
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/sales", header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return out.Sales, nil
}

// Sale returns the sale with its live figures: GET /admin/sales/{sku}.
func (a *Admin) Sale(ctx context.Context, sku string) (*SaleView, error) {
	return a.saleCall(ctx, &call{method: http.MethodGet, path: "/admin/sales/" + seg(sku), repeatable: true})
}

// UpdateSale changes the sale if it is still at version (If-Match):
// PATCH /admin/sales/{sku}. It returns the sale with its new version.
// ErrVersionConflict when it moved since it was read (read it again);
// ErrBadRequest for a change the sale's state forbids.
func (a *Admin) UpdateSale(ctx context.Context, sku string, version int64, p SalePatch) (*SaleView, error) {
	k := &call{method: http.MethodPatch, path: "/admin/sales/" + seg(sku), body: p}
	k.header = ifMatch(a.header(), version)
	var v SaleView
	if _, err := a.c.do(ctx, k, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Pause pauses the sale, with the reason the operator view shows (empty:
// the server's): POST /admin/sales/{sku}/pause.
func (a *Admin) Pause(ctx context.Context, sku, reason string) (*SaleView, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	return a.saleCall(ctx, &call{method: http.MethodPost, path: "/admin/sales/" + seg(sku) + "/pause", body: body})
}

// Resume resumes a paused sale: POST /admin/sales/{sku}/resume.
// ErrRebuildRequired when the gate lost the counter: Rebuild first.
func (a *Admin) Resume(ctx context.Context, sku string) (*SaleView, error) {
	return a.saleCall(ctx, &call{method: http.MethodPost, path: "/admin/sales/" + seg(sku) + "/resume"})
}

// Rebuild reloads a paused sale's counter into the gate from the record:
// POST /admin/sales/{sku}/rebuild. ErrNotPaused unless the sale is paused.
func (a *Admin) Rebuild(ctx context.Context, sku string) (*SaleView, error) {
	return a.saleCall(ctx, &call{method: http.MethodPost, path: "/admin/sales/" + seg(sku) + "/rebuild"})
}

// Audit returns the newest entries of the gate's log of the sale's
// counter (limit 0: the server's default): GET /admin/sales/{sku}/audit.
func (a *Admin) Audit(ctx context.Context, sku string, limit int) (*AuditLog, error) {
	var out AuditLog
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/sales/" + seg(sku) + "/audit",
		query: limitQuery(limit), header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Automation audits the sale's orders for automation patterns: GET
// /admin/sales/{sku}/automation.
func (a *Admin) Automation(ctx context.Context, sku string) (*AutomationReport, error) {
	var out AutomationReport
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/sales/" + seg(sku) + "/automation",
		header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelAutomation audits the sale's orders and cancels those the
// published policy cancels, their units returning to stock: POST
// /admin/sales/{sku}/automation/cancel.
func (a *Admin) CancelAutomation(ctx context.Context, sku string) (*AutomationReport, error) {
	var out AutomationReport
	if _, err := a.c.do(ctx, &call{method: http.MethodPost, path: "/admin/sales/" + seg(sku) + "/automation/cancel",
		header: a.header()}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SaleEvents returns the sale's events, oldest first, with their delivery
// state (limit 0: the server's default): GET /admin/sales/{sku}/events.
func (a *Admin) SaleEvents(ctx context.Context, sku string, limit int) ([]Event, error) {
	var out struct {
		Events []Event `json:"events"`
	}
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/sales/" + seg(sku) + "/events",
		query: limitQuery(limit), header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// IssueInvites issues count single-use invite codes for the sale (1 to
// 10,000): POST /admin/sales/{sku}/invites. The codes are shown this once
// (the server keeps them hashed). Not repeated after a lost answer, which
// would issue another batch.
func (a *Admin) IssueInvites(ctx context.Context, sku string, count int) ([]string, error) {
	var out struct {
		Codes []string `json:"codes"`
	}
	if _, err := a.c.do(ctx, &call{method: http.MethodPost, path: "/admin/sales/" + seg(sku) + "/invites",
		header: a.header(), body: map[string]int{"count": count}}, &out); err != nil {
		return nil, err
	}
	return out.Codes, nil
}

// Orders returns the sale's orders: GET /admin/orders?sku=….
func (a *Admin) Orders(ctx context.Context, sku string) ([]Order, error) {
	var out struct {
		Orders []Order `json:"orders"`
	}
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/orders", query: url.Values{"sku": {sku}},
		header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return out.Orders, nil
}

// moveOrder is POST /admin/orders/{id}/{move} at version.
func (a *Admin) moveOrder(ctx context.Context, move, id string, version int64, reason string) (*Order, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	k := &call{method: http.MethodPost, path: "/admin/orders/" + seg(id) + "/" + move, body: body}
	k.header = ifMatch(a.header(), version)
	var o Order
	if _, err := a.c.do(ctx, k, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Ship marks a confirmed order shipped if it is still at version: POST
// /admin/orders/{id}/ship. It returns the order with its new version.
// ErrVersionConflict when it moved since (nothing changes); ErrInvalidState
// when its state forbids it. reason (optional) goes in the audit trail.
func (a *Admin) Ship(ctx context.Context, id string, version int64, reason string) (*Order, error) {
	return a.moveOrder(ctx, "ship", id, version, reason)
}

// CancelOrder cancels a confirmed order if it is still at version,
// returning its units to the sale's stock exactly once: POST
// /admin/orders/{id}/cancel. Errors as Ship.
func (a *Admin) CancelOrder(ctx context.Context, id string, version int64, reason string) (*Order, error) {
	return a.moveOrder(ctx, "cancel", id, version, reason)
}

// Refund refunds a confirmed or shipped order if it is still at version,
// returning its units to the sale's stock exactly once: POST
// /admin/orders/{id}/refund. Errors as Ship.
func (a *Admin) Refund(ctx context.Context, id string, version int64, reason string) (*Order, error) {
	return a.moveOrder(ctx, "refund", id, version, reason)
}

// OrderHistory returns the order and its audit trail: GET
// /admin/orders/{id}/history.
func (a *Admin) OrderHistory(ctx context.Context, id string) (*OrderHistory, error) {
	var out OrderHistory
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/orders/" + seg(id) + "/history",
		header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Outbox returns the outbox's figures over all sales: GET /admin/outbox.
func (a *Admin) Outbox(ctx context.Context) (*OutboxStats, error) {
	var out OutboxStats
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/outbox", header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeadEvents returns the outbox's dead letters, newest first (limit 0:
// the server's default): GET /admin/outbox/dead.
func (a *Admin) DeadEvents(ctx context.Context, limit int) ([]Event, error) {
	var out struct {
		Events []Event `json:"events"`
	}
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/outbox/dead", query: limitQuery(limit),
		header: a.header(), repeatable: true}, &out); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// Replay makes a dead letter pending again, due now, its attempts reset:
// POST /admin/outbox/{id}/replay. ErrNotFound for no such event;
// ErrInvalidState for one that is not dead.
func (a *Admin) Replay(ctx context.Context, eventID string) (*Event, error) {
	var out Event
	if _, err := a.c.do(ctx, &call{method: http.MethodPost, path: "/admin/outbox/" + seg(eventID) + "/replay",
		header: a.header()}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EdgeSnapshots returns what an edge fetches from its origin (GET
// /admin/edge/snapshots, of every active sale or of sku alone), as the
// JSON the edge decodes into its own types; edgeID, when set, names the
// edge in the operator's view (X-Edge-ID).
func (a *Admin) EdgeSnapshots(ctx context.Context, sku, edgeID string) (json.RawMessage, error) {
	var raw []byte
	h := a.header()
	if edgeID != "" {
		h.Set("X-Edge-ID", edgeID)
	}
	var q url.Values
	if sku != "" {
		q = url.Values{"sku": {sku}}
	}
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/admin/edge/snapshots", query: q, header: h,
		repeatable: true, raw: &raw}, nil); err != nil {
		return nil, err
	}
	return raw, nil
}

// Metrics returns the server's Prometheus text: GET /metrics (which needs
// the admin token where one is configured).
func (a *Admin) Metrics(ctx context.Context) ([]byte, error) {
	var raw []byte
	if _, err := a.c.do(ctx, &call{method: http.MethodGet, path: "/metrics", header: a.header(), repeatable: true, raw: &raw}, nil); err != nil {
		return nil, err
	}
	return raw, nil
}

// LiveEvent is one event of a sale's live stream: Event is its name
// ("sale": the sale's live figures), Data its JSON.
type LiveEvent struct {
	Event string
	ID    string
	Data  json.RawMessage
}

// Sale decodes a "sale" event's figures: those of the sale's view; the
// rates of the last seconds stay in Data for a caller that wants them.
func (e LiveEvent) Sale() (*SaleView, error) {
	var v SaleView
	if err := json.Unmarshal(e.Data, &v); err != nil {
		return nil, fmt.Errorf("flashsale client: live event %q: %w", e.Event, err)
	}
	return &v, nil
}

// Live follows the sale's live figures (GET /admin/sales/{sku}/live, a
// text/event-stream with an event "sale" at least once a second), calling
// fn with each event until ctx is done (then it returns ctx.Err()), fn
// returns an error (returned as is), or the server ends the stream (nil).
// It does not reconnect: call LiveAfter with the last event's ID. The
// client's HTTP timeout, if it has one, cuts the stream too; give Live a
// client without one.
func (a *Admin) Live(ctx context.Context, sku string, fn func(LiveEvent) error) error {
	return a.LiveAfter(ctx, sku, "", fn)
}

// LiveAfter is Live reconnecting after the event whose ID is lastEventID
// (Last-Event-ID; "" is Live): a server that still keeps the events after
// it sends them first, so that a stream cut by a restart or a deploy
// misses none it can give.
func (a *Admin) LiveAfter(ctx context.Context, sku, lastEventID string, fn func(LiveEvent) error) error {
	path := "/admin/sales/" + seg(sku) + "/live"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.c.base+path, nil)
	if err != nil {
		return fmt.Errorf("flashsale client: GET %s: %w", path, err)
	}
	for k, v := range a.header() {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", a.c.userAgent)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := a.c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("flashsale client: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var data []byte
		data, _ = readSome(resp)
		return a.c.errorOf(resp, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var ev LiveEvent
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 {
				if ev.Event == "" {
					ev.Event = "message"
				}
				ev.Data = json.RawMessage(strings.TrimSuffix(data.String(), "\n"))
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev = LiveEvent{}
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment, to keep the connection alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Event = value
		case "id":
			ev.ID = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("flashsale client: GET %s: %w", path, err)
	}
	return nil
}
