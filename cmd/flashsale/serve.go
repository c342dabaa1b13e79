package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/control"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/identity"
)

// serve runs the server until ctx ends, then shuts down gracefully: no new
// requests, those in flight finished (an acknowledged reservation is
// already in the record), background services stopped, stores closed.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stdout) // where --help prints (parseFlags)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	dataDir := fs.String("data-dir", "./data", "where the embedded store keeps its file (and the generated token key)")
	redisURL := fs.String("redis-url", "", "redis://host:port/db puts the stock gate in Redis; redis://host:port?addr=host:port&addr=host:port a Redis Cluster")
	redisPrefix := fs.String("redis-prefix", "fs:", "prefix of every Redis key")
	databaseURL := fs.String("database-url", "", "postgres://... puts the record in PostgreSQL (default: SQLite in --data-dir)")
	dbMaxConns := fs.Int("database-max-conns", 16, "PostgreSQL connection pool of the purchase path")
	bgMaxConns := fs.Int("background-max-conns", int(engine.DefaultBackgroundMaxConns),
		"PostgreSQL connections of the background work and the operator routes, a pool apart from --database-max-conns")
	maxInFlight := fs.Int("max-in-flight", 0,
		"purchase requests in flight at once, past which they are shed with 503 overloaded (0: twice the purchase path's connections; -1: no bound)")
	saleMaxInFlight := fs.Int("sale-max-in-flight", 0, "one sale's share of --max-in-flight (0: half of it, at least 1)")
	inFlightWait := fs.Duration("in-flight-wait", engine.DefaultInFlightWait,
		"longest a purchase request waits for a slot before it is shed (0: none); confirm, cancel and reading a reservation wait at least 1s (none with 0)")
	roomSaleInFlight := fs.Int("room-sale-in-flight", 0,
		"one sale's waiting-room requests (ticket, status, admission, registration) in progress at once, past which they wait up to 10s, then are shed with 503 overloaded (0: four per processor; -1: no bound)")
	jwtSecret := fs.String("user-jwt-secret", "", "HS256 secret for shopper JWTs (default: the development key, with a warning)")
	jwtPublicKey := fs.String("user-jwt-public-key", "", "PEM file of the EdDSA or RS256 public key for shopper JWTs")
	jwtAudience := fs.String("user-jwt-audience", "", "required aud of shopper JWTs (default: not checked)")
	jwtIssuer := fs.String("user-jwt-issuer", "", "required iss of shopper JWTs (default: not checked)")
	jwtMaxLifetime := fs.Duration("user-jwt-max-lifetime", identity.DefaultMaxLifetime,
		"longest a shopper JWT may live, exp - iat; one without iat is refused while its exp is further away than this")
	adminToken := fs.String("admin-token", "", "bearer token for /admin/ and /metrics (default: they answer only on loopback, and only what a web page cannot send)")
	insecureAdmin := fs.Bool("insecure-admin", false,
		"start on a non-loopback --addr without --admin-token. RISK: the operator routes (create, pause, change sales) then answer, without a password, "+
			"every connection that comes from this host's loopback: a reverse proxy, load balancer or sidecar on this host opens them to everyone it serves, "+
			"and every user of this host may use them")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics on this address instead, a listener of its own without a token (keep it where only Prometheus reaches it; default: on --addr)")
	admissionTTL := fs.Duration("admission-ttl", 120*time.Second, "lifetime of an admission token")
	tokenKeys := fs.String("token-keys", "", "keys signing waiting-room tokens, kid:base64url,... first signs (default: generated into --data-dir)")
	role := fs.String("role", "all", "all (one process), or edge|origin to split them")
	originURL := fs.String("origin-url", "", "edge: the origin's base URL, where it fetches snapshots")
	originToken := fs.String("origin-token", "", "edge: the origin's admin token")
	edgeID := fs.String("edge-id", "", "edge: its name in the origin's sale view (default: host/pid)")
	demo := fs.Bool("demo", false, "also create a demo sale that opens shortly, and (with the development key) let its page sign in demo shoppers")
	corsOrigins := fs.String("cors-origins", "", "storefront origins whose pages may call the shopper routes with the JavaScript SDK, comma-separated scheme://host[:port] (never the operator routes; default: none; see docs/integrate.md)")
	pageDir := fs.String("page-dir", "", "a directory whose files override the waiting-room page's own (index.html, app.css, i18n/<lang>.json, images...; see docs/page.md)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	shutdownTimeout := fs.Duration("shutdown-timeout", 15*time.Second, "how long to wait for requests in flight at shutdown")
	eventsSink := fs.String("events-sink", "log", "where the outbox relay publishes events: log, webhook, nats, or none (no relay in this process)")
	webhookURL := fs.String("webhook-url", "", "webhook sink: the URL events are POSTed to")
	webhookSecret := fs.String("webhook-secret", "", "webhook sink: the HMAC-SHA256 signing secret")
	natsURL := fs.String("nats-url", "nats://127.0.0.1:4222", "nats sink: the NATS server (with JetStream)")
	natsStream := fs.String("nats-stream", "FLASHSALE_EVENTS", "nats sink: the JetStream stream (created if missing)")
	natsSubject := fs.String("nats-subject", "flashsale.events", "nats sink: subject prefix; an event goes to <prefix>.<type>")
	outboxMaxConns := fs.Int("outbox-max-conns", 2, "PostgreSQL connections of the outbox relay, a pool apart from --database-max-conns")
	retireAfter := fs.Duration("retire-after", control.DefaultRetireAfter,
		"how long a sale stays closed, with no hold pending, before the stock gate and the waiting room forget its holds, keys and places (replays of its reserves are then answered from the record)")
	instrumentClaim := fs.String("instrument-claim", identity.DefaultInstrumentClaim,
		"the shopper JWT's claim that carries the payment instrument's fingerprint, which the per-instrument limits count")
	trustClientInstrument := fs.Bool("trust-client-instrument", false,
		"count a reserve body's paymentFingerprint where the JWT carries no instrument (--demo sets it; off, the body's value counts for nothing)")
	debugAddr := fs.String("debug-addr", "", "also serve Go's profiles and execution traces (/debug/pprof/) on this address, apart from --addr; keep it on loopback (empty: none)")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	switch *role {
	case httpapi.RoleAll, httpapi.RoleOrigin:
	case httpapi.RoleEdge:
		if *redisURL == "" || *originURL == "" {
			return errors.New("serve: --role edge needs --redis-url (the queue it shares with the origin) and --origin-url")
		}
	default:
		return fmt.Errorf("serve: --role must be all, edge or origin, not %q", *role)
	}
	logger, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	switch *eventsSink {
	case "log", "none", "nats":
	case "webhook":
		if *webhookURL == "" || *webhookSecret == "" {
			return errors.New("serve: --events-sink webhook needs --webhook-url and --webhook-secret")
		}
	default:
		return fmt.Errorf("serve: --events-sink must be log, webhook, nats or none, not %q", *eventsSink)
	}
	if *outboxMaxConns < 1 {
		return errors.New("serve: --outbox-max-conns must be at least 1")
	}
	if *bgMaxConns < 1 {
		return errors.New("serve: --background-max-conns must be at least 1")
	}
	if *maxInFlight < -1 || *saleMaxInFlight < 0 || *inFlightWait < 0 || *roomSaleInFlight < -1 {
		return errors.New("serve: --max-in-flight and --room-sale-in-flight must be -1 (no bound), 0 (the default) or more, --sale-max-in-flight and --in-flight-wait 0 or more")
	}
	if *jwtMaxLifetime <= 0 {
		return errors.New("serve: --user-jwt-max-lifetime must be positive")
	}
	origins, err := httpapi.ParseCORSOrigins(*corsOrigins)
	if err != nil {
		return fmt.Errorf("serve: --cors-origins: %w", err)
	}
	// The engine reads a zero wait as its default; here 0 means none.
	wait := *inFlightWait
	if wait == 0 {
		wait = -1
	}
	var pem []byte
	if *jwtPublicKey != "" {
		if pem, err = os.ReadFile(*jwtPublicKey); err != nil {
			return fmt.Errorf("--user-jwt-public-key: %w", err)
		}
	}
	developmentKey := *jwtSecret == "" && *jwtPublicKey == ""

	// The listener first: whether it can be reached from other hosts
	// decides what may start, before any store is asked.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	defer ln.Close()
	if err := refuseExposed(*addr, ln.Addr(), *role, *adminToken, *insecureAdmin, developmentKey, *demo); err != nil {
		return err
	}
	var metricsLn net.Listener
	if *metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", *metricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer metricsLn.Close()
	}

	eng, err := engine.Open(ctx, engine.Config{
		DataDir:          *dataDir,
		RedisURL:         *redisURL,
		RedisPrefix:      *redisPrefix,
		DatabaseURL:      *databaseURL,
		DatabaseMaxConns: int32(*dbMaxConns),
		UserJWTSecret:    *jwtSecret,
		UserJWTPublicKey: pem,
		AdminToken:       *adminToken,
		AdmissionTTL:     *admissionTTL,
		TokenKeys:        *tokenKeys,
		Role:             *role,
		OriginURL:        *originURL,
		OriginToken:      *originToken,
		EdgeID:           *edgeID,
		Demo:             *demo,
		PageDir:          *pageDir,
		CORSOrigins:      origins,
		Logger:           logger,
		EventsSink:       *eventsSink,
		WebhookURL:       *webhookURL,
		WebhookSecret:    *webhookSecret,
		NATSURL:          *natsURL,
		NATSStream:       *natsStream,
		NATSSubject:      *natsSubject,
		OutboxMaxConns:   int32(*outboxMaxConns),

		BackgroundMaxConns: int32(*bgMaxConns),
		MaxInFlight:        *maxInFlight,
		SaleMaxInFlight:    *saleMaxInFlight,
		InFlightWait:       wait,
		RoomSaleInFlight:   *roomSaleInFlight,
		RetireAfter:        *retireAfter,

		UserJWTAudience:       *jwtAudience,
		UserJWTIssuer:         *jwtIssuer,
		UserJWTMaxLifetime:    *jwtMaxLifetime,
		MetricsApart:          metricsLn != nil,
		InstrumentClaim:       *instrumentClaim,
		TrustClientInstrument: *trustClientInstrument,
	})
	if err != nil {
		return err
	}
	defer eng.Close()
	warnWeakSecrets(logger, eng.DevelopmentKey, *jwtSecret, *adminToken, *role)
	if *insecureAdmin && *adminToken == "" && !isLoopback(ln.Addr()) {
		logger.Warn("--insecure-admin: the operator routes answer, without a token, every connection from this host's loopback",
			"addr", ln.Addr().String())
	}

	base := "http://" + ln.Addr().String()
	debugBase := ""
	if *debugAddr != "" {
		var stopDebug func()
		if debugBase, stopDebug, err = serveDebug(*debugAddr, logger); err != nil {
			return err
		}
		defer stopDebug()
	}
	srv := newHTTPServer(eng.Handler, logger)
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.IdleTimeout = 120 * time.Second
	if metricsLn != nil {
		msrv := newHTTPServer(eng.MetricsHandler, logger)
		go func() { _ = msrv.Serve(metricsLn) }()
		defer msrv.Close()
		logger.Info("metrics served apart, without a token", "addr", "http://"+metricsLn.Addr().String()+"/metrics")
	}
	// The operators' live streams never end by themselves: they end as
	// the shutdown begins, or it would wait for them until its timeout.
	srv.RegisterOnShutdown(eng.CloseStreams)
	runCtx, stopServices := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServices()
	eng.Start(runCtx)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	store, gate := "SQLite in "+*dataDir, "in process"
	if *databaseURL != "" {
		store = "PostgreSQL"
	}
	if *redisURL != "" {
		gate = "Redis"
	}
	if *role == httpapi.RoleEdge {
		logger.Info("flashsale edge listening", "addr", base, "origin", *originURL)
		fmt.Fprintf(stdout, "flashsale listening on %s (edge of %s)\n", base, *originURL)
	} else {
		logger.Info("flashsale listening", "addr", base, "role", *role, "record", store, "gate", gate, "events", *eventsSink)
		if eng.InFlight != nil {
			b := eng.InFlight.Config()
			logger.Info("purchase path bounded: past these, requests are shed with 503 overloaded",
				"max_in_flight", b.Max, "sale_max_in_flight", b.PerKey, "in_flight_wait", max(b.Wait, 0).String())
		}
		fmt.Fprintf(stdout, "flashsale listening on %s (role: %s, record: %s, gate: %s, events: %s)\n", base, *role, store, gate, *eventsSink)
	}

	if debugBase != "" {
		// After the line above, which scripts and tests read first.
		fmt.Fprintf(stdout, "flashsale profiles and traces at %s/debug/pprof/\n", debugBase)
	}
	if metricsLn != nil {
		fmt.Fprintf(stdout, "flashsale metrics at http://%s/metrics\n", metricsLn.Addr())
	}

	if *demo && *role != httpapi.RoleEdge {
		if err := createDemo(ctx, eng, base, stdout); err != nil {
			logger.Error("demo sale", "err", err)
		}
	}

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	eng.Stop()
	if errors.Is(<-served, http.ErrServerClosed) && err == nil {
		logger.Info("shut down cleanly")
	}
	return err
}

// serveDebug serves net/http/pprof's handlers on addr, on a mux and a
// listener of their own: the server's own mux never carries them. A
// profile or a trace of the server during a sale is how one finds what a
// request waits for; it also shows the program's internals, so the
// address should not be reachable from outside (a warning says so when it
// is not loopback). The command line (pprof's /cmdline) is not served: it
// may carry secrets given as flags. It returns its base URL and the
// function that stops it.
func serveDebug(addr string, logger *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--debug-addr: %w", err)
	}
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err != nil || !ap.Addr().IsLoopback() {
		logger.Warn("--debug-addr is not a loopback address: Go's profiles and traces show the program's internals to whoever reaches it",
			"addr", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := newHTTPServer(mux, logger)
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	logger.Info("profiles and traces served", "addr", base+"/debug/pprof/")
	return base, func() { _ = srv.Close() }, nil
}

// MaxHeaderBytes bounds a request's headers on every listener: the
// contract's requests carry a JWT (at most identity.MaxTokenLen, 8 KiB)
// and a few short headers, and Go's default, 1 MiB, lets each of a
// crowd's connections make the server hold a megabyte before any handler
// can refuse it. Larger headers are answered 431.
const MaxHeaderBytes = 16 << 10

// newHTTPServer returns a server of h with the settings every listener
// shares: a bound on the headers and on the time to read them, and
// net/http's own complaints in the log at WARN.
func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// isLoopback reports whether a listener's address is reachable from this
// host only.
func isLoopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// refuseExposed returns the error that stops a server from starting on an
// address other hosts reach (addr, as bound) with a setting only fit for
// loopback: the operator routes without an admin token (unless
// insecureAdmin), or shoppers verified with the published development key
// (unless demo). An edge has no operator routes. flagAddr is --addr as
// given, for the message; addr is where it was bound.
func refuseExposed(flagAddr string, addr net.Addr, role, adminToken string, insecureAdmin, developmentKey, demo bool) error {
	if isLoopback(addr) {
		return nil
	}
	if adminToken == "" && !insecureAdmin && role != httpapi.RoleEdge {
		return fmt.Errorf("serve: --addr %s is not a loopback address and no --admin-token is set: "+
			"the operator routes would answer without a password; set --admin-token (or --insecure-admin, after reading what it risks)", flagAddr)
	}
	if developmentKey && !demo {
		return fmt.Errorf("serve: --addr %s is not a loopback address and shopper JWTs would be verified with the published development key, "+
			"with which anyone signs in as anyone: set --user-jwt-secret or --user-jwt-public-key (or --demo, for a demonstration)", flagAddr)
	}
	return nil
}

// warnWeakSecrets logs a warning for each secret that is weaker than it
// should be, naming its flag: the development key, an HS256 secret short
// enough to guess, an admin token short enough to guess, no admin token.
func warnWeakSecrets(logger *slog.Logger, developmentKey bool, jwtSecret, adminToken, role string) {
	if developmentKey {
		logger.Warn("shopper JWTs are verified with the well-known DEVELOPMENT key; set --user-jwt-secret or --user-jwt-public-key in production")
	}
	if jwtSecret != "" && identity.WeakSecret([]byte(jwtSecret)) {
		logger.Warn(fmt.Sprintf("--user-jwt-secret is shorter than %d bytes: shopper JWTs signed with it could be forged by guessing it; use %d random bytes or more",
			identity.MinHS256SecretLen, identity.MinHS256SecretLen))
	}
	if adminToken != "" && len(adminToken) < MinAdminTokenLen {
		logger.Warn(fmt.Sprintf("--admin-token is shorter than %d bytes: it could be guessed; use %d random bytes or more (e.g. openssl rand -base64 32)",
			MinAdminTokenLen, MinAdminTokenLen))
	}
	if adminToken == "" && role != httpapi.RoleEdge {
		logger.Warn("no --admin-token: /admin/ and /metrics answer only on loopback, and only what a web page cannot send")
	}
}

// MinAdminTokenLen is the shortest admin token that is not warned about:
// 24 bytes (192 bits of a random token), beyond any guessing.
const MinAdminTokenLen = 24

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("serve: --log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, errors.New("serve: --log-format must be text or json")
}

// createDemo creates a sale that opens in a few seconds and says how to
// take part.
func createDemo(ctx context.Context, eng *engine.Engine, base string, stdout io.Writer) error {
	now := eng.Config.Now()
	sku := fmt.Sprintf("demo-%s", strings.ToLower(now.UTC().Format("150405")))
	sale, err := eng.Control.Create(ctx, &flashsale.Sale{
		SKU:                sku,
		Name:               "Demo sale: 100 limited-edition sneakers",
		InitialStock:       100,
		OpensAt:            now.Add(15 * time.Second).Truncate(time.Second),
		HoldSeconds:        120,
		PerUserLimit:       1,
		AdmissionPerSecond: 20,
		// What a shop's sale looks like on its page (contract: display).
		Display: flashsale.Display{
			Title:       "Limited-edition sneakers",
			Description: "A demo drop: 100 pairs, one per shopper.\nNothing here is sold or shipped.",
			ImageURL:    base + "/assets/demo/sneaker.svg",
			PriceText:   "€ 149",
			BrandColor:  "#c8102e",
		},
	})
	if err != nil {
		return err
	}
	signIn := `press "Sign in as a demo shopper"`
	if !eng.DevelopmentKey {
		signIn = "sign in with a token your --user-jwt-secret or key signs"
	}
	// The commands run from the source tree: a new user has no flashsale
	// binary on PATH.
	const token = "go run ./cmd/flashsale token --user alice"
	fmt.Fprintf(stdout, `
Demo sale %q: %d units, opens at %s (in about 15 seconds).
  The waiting room:   %s/sale/%s/
                      open it in a browser (a phone will do) and %s
  The sale:           curl %s/sale/%s
  A shopper token:    %s
  Take a place:       curl -H "Authorization: Bearer $(%s)" %s/sale/%s/ticket
  Poll your place:    curl "%s/sale/%s/status?token=<token from the ticket>"
  Operator view:      curl %s/admin/sales/%s
`, sale.SKU, sale.InitialStock, sale.OpensAt.Format(time.RFC3339), base, sku, signIn, base, sku, token, token,
		base, sku, base, sku, base, sku)
	return nil
}
