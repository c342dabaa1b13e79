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
// Overselling is neither prevented nor caused here: the engine wires the
// gate (packages memory and redis, where it is prevented) and package
// restock (the one place units come back, where it could be caused) to the
// services that use them, and starts the invariant watcher that pauses a
// sale on drift.
package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/bulkhead"
	"github.com/flashsale/flashsale/catalog"
	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/console"
	"github.com/flashsale/flashsale/control"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/tally"
	"github.com/flashsale/flashsale/invariant"
	"github.com/flashsale/flashsale/jetstream"
	"github.com/flashsale/flashsale/memory"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/page"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/purchase"
	"github.com/flashsale/flashsale/rebalance"
	fsredis "github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/restock"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/sweeper"
	"github.com/flashsale/flashsale/token"
	"github.com/flashsale/flashsale/waitroom"
	"github.com/flashsale/flashsale/webhook"
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
	pg, err := e.page()
	if err != nil {
		return err
	}
	api := httpapi.New(httpapi.Config{Role: cfg.Role, Room: e.Room, Shoppers: e.Shoppers, Page: pg,
		MintDemoToken: e.demoMinter(), Console: console.Handler(), Catalog: e.Catalog, Purchase: e.Purchase, Control: e.Control,
		Watcher: e.Watcher, Warmer: e.Warmer,
		Store: e.Background, Gate: e.Gate, Queue: e.Queue, Snapshots: e.Snapshots, Pacer: e.Pacer,
		InFlight: e.InFlight, RoomInFlight: e.RoomInFlight, AdminToken: cfg.AdminToken, MetricsApart: cfg.MetricsApart,
		Now: cfg.Now, Logger: logger, Metrics: e.Metrics, CORSOrigins: cfg.CORSOrigins,
		AccountInFlight: e.AccountInFlight, TrustClientInstrument: cfg.TrustClientInstrument || cfg.Demo})
	e.API = api
	e.Handler, e.MetricsHandler = api, api.PublicMetrics()
	return nil
}

// openShoppers makes the verifier of shopper JWTs, origin and edge alike:
// the configured key, or the development key, and the audience, issuer and
// lifetime every token must keep to.
func (e *Engine) openShoppers() error {
	cfg := e.Config
	opts := []identity.Option{identity.WithCache(1 << 16), identity.WithAudience(cfg.UserJWTAudience),
		identity.WithIssuer(cfg.UserJWTIssuer), identity.WithInstrumentClaim(cfg.InstrumentClaim)}
	if cfg.UserJWTMaxLifetime < 0 {
		return errors.New("--user-jwt-max-lifetime must be positive")
	}
	opts = append(opts, identity.WithMaxLifetime(cfg.UserJWTMaxLifetime))
	var err error
	switch {
	case len(cfg.UserJWTPublicKey) > 0:
		if e.Shoppers, err = identity.NewPublicKeyPEM(cfg.UserJWTPublicKey, opts...); err != nil {
			return fmt.Errorf("--user-jwt-public-key: %w", err)
		}
	case cfg.UserJWTSecret != "":
		if e.Shoppers, err = identity.NewHS256([]byte(cfg.UserJWTSecret), opts...); err != nil {
			return fmt.Errorf("--user-jwt-secret: %w", err)
		}
	default:
		e.DevelopmentKey = true
		if e.Shoppers, err = identity.NewHS256([]byte(identity.DevelopmentSecret), opts...); err != nil {
			return fmt.Errorf("the development key: %w", err)
		}
	}
	return nil
}

// suspect holds a shopper under the automation policy.
func (e *Engine) suspect(ctx context.Context, saleID, userID, reason string) {
	if err := e.Queue.Flag(context.WithoutCancel(ctx), saleID, userID, reason); err != nil {
		e.Config.Logger.Warn("flag a suspected bot", "sale", saleID, "err", err)
	}
}

// decided feeds the pacer: every reserve the gate was asked about, with
// its latency and whether the path failed, and (for paced sales) one more
// attempt against the outstanding admissions.
func (e *Engine) decided(ctx context.Context, sale *flashsale.Sale, latency time.Duration, failed bool) {
	if sale.AdmissionPerSecond <= 0 {
		return
	}
	e.Pacer.Observe(sale.ID, latency, failed)
	if _, err := e.Queue.Add(context.WithoutCancel(ctx), sale.ID, waitroom.CounterAttempts, 1); err != nil {
		e.Config.Logger.Warn("pacer: count an attempt", "sale", sale.ID, "err", err)
	}
}

// openEdge assembles an edge: the waiting room alone, from snapshots it
// fetches from the origin and the queue it shares with it in Redis.
func (e *Engine) openEdge(ctx context.Context) error {
	cfg := e.Config
	if cfg.RedisURL == "" || cfg.OriginURL == "" {
		return errors.New("an edge needs --redis-url (the queue it shares with the origin) and --origin-url")
	}
	client, err := OpenRedis(ctx, cfg.RedisURL, redisName("queue", cfg.RedisPrefix))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, func() error { client.Close(); return nil })
	e.Queue = fsredis.NewQueue(client, cfg.RedisPrefix)
	e.Edge = waitroom.NewEdgeSnapshots(waitroom.EdgeConfig{Origin: strings.TrimRight(cfg.OriginURL, "/"),
		Token: cfg.OriginToken, EdgeID: cfg.EdgeID, Now: cfg.Now, Logger: cfg.Logger})
	e.Metrics.EdgeSnapshots(e.Edge.Fetched, cfg.Now)
	e.Room = waitroom.New(waitroom.Config{Queue: e.Queue, Tokens: e.Tokens, Snapshots: e.Edge, Now: cfg.Now,
		AdmissionTTL: cfg.AdmissionTTL, Challenges: challenge.NewIssuer(e.Tokens.Derive("pow-salt"), e.Queue)})
	pg, err := e.page()
	if err != nil {
		return err
	}
	api := httpapi.New(httpapi.Config{Role: httpapi.RoleEdge, Room: e.Room, Shoppers: e.Shoppers,
		Page: pg, MintDemoToken: e.demoMinter(), RoomInFlight: e.RoomInFlight, Ready: e.edgeReady,
		AdminToken: cfg.AdminToken, MetricsApart: cfg.MetricsApart, Now: cfg.Now, Logger: cfg.Logger, Metrics: e.Metrics,
		CORSOrigins: cfg.CORSOrigins})
	e.API = api
	e.Handler, e.MetricsHandler = api, api.PublicMetrics()
	return nil
}

// page is the waiting room's page as this engine serves it: demo hints
// only for a --demo server, the shop's files from PageDir.
func (e *Engine) page() (http.Handler, error) {
	return page.New(page.Config{Demo: e.Config.Demo, DemoSignIn: e.demoMinter() != nil, Dir: e.Config.PageDir})
}

// Demo shoppers' accounts are a month old (old enough for any demo sale's
// minimum age) and their tokens last a day.
const (
	demoAccountAge = 720 * time.Hour
	demoTokenTTL   = 24 * time.Hour
)

// demoMinter returns the minting function of GET /demo/token, or nil
// unless the engine runs a demo with the development key.
func (e *Engine) demoMinter() func(string) (string, time.Duration, error) {
	if !e.Config.Demo || !e.DevelopmentKey {
		return nil
	}
	// A demo token lives no longer than the server accepts.
	ttl := demoTokenTTL
	if m := e.Config.UserJWTMaxLifetime; m > 0 && m < ttl {
		ttl = m
	}
	return func(user string) (string, time.Duration, error) {
		// Minted for this server: its audience and issuer, if it has them.
		tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, demoAccountAge, e.Config.Now(), ttl,
			identity.MintAudience(e.Config.UserJWTAudience), identity.MintIssuer(e.Config.UserJWTIssuer))
		return tok, ttl, err
	}
}

func (e *Engine) edgeReady(ctx context.Context) error {
	if err := e.Edge.Refresh(ctx); err != nil {
		return err
	}
	return nil
}

func (e *Engine) openStore(ctx context.Context) error {
	cfg := e.Config
	if cfg.DatabaseURL != "" {
		if !strings.HasPrefix(cfg.DatabaseURL, "postgres://") && !strings.HasPrefix(cfg.DatabaseURL, "postgresql://") {
			return errors.New("--database-url must be a postgres:// URL")
		}
		opts := []postgres.Option{postgres.WithClock(cfg.Now), postgres.WithEventsHook(e.eventsWritten)}
		if cfg.DatabaseMaxConns > 0 {
			opts = append(opts, postgres.WithMaxConns(cfg.DatabaseMaxConns))
		}
		st, err := postgres.Open(ctx, withConnectTimeout(cfg.DatabaseURL), opts...)
		if err != nil {
			return fmt.Errorf("--database-url: PostgreSQL at %s: %w", hostOf(cfg.DatabaseURL), err)
		}
		e.Store = st
		e.closers = append(e.closers, st.Close)
		if cfg.RedisURL == "" {
			// The in-process gate is this process's own counter of the
			// stock: a second server keeping one over the same record
			// would sell the stock twice. Refuse it rather than oversell.
			release, err := st.ClaimSoleWriter(ctx, "in-process gate")
			if errors.Is(err, postgres.ErrNotSoleWriter) {
				return errors.New("--redis-url: another server keeps its stock gate in process over this PostgreSQL; servers that share a record must share the gate in Redis (give each --redis-url)")
			}
			if err != nil {
				return fmt.Errorf("--database-url: PostgreSQL at %s: %w", hostOf(cfg.DatabaseURL), err)
			}
			e.closers = append(e.closers, release)
		}
		e.Metrics.RecordPool("purchase", poolStat(st))
		conns := cfg.BackgroundMaxConns
		if conns <= 0 {
			conns = DefaultBackgroundMaxConns
		}
		bg, err := st.Sibling(ctx, conns)
		if err != nil {
			return fmt.Errorf("open the background PostgreSQL pool: %w", err)
		}
		e.Background = bg
		e.closers = append(e.closers, bg.Close)
		e.Metrics.RecordPool("background", poolStat(bg))
		// The catalog's reads of a sale another server changed take a
		// connection of their own: behind the background work's rounds
		// in its pool, news of a pause waited up to a few hundred
		// milliseconds on a busy machine (BenchmarkFleetPropagation).
		sr, err := st.Sibling(ctx, 1)
		if err != nil {
			return fmt.Errorf("open the catalog's PostgreSQL connection: %w", err)
		}
		e.saleReader = sr
		e.closers = append(e.closers, sr.Close)
		if cfg.EventsSink != "none" {
			conns := cfg.OutboxMaxConns
			if conns <= 0 {
				conns = 2
			}
			rs, err := st.Sibling(ctx, conns)
			if err != nil {
				return fmt.Errorf("open the relay's PostgreSQL pool: %w", err)
			}
			e.relayStore = rs
			e.closers = append(e.closers, rs.Close)
			e.Metrics.RecordPool("relay", poolStat(rs))
		}
		return nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "flashsale.db"), sqlite.WithClock(cfg.Now), sqlite.WithEventsHook(e.eventsWritten))
	if err != nil {
		return fmt.Errorf("--data-dir: open SQLite in %s: %w", cfg.DataDir, err)
	}
	e.Store = st
	e.closers = append(e.closers, st.Close)
	// SQLite has one writer, which no second pool could multiply: the
	// background work shares the store, and its writes queue for the
	// writer with the purchase path's. What isolates the sale here is the
	// bound on purchase requests in flight (openInFlight), which keeps the
	// writer's queue short.
	e.Background = st
	// SQLite has one writer: the relay's claims queue for it with every
	// other write, one statement per batch, so it shares the store.
	e.relayStore = st
	return nil
}

// DefaultBackgroundMaxConns is the size of the background work's own
// PostgreSQL pool unless Config.BackgroundMaxConns says otherwise: enough
// for the sweeper, the watcher, the warmer and an operator at once.
const DefaultBackgroundMaxConns = 4

// DefaultInFlightWait is how long a purchase request waits for a slot
// unless Config.InFlightWait says otherwise: long enough to ride out a
// slot that frees within a record write, short enough that a shed shopper
// hears so at once.
const DefaultInFlightWait = 25 * time.Millisecond

// DefaultReservationWait is how long confirm, cancel and reading a
// reservation wait for one of their slots unless Config.InFlightWait is
// longer or below zero: a second, what Retry-After would tell them to
// wait anyway. They are at most a few requests per unit sold, each a
// shopper who won (most of them paying), and they wait in a line of their
// own, so the crowd's reserves, shed after 25 ms, cannot fill it; a
// payment is served as soon as a slot frees instead of told to come back.
const DefaultReservationWait = time.Second

// reservationLine is how many confirms, cancels and reads of a reservation
// may wait for a slot, per slot of theirs: about a quarter of a second of
// them at the rush's 10-20 ms a confirm, well within their wait. A line
// only as long as the slots (32 by default) drains in 40 ms, and in one
// rehearsal of three it still turned away 52 confirms that its second's
// wait would have served.
const reservationLine = 16

// poolStat reads a PostgreSQL pool's connections in use and its bound, for
// the pool gauges.
func poolStat(st *postgres.Store) func() (int32, int32) {
	return func() (int32, int32) {
		s := st.Pool().Stat()
		return s.AcquiredConns(), s.MaxConns()
	}
}

// purchaseConns is how many connections the purchase path reaches the
// record through: the PostgreSQL pool, or SQLite's writer and readers.
func (e *Engine) purchaseConns() int {
	switch {
	case e.Config.DatabaseURL == "":
		return 1 + sqlite.DefaultReadConns
	case e.Config.DatabaseMaxConns > 0:
		return int(e.Config.DatabaseMaxConns)
	}
	return postgres.DefaultMaxConns
}

// openInFlight sizes the purchase path's bulkhead from the configuration:
// by default twice its connections, so that every connection has a request
// ready for it and no more than one more waits.
func (e *Engine) openInFlight() {
	cfg := e.Config
	if cfg.MaxInFlight < 0 {
		return
	}
	limit := cfg.MaxInFlight
	if limit == 0 {
		limit = 2 * e.purchaseConns()
	}
	wait := cfg.InFlightWait
	if wait == 0 {
		wait = DefaultInFlightWait
	}
	share := cfg.SaleMaxInFlight
	if share <= 0 {
		share = max(limit/2, 1)
	}
	// The routes that name a reservation share half a sale's budget, so
	// that a big sale's reserves and its shoppers' confirms together leave
	// a quarter of the slots (by default) to every other sale; they wait
	// longer than the reserves, in a line of their own.
	reservationShare := max(share/2, 1)
	reservationWait := max(wait, DefaultReservationWait)
	if wait < 0 {
		reservationWait = wait
	}
	e.InFlight = bulkhead.New(bulkhead.Config{Max: limit, PerKey: share, Wait: wait,
		Shares: map[string]int{httpapi.ReservationRoutes: reservationShare},
		Patient: map[string]bulkhead.Patience{httpapi.ReservationRoutes: {Wait: reservationWait,
			MaxWaiting: reservationLine * reservationShare}}})
	sized := e.InFlight.Config()
	e.Metrics.PurchaseInFlight(e.InFlight.InFlight, sized.Max, sized.PerKey)
}

// How an account waits for its turn on the purchase path: each account
// has one request in flight per sale (and one on its reservations); up to
// accountLine more wait, for at most AccountTurnWait, and the rest are told
// 429 rate_limited at once. A shopper's page sends one request at a time
// (its retries reuse their Idempotency-Key, and concurrent copies of one
// request share one turn), so only a burst waits; half a second rides out
// a reserve or a confirm under load, a short line bounds what a burst
// parks.
const (
	AccountTurnWait = 500 * time.Millisecond
	accountLine     = 2
	// accountWaiting bounds the requests waiting for their account's turn
	// at once, over all accounts: each is a parked goroutine and a timer.
	accountWaiting = 10_000
)

// openAccountInFlight sizes the per-account bound on the purchase path
// (see AccountTurnWait). It has no bound over all accounts: that is
// InFlight's. It is this process's, like InFlight: with N servers behind a
// load balancer, an account has at most N requests in flight, while the
// gate's per-user check and the reserve budgets stay global.
func (e *Engine) openAccountInFlight() {
	e.AccountInFlight = bulkhead.New(bulkhead.Config{Max: math.MaxInt32, PerKey: 1, Wait: AccountTurnWait,
		MaxWaiting: accountWaiting, KeyWaiting: accountLine})
}

// DefaultRoomInFlightWait is the longest a waiting-room request waits for
// one of its sale's slots before it is shed, unless
// Config.RoomInFlightWait says otherwise. It is long: parking, not
// shedding, is what gives the processors back, and a shopper answered late
// has lost nothing, where one told to come back has lost a round trip. The
// bound on how many wait (roomWaiting) is what sheds a crowd the server
// cannot keep up with.
const DefaultRoomInFlightWait = 10 * time.Second

// roomWaiting bounds the waiting-room requests waiting for a slot at once,
// over every sale: each is a parked goroutine and a timer, and a second's
// backlog at the design's ten thousand requests a second of one sale is
// this many.
const roomWaiting = 10_000

// openRoomInFlight sizes the waiting room's per-sale bound: by default four
// requests a processor, enough to keep every processor busy on one sale's
// crowd through the queue's round trips, few enough that another sale's
// request finds a processor soon. There is no bound over all sales: what
// a sale's share protects is the processors, and those are bounded.
func (e *Engine) openRoomInFlight() {
	share := e.Config.RoomSaleInFlight
	if share < 0 {
		return
	}
	if share == 0 {
		share = 4 * runtime.GOMAXPROCS(0)
	}
	wait := e.Config.RoomInFlightWait
	if wait == 0 {
		wait = DefaultRoomInFlightWait
	}
	e.RoomInFlight = bulkhead.New(bulkhead.Config{Max: math.MaxInt32, PerKey: share, Wait: wait,
		MaxWaiting: roomWaiting})
	e.Metrics.RoomInFlight(e.RoomInFlight.InFlight, e.RoomInFlight.Waiting, share)
}

// eventsWritten wakes the relay after a commit that wrote events.
func (e *Engine) eventsWritten() {
	if r := e.relay.Load(); r != nil {
		r.Notify()
	}
}

// openRelay sets up the sink the configuration names and the relay that
// drains the outbox into it.
func (e *Engine) openRelay(ctx context.Context) error {
	cfg := e.Config
	sink := cfg.Sink
	switch {
	case sink != nil:
	case cfg.EventsSink == "none":
		return nil
	case cfg.EventsSink == "" || cfg.EventsSink == "log":
		sink = outbox.LogSink{Logger: cfg.Logger}
	case cfg.EventsSink == "webhook":
		wh, err := webhook.New(webhook.Config{URL: cfg.WebhookURL, Secret: []byte(cfg.WebhookSecret)})
		if err != nil {
			return fmt.Errorf("--events-sink webhook: %w", err)
		}
		sink = wh
	case cfg.EventsSink == "nats":
		js, err := jetstream.Open(ctx, jetstream.Config{URL: cfg.NATSURL, Stream: cfg.NATSStream, Subject: cfg.NATSSubject})
		if err != nil {
			return fmt.Errorf("--nats-url: NATS at %s: %w", hostOf(cfg.NATSURL), err)
		}
		e.closers = append(e.closers, js.Close)
		sink = js
	default:
		return fmt.Errorf("--events-sink must be log, webhook, nats or none, not %q", cfg.EventsSink)
	}
	if e.relayStore == nil {
		return errors.New("the record gave the relay no store")
	}
	e.Sink = sink
	e.Relay = outbox.New(outbox.Config{Store: e.relayStore, Sink: sink, Name: cfg.Source, Now: cfg.Now,
		Interval: cfg.RelayInterval, Logger: cfg.Logger, Metrics: e.Metrics})
	e.relay.Store(e.Relay)
	return nil
}

func (e *Engine) openGate(ctx context.Context) error {
	cfg := e.Config
	every, burst := cfg.ReserveEvery, cfg.ReserveBurst
	if every <= 0 {
		every = 2 * time.Second
	}
	if burst == 0 {
		burst = 5
	}
	if cfg.RedisURL == "" {
		e.gate = memory.New(memory.Config{Now: cfg.Now})
		q := e.openLocalQueue()
		e.Queue = q
		e.closers = append(e.closers, func() error { return e.saveLocalQueue(q) })
		if burst > 0 {
			b := memory.Budget{Every: every, Burst: burst}
			e.limiter = memory.NewLimiter(b, b)
		}
		return nil
	}
	// Two clients, each with connections of its own: one for the stock
	// gate and the purchase limits, one for the waiting room's queue. Every
	// shopper's first ticket is a queue call, so in a rush the queue's replies
	// are thousands a second; on shared connections a reserve's reply
	// would wait behind them, in Redis's answers and in the client's one
	// reader of each connection, and one sale's arrivals would slow every
	// other sale's purchases.
	client, err := OpenRedis(ctx, cfg.RedisURL, redisName("gate", cfg.RedisPrefix))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, func() error { client.Close(); return nil })
	queueClient, err := OpenRedis(ctx, cfg.RedisURL, redisName("queue", cfg.RedisPrefix))
	if err != nil {
		return err
	}
	e.closers = append(e.closers, func() error { queueClient.Close(); return nil })
	// A sale's shards never change, so the gate asks the record once per
	// sale; a sale of one shard is the plain gate's.
	e.sharded = fsredis.NewSharded(fsredis.ShardedConfig{
		Config: fsredis.Config{Client: client, Prefix: cfg.RedisPrefix, Now: cfg.Now},
		Shards: func(ctx context.Context, saleID string) (int, error) {
			// A request waits on this read (the first snapshot of a sale
			// new to this server): it takes the catalog's connection, not
			// a turn behind the background work.
			st := e.Background
			if e.saleReader != nil {
				st = e.saleReader
			}
			sale, err := st.Sale(ctx, saleID)
			if err != nil {
				return 0, err
			}
			return sale.Shards, nil
		},
		Lost: func(string, int) {
			if e.Rebalancer != nil {
				e.Rebalancer.Notify()
			}
		},
	})
	e.gate = e.sharded
	e.Queue = fsredis.NewQueue(queueClient, cfg.RedisPrefix)
	if burst > 0 {
		b := fsredis.Budget{Every: every, Burst: burst}
		e.limiter = fsredis.NewLimiter(client, cfg.RedisPrefix, b, b)
	}
	e.answers = fsredis.NewAnswers(client, cfg.RedisPrefix)
	return nil
}

// OpenRedis connects to a Redis or a Redis Cluster (redis://host:port/db, or
// redis://host:port?addr=host:port&addr=host:port) with timeouts short
// enough that the sale fails closed within a second when Redis is gone.
// Its connections take name (CLIENT SETNAME; none when empty, or when the
// URL names them itself), so that CLIENT LIST tells an operator whose
// connection is whose. As with package redis's Open, the URL's dial_timeout
// and write_timeout parameters override those timeouts.
func OpenRedis(ctx context.Context, url, name string) (rueidis.Client, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: %w", err)
	}
	if opt.ClientName == "" {
		opt.ClientName = name
	}
	opt.DisableCache = true
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = fsredis.DialTimeout
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = fsredis.WriteTimeout
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: Redis at %s does not answer: %w", strings.Join(opt.InitAddress, ", "), err)
	}
	return client, nil
}

// DatabaseConnectTimeout bounds each connection to PostgreSQL the engine
// opens, unless the URL's connect_timeout says otherwise: without one, a
// server that drops packets holds the start (and, later, a pool's new
// connection) for as long as the system's TCP retries last, minutes.
const DatabaseConnectTimeout = 5 * time.Second

// withConnectTimeout returns a postgres:// URL with connect_timeout set to
// DatabaseConnectTimeout, unless it sets one itself.
func withConnectTimeout(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // pgx says what is wrong with it
	}
	q := u.Query()
	if q.Has("connect_timeout") {
		return raw
	}
	q.Set("connect_timeout", strconv.Itoa(int(DatabaseConnectTimeout/time.Second)))
	u.RawQuery = q.Encode()
	return u.String()
}

// hostOf returns the host:port of a server's URL for an error message:
// never its user, password or parameters.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the address given"
	}
	return u.Host
}

// redisName names a client's connections "flashsale-ROLE-PREFIX", the key
// prefix (default "fs:") telling one deployment from another on a shared
// Redis. Characters CLIENT SETNAME refuses (spaces, controls, non-ASCII)
// become '_'.
func redisName(role, prefix string) string {
	if prefix == "" {
		prefix = "fs:"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, "flashsale-"+role+"-"+prefix)
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

// loadTokenKeys returns the waiting room's keyring: from spec when given,
// else from DataDir/token-keys, generated on first start so that tickets
// survive a restart.
func loadTokenKeys(spec, dataDir string) (*token.Keyring, error) {
	source := "--token-keys"
	if spec == "" {
		path := filepath.Join(dataDir, "token-keys")
		source = "--data-dir: the token keys in " + path
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			spec = strings.TrimSpace(string(b))
		case errors.Is(err, os.ErrNotExist):
			k, err := token.GenerateKey(newKeyID())
			if err != nil {
				return nil, err
			}
			spec = token.FormatKeys([]token.Key{k})
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return nil, fmt.Errorf("--data-dir: %w", err)
			}
			if err := os.WriteFile(path, []byte(spec+"\n"), 0o600); err != nil {
				return nil, fmt.Errorf("--data-dir: keep the token key: %w", err)
			}
		default:
			return nil, fmt.Errorf("%s: %w", source, err)
		}
	}
	keys, err := token.ParseKeys(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	ring, err := token.NewKeyring(keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return ring, nil
}

func newKeyID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("k%x", b)
}
