package rehearsal_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/rehearsal"
)

// check asserts what every rehearsal must show, whoever ran it: nothing
// oversold and the invariant exact by the record, every unit sold, no hold
// left pending, and the report renders.
func check(t *testing.T, rep *rehearsal.Report, units int) {
	t.Helper()
	s := rep.Store
	if rep.Oversold != 0 || s.Counter+s.Confirmed+s.Pending != s.Initial || s.Initial != int64(units) {
		t.Fatalf("the record: %+v, oversold %d", s, rep.Oversold)
	}
	if s.Confirmed != int64(units) || s.Pending != 0 || s.Counter != 0 {
		t.Fatalf("not every unit sold, or holds left: %+v", s)
	}
	if g := rep.CrowdGone; g == nil || g.Counter != 0 {
		t.Errorf("stock when the last shopper was done: %+v, want read and none left", g)
	}
	if rep.Confirmed != s.Confirmed {
		t.Errorf("the shoppers counted %d orders, the record %d", rep.Confirmed, s.Confirmed)
	}
	if rep.Arrived != int64(rep.Config.Users) {
		t.Errorf("%d of %d shoppers arrived", rep.Arrived, rep.Config.Users)
	}
	if !rep.SoldOutSeen || rep.SoldOutAnnounced > time.Second {
		t.Errorf("sold out announced %v after the last unit (seen: %v)", rep.SoldOutAnnounced, rep.SoldOutSeen)
	}
	// The funnel: every shopper in exactly one final row, the stages the
	// shoppers' own counts.
	if ends := rehearsal.FunnelEnds(rep.Funnel); ends != int64(rep.Config.Users) {
		t.Errorf("the funnel's final rows add up to %d, not the %d shoppers: %+v", ends, rep.Config.Users, rep.Funnel)
	}
	stages := map[string]int64{}
	for _, r := range rep.Funnel {
		if r.Stage {
			stages[r.Name] = r.Count
		}
	}
	if stages["arrived"] != rep.Arrived || stages["admitted"] != rep.Admitted || stages["bought"] != rep.Confirmed {
		t.Errorf("the funnel's stages %v; the shoppers counted %d arrived, %d admitted, %d bought",
			stages, rep.Arrived, rep.Admitted, rep.Confirmed)
	}
	if pass, why := rep.Verdict(); !pass {
		t.Errorf("the verdict: FAIL: %s", why)
	}
	var text, page bytes.Buffer
	rep.WriteText(&text)
	for _, want := range []string{"The funnel", "oversold 0", "counter + confirmed + pending == initial: holds", "status"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
	if lines := strings.Split(strings.TrimSpace(text.String()), "\n"); !strings.HasPrefix(lines[len(lines)-1], "PASS: nothing oversold") {
		t.Errorf("the text report's last line: %q", lines[len(lines)-1])
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "PASS: nothing oversold", "units left and units taken", "= shoppers", "the crowd arrives"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
	if strings.Contains(page.String(), "ZgotmplZ") {
		t.Error("the HTML report has a value html/template refused")
	}
	if t.Failed() {
		t.Log(text.String())
	}
}

// In process, on a compressed clock: a crowd thirty times the stock, some
// failing payment, walking away and paying late, buys exactly the stock;
// the holds that expired or were cancelled were sold again; and no
// rejected request of the funnel touched the record.
func TestInProcess(t *testing.T) {
	rep, err := rehearsal.Run(context.Background(), rehearsal.Config{Users: 3000, Units: 100, Seed: 7,
		PayFail: 0.1, Abandon: 0.1, PayLate: 0.05, Hold: 10 * time.Second, ChallengeBits: 4, MinAccountAge: 72 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	check(t, rep, 100)
	if !rep.Compressed || rep.SaleTime <= rep.Wall {
		t.Errorf("time not compressed: %v of sale in %v", rep.SaleTime, rep.Wall)
	}
	if rep.Store.Expired == 0 || rep.Store.Cancelled == 0 || rep.PaidLate == 0 || rep.Challenged == 0 {
		t.Errorf("the crowd did not exercise the holds and the challenge: %+v, late %d, challenged %d", rep.Store, rep.PaidLate, rep.Challenged)
	}
	if rep.StalePolls != 0 {
		t.Errorf("%d polls answered as if units remained more than a second after the last went", rep.StalePolls)
	}
	noRecordForRejections(t, rep)
}

// noRecordForRejections: no request the funnel rejected (ticket, status,
// admission, reserve) made a call to the record.
func noRecordForRejections(t *testing.T, rep *rehearsal.Report) {
	t.Helper()
	for _, rf := range rep.Routes {
		switch rf.Route {
		case "ticket", "status", "admission", "reserve":
			if !rf.RecordKnown {
				t.Errorf("%s: record calls not measured", rf.Route)
			}
			if rf.Rejected > 0 && rf.RecordPerRejected != 0 {
				t.Errorf("%s: rejected requests made %.2f record calls each", rf.Route, rf.RecordPerRejected)
			}
		}
	}
}

// Under random fairness, bots (arriving first, polling ten times faster,
// sharing cards, young accounts) win at most half their share of the
// crowd.
func TestBotsUnderRandom(t *testing.T) {
	rep, err := rehearsal.Run(context.Background(), rehearsal.Config{Users: 4000, Units: 100, Seed: 11,
		Bots: 0.2, Fairness: flashsale.FairnessRandom, Hold: 10 * time.Second, ChallengeBits: 4, MinAccountAge: 72 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	check(t, rep, 100)
	if rep.BotPopulationShare < 0.19 || rep.BotPopulationShare > 0.21 {
		t.Fatalf("bots were %.3f of the crowd, want 0.2", rep.BotPopulationShare)
	}
	if !rep.Store.HeldKnown || rep.Store.HeldPeople != 0 || rep.Store.HeldBots == 0 {
		t.Errorf("held as automation: %d bots, %d people; want some bots and no person", rep.Store.HeldBots, rep.Store.HeldPeople)
	}
	if rep.BotUnitShare > rep.BotPopulationShare/2 {
		t.Errorf("bots won %.3f of the units, more than half their share of the crowd (%.3f)", rep.BotUnitShare, rep.BotPopulationShare)
	}
}

// startEngine opens an engine on cfg (in a temporary directory, with
// background rounds fast enough for a sale of seconds) and runs its
// background services until the test ends.
func startEngine(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	cfg.DataDir, cfg.Source = t.TempDir(), "rehearsal-test"
	cfg.SweepInterval, cfg.PaceTick = 200*time.Millisecond, 50*time.Millisecond
	eng, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	eng.Start(ctx)
	t.Cleanup(func() { cancel(); eng.Stop() })
	return eng
}

// Against a server on Redis and PostgreSQL over HTTP, in real time: the
// same shoppers, the same checks, the figures read from the operator's
// routes, and the quiet sale and the plain query measured beside.
func TestAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sale in real time")
	}
	// The real components: the gate in Redis, the record in PostgreSQL.
	dbURL := testenv.Postgres(t)
	_, prefix := testenv.Redis(t)
	eng := startEngine(t, engine.Config{DatabaseURL: dbURL, RedisURL: testenv.RedisURL(), RedisPrefix: prefix})
	srv := httptest.NewServer(eng.Handler)
	t.Cleanup(srv.Close)
	cfg := rehearsal.Config{Target: srv.URL, Users: 300, Units: 20, Seed: 5,
		Hold: 2 * time.Second, Arrival: 2 * time.Second, ChallengeBits: 2, Concurrency: 32, Quiet: true,
		PlainQueryURL: dbURL}
	// The probe in a process of its own, as flashsale rehearse runs it.
	probeCommand(&cfg, "probe", srv.URL, dbURL)
	rep, err := rehearsal.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	check(t, rep, 20)
	if rep.Compressed {
		t.Error("a rehearsal over HTTP says it compressed time")
	}
	noRecordForRejections(t, rep)
	if rep.Quiet == nil || len(rep.Quiet.Lines) != 2 || rep.Quiet.Lines[0].N == 0 || rep.Quiet.Lines[1].N == 0 {
		t.Errorf("the quiet sale was not measured: %+v", rep.Quiet)
	}
	if rep.Quiet != nil && rep.Quiet.Failed != 0 {
		// The quiet sale has its own budget of slots and no pacing: its
		// shoppers are never refused.
		t.Errorf("%d quiet shoppers were refused or not admitted", rep.Quiet.Failed)
	}
	if rep.Quiet != nil {
		// The rush is the part of the big sale while the crowd arrived,
		// which the rehearsal told the probe child of.
		for _, l := range rep.Quiet.Lines {
			if l.RushN == 0 || l.RushN > l.N || l.Rush == 0 {
				t.Errorf("%s: rush measured over %d of %d rounds, p99 %v", l.Name, l.RushN, l.N, l.Rush)
			}
		}
	}
	if rep.Quiet != nil && !strings.Contains(rep.Quiet.Note, "process of its own") {
		t.Errorf("the report does not say the probe ran apart: %q", rep.Quiet.Note)
	}
	// The page shows the isolation figures as a table of its own.
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Isolation", "<td>quiet sale: reserve</td>", "in the rush", "×)</td>"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []rehearsal.Config{{Users: 0, Units: 1}, {Users: 1, Units: 0}, {Users: 1, Units: 1, Bots: 2},
		{Users: 1, Units: 1, PayFail: 0.6, Abandon: 0.6}, {Users: 1, Units: 1, Fairness: "loudest"},
		{Users: 1, Units: 1, Target: "ftp://x"}, {Users: 1, Units: 1, Edge: "http://edge"},
		{Users: 1, Units: 1, Target: "http://origin", Edge: "ftp://edge"}} {
		if _, err := rehearsal.Run(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// With an edge, the crowd takes its tickets, polls and admissions there
// and reserves, pays and reads the figures at the target, as a deployment
// with its waiting room at the edges is used.
func TestWaitingRoomAtTheEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sale in real time")
	}
	eng := startEngine(t, engine.Config{})
	// Both names serve the one engine; each counts the routes it is asked.
	var mu sync.Mutex
	seen := map[string]map[string]int{"origin": {}, "edge": {}}
	counted := func(name string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route := r.URL.Path
			if i := strings.LastIndexByte(route, '/'); strings.HasPrefix(route, "/sale/") && i > 0 {
				route = route[i+1:] // ticket, status, reserve…
			}
			mu.Lock()
			seen[name][route]++
			mu.Unlock()
			eng.Handler.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	origin, edge := counted("origin"), counted("edge")
	cfg := rehearsal.Config{Target: origin.URL, Edge: edge.URL, Users: 60, Units: 5, Seed: 7,
		Hold: time.Second, Arrival: time.Second, ChallengeBits: 2, Concurrency: 16}
	rep, err := rehearsal.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	check(t, rep, 5)
	if !strings.Contains(rep.Mode, edge.URL) {
		t.Errorf("the report's mode does not name the edge: %q", rep.Mode)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, route := range []string{"ticket", "status", "admission"} {
		if seen["edge"][route] == 0 || seen["origin"][route] != 0 {
			t.Errorf("%s: %d at the edge, %d at the origin; want all at the edge", route, seen["edge"][route], seen["origin"][route])
		}
	}
	if seen["edge"]["reserve"] != 0 || seen["origin"]["reserve"] == 0 {
		t.Errorf("reserve: %d at the edge, %d at the origin; want all at the origin", seen["edge"]["reserve"], seen["origin"]["reserve"])
	}
	for route, n := range seen["edge"] {
		if route != "ticket" && route != "status" && route != "admission" && route != "register" {
			t.Errorf("the edge was asked %s %d times", route, n)
		}
	}
}
