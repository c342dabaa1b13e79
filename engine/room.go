package engine

// The waiting room: shoppers' identity, the signing keys, the edge, and the room's bound on requests in flight.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/flashsale/flashsale/bulkhead"
	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/identity"
	fsredis "github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/token"
	"github.com/flashsale/flashsale/waitroom"
)

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

func (e *Engine) edgeReady(ctx context.Context) error {
	if err := e.Edge.Refresh(ctx); err != nil {
		return err
	}
	return nil
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
