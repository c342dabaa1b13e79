package engine

// The HTTP side: the API, the shopper's page, the console and the demo's sign-in.

import (
	"net/http"
	"time"

	"github.com/flashsale/flashsale/console"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/page"
)

// openHTTP assembles the API in front of the parts: the routes of the
// engine's role, the shopper's page, the console and the demo's sign-in.
func (e *Engine) openHTTP() error {
	cfg, logger := e.Config, e.Config.Logger
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
