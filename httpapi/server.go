// Package httpapi is the HTTP face of the engine, exactly as the public
// contract (shared/contract.md) describes it: the shopper routes of the
// funnel, the operator routes under /admin/, and the plumbing (/healthz,
// /readyz, /metrics). It maps every error code to its status in one table
// and never lets an internal detail reach a response.
//
// Overselling is neither prevented nor caused here: the routes call package
// purchase, which asks the gate (packages memory and redis, where it is
// prevented), and package control, whose rebuild and order moves are where
// it could be caused (through package restock).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/bulkhead"
	"github.com/flashsale/flashsale/catalog"
	"github.com/flashsale/flashsale/control"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/tally"
	"github.com/flashsale/flashsale/invariant"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/purchase"
	"github.com/flashsale/flashsale/sdk"
	"github.com/flashsale/flashsale/waitroom"
)

// Roles a server can play.
const (
	// RoleAll is one process doing everything (the embedded default).
	RoleAll = "all"
	// RoleEdge answers the waiting room (sale, ticket, status, register,
	// draw, the page) from signed tokens and snapshots fetched from the
	// origin; it never reaches the gate or the record.
	RoleEdge = "edge"
	// RoleOrigin runs the purchase path, the operator routes and the
	// background services, and gives the edges their snapshots.
	RoleOrigin = "origin"
)

// Config wires the server to the services. An edge needs Room and
// Shoppers; an origin everything but Page.
type Config struct {
	Role     string
	Room     *waitroom.Room
	Shoppers *identity.Verifier
	// Page serves the waiting room's web page and its assets.
	Page http.Handler
	// MintDemoToken, when set, registers GET /demo/token?user=NAME beside
	// the page: it mints a shopper JWT for anyone, so the engine sets it
	// only for a --demo server whose shoppers are verified with the
	// well-known development key (with which anyone can mint anyway).
	MintDemoToken func(user string) (token string, ttl time.Duration, err error)
	// Console serves the operator's console at /admin/ and its files
	// under /admin/assets/ (package console).
	Console http.Handler

	Catalog    *catalog.Catalog
	Purchase   *purchase.Service
	Control    *control.Service
	Watcher    *invariant.Watcher
	Warmer     *control.Warmer
	Store      flashsale.Store
	Gate       flashsale.GateAdmin
	Queue      waitroom.Queue
	Snapshots  *waitroom.OriginSnapshots
	Pacer      *waitroom.Pacer
	AdminToken string
	// CORSOrigins are the origins (scheme://host[:port], see
	// ParseCORSOrigins) whose pages may call the shopper routes from a
	// browser: a shop's storefront using the JavaScript SDK (cors.go).
	// Empty: none but this server's own pages.
	CORSOrigins []string
	// MetricsApart leaves /metrics off this handler: it is served on a
	// listener of its own (PublicMetrics). Otherwise /metrics is guarded
	// as the operator routes are.
	MetricsApart bool
	// InFlight bounds the purchase routes (reserve, and get, confirm and
	// cancel of a reservation): a request that finds no slot is answered
	// 503 overloaded before it does any work. Nil bounds nothing.
	InFlight *bulkhead.Bulkhead
	// RoomInFlight bounds each sale's waiting-room requests (ticket,
	// status, admission, registration) in progress at once, keyed by the
	// SKU: past a sale's share, a request waits parked, using no
	// processor, and is shed 503 overloaded if it waits too long. Without
	// it, one sale's crowd keeps enough requests runnable to hold every
	// processor, and another sale's shoppers wait their turn behind it.
	// Nil bounds nothing.
	RoomInFlight *bulkhead.Bulkhead
	// AccountInFlight, keyed by a sale (or ReservationRoutes) and a user,
	// gives each account one purchase request in flight per sale before
	// it may take one of InFlight's shared slots; its others wait briefly
	// or are told 429 rate_limited. Nil bounds nothing.
	AccountInFlight *bulkhead.Bulkhead
	// TrustClientInstrument counts a reserve body's paymentFingerprint
	// towards the per-instrument limits when the shopper's JWT carries no
	// instrument. Off, only the JWT's claim counts: the body is the
	// shopper's to write. For a demo, or a store whose front end computes
	// the fingerprint itself.
	TrustClientInstrument bool
	// Ready reports whether an edge can answer (its snapshots are fresh);
	// the origin asks its stores instead.
	Ready   func(ctx context.Context) error
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Server serves the API. Safe for concurrent use.
type Server struct {
	cfg        Config
	mux        *http.ServeMux
	rejections rejections
	edges      edgeRegistry
	// flight joins concurrent copies of one purchase request.
	flight singleflight.Group
	// live produces the live feed (live.go); nil at an edge.
	live *liveHub
	// cors is the allow-list of storefront origins (cors.go).
	cors corsPolicy
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Role == "" {
		cfg.Role = RoleAll
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), cors: newCORSPolicy(cfg.CORSOrigins)}
	if cfg.Role != RoleEdge {
		s.live = newLiveHub(s)
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	m := s.mux
	edge := s.cfg.Role == RoleAll || s.cfg.Role == RoleEdge
	origin := s.cfg.Role == RoleAll || s.cfg.Role == RoleOrigin

	// The waiting room, cheapest first.
	if edge {
		m.HandleFunc("GET /sale/{sku}/ticket", s.getTicket)
		m.HandleFunc("GET /sale/{sku}/status", s.getStatus)
		m.HandleFunc("POST /sale/{sku}/register", s.postRegister)
		m.HandleFunc("POST /sale/{sku}/admission", s.postAdmission)
		if s.cfg.Page != nil {
			m.Handle("GET /sale/{sku}/{$}", s.cfg.Page)
			m.Handle("GET /assets/", s.cfg.Page)
		}
		if s.cfg.MintDemoToken != nil {
			m.HandleFunc("GET /demo/token", s.getDemoToken)
		}
	}
	m.HandleFunc("GET /sale/{sku}", s.getSale)
	m.HandleFunc("GET /sale/{sku}/draw", s.getDraw)
	// The JavaScript SDK, for a shop's storefront and for the page, which
	// is built on it: static files, served by every role, so that a
	// balancer that sends an unknown path to the origins still finds it.
	m.Handle("GET "+sdk.Prefix, sdkHandler)

	if origin {
		// The purchase path.
		m.HandleFunc("POST /sale/{sku}/reserve", s.countReserves(s.postReserve))
		// Redeeming binds a code in the record, so it is the origin's.
		m.HandleFunc("POST /sale/{sku}/redeem", s.postRedeem)
		m.HandleFunc("GET /reservations/{id}", s.getReservation)
		m.HandleFunc("POST /reservations/{id}/confirm", s.postConfirm)
		m.HandleFunc("DELETE /reservations/{id}", s.deleteReservation)

		// Operator routes.
		m.HandleFunc("POST /admin/sales", s.admin(s.createSale))
		m.HandleFunc("GET /admin/sales", s.admin(s.listSales))
		m.HandleFunc("GET /admin/sales/{sku}", s.admin(s.showSale))
		m.HandleFunc("GET /admin/sales/{sku}/live", s.admin(s.liveSale))
		m.HandleFunc("GET /admin/live", s.admin(s.liveList))
		m.HandleFunc("PATCH /admin/sales/{sku}", s.admin(s.patchSale))
		m.HandleFunc("POST /admin/sales/{sku}/pause", s.admin(s.pauseSale))
		m.HandleFunc("POST /admin/sales/{sku}/resume", s.admin(s.resumeSale))
		m.HandleFunc("POST /admin/sales/{sku}/rebuild", s.admin(s.rebuildSale))
		m.HandleFunc("POST /admin/sales/{sku}/invites", s.admin(s.issueInvites))
		m.HandleFunc("GET /admin/sales/{sku}/audit", s.admin(s.auditSale))
		m.HandleFunc("GET /admin/sales/{sku}/automation", s.admin(s.automation(false)))
		m.HandleFunc("POST /admin/sales/{sku}/automation/cancel", s.admin(s.automation(true)))
		m.HandleFunc("GET /admin/orders", s.admin(s.listOrders))
		m.HandleFunc("POST /admin/orders/{id}/ship", s.admin(s.changeOrder(flashsale.OrderShipped)))
		m.HandleFunc("POST /admin/orders/{id}/cancel", s.admin(s.changeOrder(flashsale.OrderCancelled)))
		m.HandleFunc("POST /admin/orders/{id}/refund", s.admin(s.changeOrder(flashsale.OrderRefunded)))
		m.HandleFunc("GET /admin/orders/{id}/history", s.admin(s.orderHistory))
		m.HandleFunc("GET /admin/sales/{sku}/events", s.admin(s.saleEvents))
		m.HandleFunc("GET /admin/outbox", s.admin(s.outboxStats))
		m.HandleFunc("GET /admin/outbox/dead", s.admin(s.deadEvents))
		m.HandleFunc("POST /admin/outbox/{id}/replay", s.admin(s.replayEvent))
		m.HandleFunc("GET "+waitroom.SnapshotsPath, s.admin(s.edgeSnapshots))
		if s.cfg.Console != nil {
			m.Handle("GET /admin/{$}", s.consolePage(s.cfg.Console))
			m.Handle("GET /admin/assets/", s.consolePage(s.cfg.Console))
		}
		m.HandleFunc("/admin/", s.unmatched(s.admin(s.notFound)))
	}

	// Plumbing.
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "role": s.cfg.Role})
	})
	m.HandleFunc("GET /readyz", s.readyz)
	if s.cfg.Metrics != nil && !s.cfg.MetricsApart {
		m.HandleFunc("GET /metrics", s.admin(s.metricsHandler().ServeHTTP))
	}
	m.HandleFunc("/", s.unmatched(s.notFound))
}

// ServeHTTP implements http.Handler: the mux, with panics recovered into
// 500s, method errors as JSON, and a metric per request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// The recorder is pooled, as every poll needs one: nothing keeps it
	// past ServeHTTP (the mux's handlers return before it does, the live
	// feed's too), so it goes back when the request is done.
	rec := recorders.Get().(*statusRecorder)
	*rec = statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		*rec = statusRecorder{}
		recorders.Put(rec)
	}()
	// Every call the request makes to the record is counted, so that the
	// funnel's promise (a rejection costs the database nothing) is a
	// metric, not a belief. An edge has no record, and its polls do not
	// pay for the count.
	var calls *tally.Request
	if s.cfg.Store != nil {
		calls = &tally.Request{}
		r = r.WithContext(tally.With(r.Context(), calls))
	}
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("panic serving request", "method", r.Method, "path", r.URL.Path,
				"panic", p, "stack", string(debug.Stack()))
			if !rec.wrote {
				writeError(rec, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeInternal, "internal error"))
			}
		}
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		s.cfg.Metrics.Request(route, rec.status, time.Since(start))
		if calls != nil {
			s.cfg.Metrics.RecordCalls(route, rec.status >= 400, calls.Calls())
		}
	}()
	if s.applyCORS(rec, r) {
		r.Pattern = "OPTIONS (CORS preflight)" // the metric's route
		return
	}
	if unclean(r.URL.Path) {
		// The mux would redirect to the cleaned path with an HTML body; a
		// path with "." or ".." segments or doubled slashes names no route
		// of the contract, so it is answered as such, in JSON.
		writeError(rec, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeNotFound, "No such route."))
		return
	}
	if err := screen(r); err != nil {
		writeError(rec, s.cfg.Logger, r, err)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// unclean reports whether p is not in the form the mux routes without a
// redirect: cheap for the common, clean path.
func unclean(p string) bool {
	if !strings.Contains(p, "/.") && !strings.Contains(p, "//") {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c != p
}

// unmatched wraps the catch-all routes, which the mux reaches only when no
// route matched: it tells a wrong method on a known path (405) from an
// unknown path (404), both in the contract's error shape, before next.
// Doing it here, and not ahead of the mux, keeps the requests that do
// match (every poll) to one routing.
func (s *Server) unmatched(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if allowed := s.allowed(r); allowed != "" {
			w.Header().Set("Allow", allowed)
			writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeMethodNotAllowed, "This route does not take %s.", r.Method))
			return
		}
		next(w, r)
	}
}

// allowed returns the methods the mux serves for r's path, or "".
func (s *Server) allowed(r *http.Request) string {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(context.Background())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" && pattern != "/admin/" {
			methods = append(methods, m)
		}
	}
	return strings.Join(methods, ", ")
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeNotFound, "No such route."))
}

var recorders = sync.Pool{New: func() any { return new(statusRecorder) }}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the writer underneath, to flush
// the live feed's events and set its deadlines.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	status := map[string]string{}
	code := http.StatusOK
	check := func(name string, err error) {
		status[name] = "ok"
		if err != nil {
			status[name], code = "unavailable", http.StatusServiceUnavailable
			s.cfg.Logger.Warn("readyz", "part", name, "err", err)
		}
	}
	if s.cfg.Store != nil {
		check("record", s.cfg.Store.Ping(ctx))
	}
	if s.cfg.Gate != nil {
		check("gate", s.cfg.Gate.Ping(ctx))
	}
	if s.cfg.Ready != nil {
		check("origin", s.cfg.Ready(ctx))
	}
	if code != http.StatusOK {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, code, status)
}

// rejections counts, per sale, the requests told no by code, for the
// operator's view.
type rejections struct {
	m sync.Map // sku -> *sync.Map(code -> *atomic.Int64)
}

// add counts a rejection against sku. A SKU not yet counted is counted
// only if cat holds a sale for it: the path is the client's to choose, and
// counting every SKU anyone sends would keep each of them for good. (An
// edge has no catalog and no operator view: it counts nothing here.)
func (rj *rejections) add(sku string, code flashsale.Code, cat *catalog.Catalog) {
	v, ok := rj.m.Load(sku)
	if !ok {
		if cat == nil || !cat.Known(sku) {
			return
		}
		v, _ = rj.m.LoadOrStore(sku, &sync.Map{})
	}
	codes := v.(*sync.Map)
	c, ok := codes.Load(code)
	if !ok {
		c, _ = codes.LoadOrStore(code, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

func (rj *rejections) of(sku string) map[string]int64 {
	out := map[string]int64{}
	v, ok := rj.m.Load(sku)
	if !ok {
		return out
	}
	v.(*sync.Map).Range(func(k, c any) bool {
		out[string(k.(flashsale.Code))] = c.(*atomic.Int64).Load()
		return true
	})
	return out
}

// layerOf names the funnel layer that rejects with a code, for metrics.
func layerOf(code flashsale.Code) string {
	switch code {
	case flashsale.CodeInvalidToken, flashsale.CodeClosed:
		return metrics.LayerQueue
	case flashsale.CodeAdmissionRequired, flashsale.CodeAdmissionInvalid, flashsale.CodeAdmissionExpired,
		flashsale.CodeChallengeFailed:
		return metrics.LayerAdmission
	case flashsale.CodeNotEligible, flashsale.CodeRateLimited, flashsale.CodeUnauthenticated, flashsale.CodeBadRequest,
		flashsale.CodeTooLarge, flashsale.CodeIdempotencyKeyReused:
		return metrics.LayerEligibility
	case flashsale.CodeSoldOut, flashsale.CodeLimitReached, flashsale.CodeAdmissionUsed, flashsale.CodeSalePaused:
		return metrics.LayerGate
	case flashsale.CodeOverloaded:
		return metrics.LayerCapacity
	}
	return metrics.LayerRecord
}

// reject answers a funnel rejection and counts it against the sale, if
// the SKU names one.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, sku string, err error) {
	code := flashsale.ErrorCode(err)
	if sku != "" {
		s.rejections.add(sku, code, s.cfg.Catalog)
	}
	s.cfg.Metrics.Rejection(layerOf(code), string(code))
	writeError(w, s.cfg.Logger, r, err)
}
