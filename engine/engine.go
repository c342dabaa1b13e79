// Package engine assembles a flash-sale server from its parts: the record
// (SQLite or PostgreSQL), the stock gate (in process or Redis), the waiting
// room, the purchase path, the operator's controls and the background
// services (warmer, sweeper, invariant watcher, outbox relay), behind the
// HTTP API.
//
// The sale is isolated from everything else the server does: the purchase
// path and the background work (and the operator) reach PostgreSQL through
// pools of their own, and the purchase path holds a bounded number of
// requests in flight, a bounded share of them per sale, shedding the rest
// with 503 overloaded (package bulkhead).
//
// cmd/flashsale serves it; tests and the rehearsal run it in process.
//
// The files follow the parts: engine.go (Config, Open and the order the
// parts are assembled in, Start, Stop, Close), stores.go (the record and
// its pools), gates.go (the stock gate and the queue, in process or in
// Redis), room.go (shoppers' identity, the signing keys, the edge, the
// room's bound), purchase.go (the purchase path's bounds), background.go
// (the outbox relay and its sinks), http.go (the API, the page, the
// console), restart.go (the in-process gate rebuilt at start).
//
// Overselling is neither prevented nor caused here: the engine wires the
// gate (packages memory and redis, where it is prevented) and package
// restock (the one place units come back, where it could be caused) to the
// services that use them, and starts the invariant watcher that pauses a
// sale on drift.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/bulkhead"
	"github.com/flashsale/flashsale/catalog"
	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/control"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/tally"
	"github.com/flashsale/flashsale/invariant"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/purchase"
	"github.com/flashsale/flashsale/rebalance"
	fsredis "github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/restock"
	"github.com/flashsale/flashsale/sweeper"
	"github.com/flashsale/flashsale/token"
	"github.com/flashsale/flashsale/waitroom"
)

// Config says which parts to use and how. The zero value (with DataDir)
// is the embedded default: in-process gate, SQLite under DataDir.
type Config struct {
	// DataDir holds the SQLite file and the generated token keys.
	DataDir string
	// RedisURL, when set, puts the gate and the queue in Redis:
	// redis://host:port/db, or redis://host:port?addr=host:port&addr=...
	// for a Redis Cluster. A sale's shards (Sale.Shards) split its
	// counter only in Redis; the in-process gate keeps one counter.
	RedisURL string
	// RedisPrefix prefixes every Redis key (default "fs:").
	RedisPrefix string
	// DatabaseURL, when set (postgres://...), puts the record in
	// PostgreSQL.
	DatabaseURL string
	// DatabaseMaxConns bounds the purchase path's connection pool
	// (PostgreSQL; default postgres.DefaultMaxConns).
	DatabaseMaxConns int32
	// BackgroundMaxConns bounds the PostgreSQL pool of everything but the
	// purchase path and the relay: sweeper, reconciler, invariant watcher,
	// warmer, drawer, catalog refreshes, snapshots and the operator
	// routes (default 4). The two pools are separate budgets, so a sale
	// that exhausts its own cannot stop the sweeper, the watcher or the
	// operator, nor they the sale.
	BackgroundMaxConns int32
	// MaxInFlight bounds the purchase requests in flight (reserve, and
	// get, confirm and cancel of a reservation); past it they are shed
	// with 503 overloaded before doing any work. Zero means twice the
	// purchase path's connections (DatabaseMaxConns, or SQLite's writer
	// and readers); below zero, no bound.
	MaxInFlight int
	// SaleMaxInFlight is one sale's share of MaxInFlight, so that a big
	// sale cannot take the slots of a quiet one (default half of
	// MaxInFlight, at least 1). Confirm, cancel and get of a reservation
	// share one more budget, half this size.
	SaleMaxInFlight int
	// InFlightWait is the longest a purchase request waits for a slot
	// before it is shed (default 25ms; below zero, none). Confirm, cancel
	// and get of a reservation wait longer, DefaultReservationWait or
	// InFlightWait if that is more, and apart from the reserves' line
	// (none either below zero).
	InFlightWait time.Duration
	// RoomSaleInFlight bounds one sale's waiting-room requests (ticket,
	// status, admission, registration) in progress at once on this
	// server, origin or edge, so that a big sale's crowd cannot hold every
	// processor while another sale's shoppers wait behind it: past it a
	// request waits, parked, for up to RoomInFlightWait, and is then shed
	// with 503 overloaded. Zero means four per processor (GOMAXPROCS);
	// below zero, no bound.
	RoomSaleInFlight int
	// RoomInFlightWait is the longest a waiting-room request waits for one
	// of its sale's slots (default DefaultRoomInFlightWait; below zero,
	// none).
	RoomInFlightWait time.Duration
	// UserJWTSecret verifies shopper JWTs with HS256; UserJWTPublicKey
	// (PEM) with EdDSA or RS256. With neither, the development key is used.
	UserJWTSecret    string
	UserJWTPublicKey []byte
	// InstrumentClaim names the shopper JWT's claim that carries the
	// payment instrument's fingerprint (default "pmf"): the instrument the
	// per-instrument limits count.
	InstrumentClaim string
	// TrustClientInstrument counts a reserve body's paymentFingerprint
	// where the shopper's JWT carries no instrument (Demo sets it too).
	// Off, the body's value counts for nothing: the shopper wrote it.
	TrustClientInstrument bool
	// UserJWTAudience and UserJWTIssuer, when set, are the aud and iss a
	// shopper JWT must carry (identity.WithAudience, WithIssuer): a token
	// the identity service issued for another service is refused.
	UserJWTAudience string
	UserJWTIssuer   string
	// UserJWTMaxLifetime bounds a shopper JWT's exp - iat (default
	// identity.DefaultMaxLifetime; see identity.WithMaxLifetime for a
	// token without iat).
	UserJWTMaxLifetime time.Duration
	// AdminToken guards /admin/ and /metrics; empty means loopback only,
	// and only what a web page cannot send (httpapi's admin guard).
	AdminToken string
	// MetricsApart leaves /metrics off Handler: the caller serves
	// MetricsHandler on a listener of its own.
	MetricsApart bool
	// AdmissionTTL is the lifetime of an admission token (default 120s).
	AdmissionTTL time.Duration
	// TokenKeys signs waiting-room tokens ("kid:base64url,..."). Empty
	// means a key generated once and kept in DataDir/token-keys.
	TokenKeys string
	// Source names this server in the gate's audit log.
	Source string
	// Now is the clock of every part (default time.Now).
	Now func() time.Time
	// Intervals of the background services (zero: their defaults).
	SweepInterval     time.Duration
	InvariantInterval time.Duration
	RebalanceInterval time.Duration
	WarmInterval      time.Duration
	WarmLead          time.Duration
	OrphanGrace       time.Duration
	// RetireAfter is how long a sale stays closed, with no hold pending,
	// before the gate forgets its state (default
	// control.DefaultRetireAfter).
	RetireAfter time.Duration
	// GateTimeout bounds one gate call on the purchase path (default 500ms).
	GateTimeout time.Duration
	// RecordTimeout bounds one record write on the purchase path (default
	// 3s); past it the shopper is told to repeat with the same key.
	RecordTimeout time.Duration
	Logger        *slog.Logger
	// WrapGate, when set, wraps the gate every part uses: fault drills
	// put a faulty gate in front of the real one.
	WrapGate func(restock.Gate) restock.Gate
	// WrapStore, when set, wraps the record the purchase path uses.
	WrapStore func(flashsale.Store) flashsale.Store
	// WrapBackground, when set, wraps the record the background work and
	// the operator routes use (its own pool on PostgreSQL; with SQLite
	// the same store as the purchase path's, before WrapStore).
	WrapBackground func(flashsale.Store) flashsale.Store
	// Role is httpapi.RoleAll (default), RoleEdge or RoleOrigin. An edge
	// needs RedisURL (the queue it shares with the origin) and OriginURL.
	Role string
	// OriginURL is where an edge fetches its snapshots; OriginToken is the
	// origin's admin token; EdgeID names the edge.
	OriginURL   string
	OriginToken string
	EdgeID      string
	// PaceTick and DrawInterval are the pacer's and the drawer's rounds
	// (zero: their defaults).
	PaceTick     time.Duration
	DrawInterval time.Duration
	// ReserveBudget is each shopper's, and each payment instrument's,
	// reserve budget per sale: Burst at once, one more every Every
	// (default 5, one every 2s). Burst < 0 turns rate limiting off.
	ReserveEvery time.Duration
	ReserveBurst int

	// EventsSink is where the outbox relay publishes events: "log" (the
	// default), "webhook", "nats", or "none" (no relay runs in this
	// process; the events wait in the outbox for a relay elsewhere).
	EventsSink string
	// WebhookURL and WebhookSecret configure the webhook sink.
	WebhookURL    string
	WebhookSecret string
	// NATSURL, NATSStream and NATSSubject configure the JetStream sink
	// (defaults: package jetstream's).
	NATSURL     string
	NATSStream  string
	NATSSubject string
	// OutboxMaxConns bounds the relay's own PostgreSQL pool (default 2),
	// apart from the purchase path's DatabaseMaxConns, so that the relay
	// can never take the connections reserves need.
	OutboxMaxConns int32
	// RelayInterval is how often an idle relay looks for events (default
	// 250ms); a write in this process wakes it at once.
	RelayInterval time.Duration
	// Sink, when set, replaces EventsSink's (tests).
	Sink outbox.Sink
	// Demo registers GET /demo/token?user=NAME beside the waiting-room
	// page, minting development shopper JWTs, but only while shoppers are
	// verified with the development key: with a real key, minting for
	// strangers would hand out accounts, so Demo then does nothing.
	// It also lets the waiting-room page show developer hints.
	Demo bool
	// PageDir, when set, is a directory whose files override the
	// waiting-room page's own (page.Config.Dir).
	PageDir string
	// CORSOrigins are the storefront origins whose pages may call the
	// shopper routes with the JavaScript SDK (httpapi.ParseCORSOrigins).
	CORSOrigins []string
}

// Engine is an assembled server. Its Handler serves the API; Start runs the
// background services; Close releases everything.
type Engine struct {
	Config  Config
	Handler http.Handler
	// MetricsHandler serves the Prometheus text without any token, for a
	// listener apart (Config.MetricsApart): every series but those of a
	// sale not yet published (httpapi.Server.PublicMetrics).
	MetricsHandler http.Handler
	// API is the server behind Handler, whose live feed Start and Stop
	// run.
	API *httpapi.Server
	// Store is the record as the purchase path uses it; Background as
	// the background services and the operator routes do. On PostgreSQL
	// each has a pool of its own; on SQLite they are one store.
	Store      flashsale.Store
	Background flashsale.Store
	// InFlight bounds the purchase path's requests in flight; nil when
	// MaxInFlight < 0, and at an edge, which has no purchase path.
	InFlight *bulkhead.Bulkhead
	// RoomInFlight bounds each sale's waiting-room requests in progress;
	// nil when RoomSaleInFlight < 0.
	RoomInFlight *bulkhead.Bulkhead
	Gate         flashsale.GateAdmin
	Queue        waitroom.Queue
	Tokens       *token.Keyring
	Shoppers     *identity.Verifier
	Catalog      *catalog.Catalog
	// SaleListener, on PostgreSQL, hears every change to a sale that any
	// server commits and reads it into Catalog at once, so that a fleet
	// of origins answers as one (see catalog.Catalog.Refresh); nil on
	// SQLite, whose one process writes every change itself.
	SaleListener *postgres.SaleListener
	Control      *control.Service
	Purchase     *purchase.Service
	Room         *waitroom.Room
	Sweeper      *sweeper.Sweeper
	Watcher      *invariant.Watcher
	Warmer       *control.Warmer
	// Retirer drops what the gate and the queue keep of sales that are
	// over.
	Retirer *control.Retirer
	// Rebalancer looks after sales split over shards: nil with the
	// in-process gate.
	Rebalancer *rebalance.Rebalancer
	Pacer      *waitroom.Pacer
	Drawer     *waitroom.Drawer
	// Turns writes shopper.turn as turns come, in sales that notify them.
	Turns *waitroom.Turns
	// Snapshots is the origin's snapshot builder; Edge the edge's fetcher.
	Snapshots *waitroom.OriginSnapshots
	Edge      *waitroom.EdgeSnapshots
	Metrics   *metrics.Metrics
	// Relay publishes the outbox's events to Sink; nil with EventsSink
	// "none".
	Relay *outbox.Relay
	Sink  outbox.Sink

	// DevelopmentKey reports that shopper JWTs are verified with the
	// well-known development key.
	DevelopmentKey bool

	// AccountInFlight gives each account one purchase request in flight
	// per sale (and one on its reservations) on this server; nil at an
	// edge.
	AccountInFlight *bulkhead.Bulkhead

	limiter purchase.Limiter
	// answers keeps final rejections for every server, in Redis; nil with
	// the in-process gate, where one server is the whole fleet.
	answers purchase.SharedAnswers
	// gate is Gate whole, with its give-back (Restock, Void), which only
	// package restock is handed: Gate, which every other part has, lacks
	// it.
	gate restock.Gate
	// sharded is the Redis gate, which splits sales over shards.
	sharded *fsredis.ShardedGate

	// saleReader is the record the catalog reads a sale from when told it
	// changed, and the gate a new sale's shards from: reads a request or
	// the news of a change waits on, a few per sale. On PostgreSQL a pool
	// of one connection of its own; nil on SQLite.
	saleReader flashsale.Store

	// calls counts the calls to the record, on the purchase path's pool
	// and on the background work's.
	calls [3]*tally.Store

	closers []func() error
	// relayStore is the record as the relay uses it: for PostgreSQL, a
	// pool of its own.
	relayStore outbox.Store
	// relay is what the record's events hook wakes.
	relay atomic.Pointer[outbox.Relay]
}

// Open assembles an engine. On error, whatever was opened is closed, and
// the error names the setting (as serve's flag) or the server at fault.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Source == "" {
		host, _ := os.Hostname()
		cfg.Source = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if cfg.AdmissionTTL <= 0 {
		cfg.AdmissionTTL = 120 * time.Second
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./data"
	}
	if cfg.Role == "" {
		cfg.Role = httpapi.RoleAll
	}
	e := &Engine{Config: cfg, Metrics: metrics.New()}
	// The half-built engine is closed here, not through the result: a
	// failed Open returns no engine to close.
	if err := e.open(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// open assembles e from e.Config; on error, e holds whatever it opened, for
// Close.
func (e *Engine) open(ctx context.Context) (err error) {
	cfg := e.Config
	if e.Tokens, err = loadTokenKeys(cfg.TokenKeys, cfg.DataDir); err != nil {
		return err
	}
	if err := e.openShoppers(); err != nil {
		return err
	}
	e.openRoomInFlight()
	if cfg.Role == httpapi.RoleEdge {
		return e.openEdge(ctx)
	}
	if err := e.openStore(ctx); err != nil {
		return err
	}
	if cfg.WrapBackground != nil {
		e.Background = cfg.WrapBackground(e.Background)
	}
	if cfg.WrapStore != nil {
		e.Store = cfg.WrapStore(e.Store)
	}
	// Every call to the record is counted: per request by the HTTP layer,
	// and apart for the background work (flashsale_record_calls_*).
	e.calls[0], e.calls[1] = tally.Wrap(e.Store), tally.Wrap(e.Background)
	e.Store, e.Background = e.calls[0], e.calls[1]
	if e.saleReader != nil {
		e.calls[2] = tally.Wrap(e.saleReader)
		e.saleReader = e.calls[2]
	}
	e.Metrics.BackgroundRecordCalls(func() float64 {
		_, background := e.RecordCalls()
		return float64(background)
	})
	e.openInFlight()
	e.openAccountInFlight()
	if err := e.openGate(ctx); err != nil {
		return err
	}
	if cfg.WrapGate != nil {
		e.gate = cfg.WrapGate(e.gate)
	}
	e.Gate = e.gate
	// Units go back to the gate through package restock alone, one for
	// each pool of the record: the purchase path's cancels and voids, and
	// the background's expiries, reconciliations and order moves.
	give := func(record restock.Record) *restock.Service {
		return restock.New(restock.Config{Record: record, Gate: e.gate, Now: cfg.Now, GateTimeout: cfg.GateTimeout,
			OrphanGrace: cfg.OrphanGrace, Logger: cfg.Logger, Metrics: e.Metrics})
	}
	restockBackground := give(e.Background)

	logger := cfg.Logger
	e.Catalog = catalog.New(e.Background, catalog.Config{Now: cfg.Now, Logger: logger, Reader: e.saleReader})
	if cfg.DatabaseURL != "" {
		e.SaleListener = postgres.NewSaleListener(postgres.ListenConfig{URL: cfg.DatabaseURL, Logger: logger,
			Changed: func(ctx context.Context, c postgres.SaleChange) {
				if err := e.Catalog.Refresh(ctx, c.SKU); err != nil {
					logger.Warn("catalog: read a sale another server changed", "sku", c.SKU, "err", err)
				}
			},
			Relist: func(ctx context.Context) {
				if err := e.Catalog.Relist(ctx); err != nil {
					logger.Warn("catalog: read every sale again after the sale listener reconnected", "err", err)
				}
			}})
	}
	e.Control = control.New(control.Config{Store: e.Background, Gate: e.Gate, Restock: restockBackground, Catalog: e.Catalog, Now: cfg.Now,
		Source: cfg.Source, Logger: logger, Metrics: e.Metrics})
	e.Warmer = control.NewWarmer(e.Control, control.WarmerConfig{Lead: cfg.WarmLead, Interval: cfg.WarmInterval})
	if cfg.RedisURL == "" {
		// This process is the in-process gate's only writer.
		e.restoreGate(ctx)
	}
	e.Retirer = control.NewRetirer(e.Control, control.RetirerConfig{After: cfg.RetireAfter, Queue: e.Queue})
	e.Snapshots = &waitroom.OriginSnapshots{Catalog: e.Catalog, Gate: e.Gate, Store: e.Background, Queue: e.Queue, Now: cfg.Now}
	e.Pacer = waitroom.NewPacer(waitroom.PacerConfig{Queue: e.Queue, Gate: e.Gate, Sales: e.Catalog, Now: cfg.Now,
		Holder: cfg.Source, Tick: cfg.PaceTick, AdmissionTTL: cfg.AdmissionTTL, Logger: logger})
	e.Snapshots.Pacing = e.Pacer
	e.Turns = waitroom.NewTurns(waitroom.TurnsConfig{Queue: e.Queue, Sales: e.Catalog, Events: e.Background, Snapshots: e.Snapshots,
		Now: cfg.Now, Holder: cfg.Source, Tick: cfg.PaceTick * 4, Logger: logger})
	e.Drawer = waitroom.NewDrawer(waitroom.DrawerConfig{Queue: e.Queue, Store: e.Background, Sales: e.Catalog, Now: cfg.Now,
		Interval: cfg.DrawInterval, Logger: logger, OnDraw: func(s *flashsale.Sale) { e.Snapshots.Invalidate(s.SKU) }})
	e.Purchase = purchase.New(purchase.Config{Gate: e.Gate, Store: e.Store, Restock: give(e.Store), Tokens: e.Tokens,
		Limiter: e.limiter, Suspect: e.suspect, SharedAnswers: e.answers,
		FailClosed: e.Control.FailClosed, GateFailed: e.Control.GateFailed, Decided: e.decided, Now: cfg.Now,
		GateTimeout: cfg.GateTimeout, RecordTimeout: cfg.RecordTimeout, Logger: logger, Metrics: e.Metrics})
	placeCache := 0 // the room's default
	if _, local := e.Queue.(*memory.Queue); local {
		// The queue is this process's memory already: a cache of its
		// places would be a second copy, missed by every shopper's first
		// ticket and costing two lookups more.
		placeCache = -1
	}
	e.Room = waitroom.New(waitroom.Config{Queue: e.Queue, Tokens: e.Tokens, Snapshots: e.Snapshots, Now: cfg.Now,
		AdmissionTTL: cfg.AdmissionTTL, Challenges: challenge.NewIssuer(e.Tokens.Derive("pow-salt"), e.Queue),
		PlaceCache: placeCache, Invites: e.Background})
	e.Sweeper = sweeper.New(sweeper.Config{Restock: restockBackground, Sales: e.Catalog, Now: cfg.Now,
		Interval: cfg.SweepInterval, Logger: logger})
	e.Watcher = invariant.New(invariant.Config{Gate: e.Gate, Store: e.Background, Sales: e.Catalog,
		Pause: e.Control.FailClosed, Now: cfg.Now, Interval: cfg.InvariantInterval, Logger: logger, Metrics: e.Metrics})
	if e.sharded != nil {
		e.Rebalancer = rebalance.New(rebalance.Config{Gate: e.sharded, Sales: e.Catalog,
			RebuildShards: e.Control.RebuildShards, Interval: cfg.RebalanceInterval, Logger: logger})
	}
	if err := e.openRelay(ctx); err != nil {
		return err
	}
	return e.openHTTP()
}

// Start runs the background services until Stop or ctx ends: at an edge
// the snapshot fetcher; at the origin (on PostgreSQL) the sale listener,
// the warmer, the retirer, the drawer, the pacer, the sweeper, the
// invariant watcher and (on Redis) the rebalancer.
func (e *Engine) Start(ctx context.Context) {
	if e.Edge != nil {
		e.Edge.Start(ctx)
		return
	}
	if e.SaleListener != nil {
		e.SaleListener.Start(ctx)
	}
	e.Warmer.Start(ctx)
	e.Retirer.Start(ctx)
	e.Drawer.Start(ctx)
	e.Pacer.Start(ctx)
	e.Turns.Start(ctx)
	e.Sweeper.Start(ctx)
	e.Watcher.Start(ctx)
	if e.Rebalancer != nil {
		e.Rebalancer.Start(ctx)
	}
	if e.Relay != nil {
		e.Relay.Start(ctx)
	}
	e.API.Start(ctx)
}

// Stop stops the background services and waits for their rounds.
func (e *Engine) Stop() {
	if e.Edge != nil {
		e.Edge.Stop()
		return
	}
	e.API.Stop()
	if e.Relay != nil {
		e.Relay.Stop()
	}
	if e.Rebalancer != nil {
		e.Rebalancer.Stop()
	}
	e.Watcher.Stop()
	e.Sweeper.Stop()
	e.Turns.Stop()
	e.Pacer.Stop()
	e.Drawer.Stop()
	e.Retirer.Stop()
	e.Warmer.Stop()
	if e.SaleListener != nil {
		e.SaleListener.Stop()
	}
}

// CloseStreams ends the server's open live streams (the operator's
// feeds), so that a graceful shutdown does not wait on them: give it to
// http.Server.RegisterOnShutdown.
func (e *Engine) CloseStreams() {
	if e.API != nil {
		e.API.CloseStreams()
	}
}

// RecordCalls returns the calls made to the record so far, and how many of
// them were made outside any request (by the background work).
func (e *Engine) RecordCalls() (total, background int64) {
	for _, c := range e.calls {
		if c != nil {
			total += c.Total()
			background += c.Background()
		}
	}
	return total, background
}

// Close releases the gate's and the record's connections, newest first.
// Closing a nil Engine does nothing.
func (e *Engine) Close() error {
	if e == nil {
		return nil
	}
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}
