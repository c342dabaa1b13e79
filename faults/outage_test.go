package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// mixed is the shoppers' plan in most drills: a third pay, one in seven
// cancel (their units go back and sell again), the rest keep their hold.
func mixed(i int) shopperPlan { return shopperPlan{confirm: i%3 == 0, cancel: i%7 == 1} }

const (
	// stock is each drill's initial stock; shoppers, how many come for
	// it, workers at a time.
	stock    = 150
	shoppers = 3 * stock
	workers  = 8
	// within bounds each drill's load, so a drill that hangs fails.
	within = 90 * time.Second
)

// redisLost runs the counter-store drill: the load wins some units, the
// gate is taken away (cut), every reserve meanwhile must be answered 503
// sale_paused within a second and the sale paused; the gate comes back
// empty (restore), the operator rebuilds from the record and resumes, the
// load finishes, and the totals are exact.
func redisLost(t *testing.T, r *rig, fault string, cut, restore func()) {
	const sku = "tv"
	r.createSale(sku, stock, nil)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	knockers := r.admitted(sku, 10)
	l := r.startLoad(ctx, sku, shoppers, workers, mixed)
	r.untilWon(l, stock/3)

	began := time.Now()
	cut()
	r.knock(sku, knockers)
	paused := r.waitUntil("the sale paused", 5*time.Second, func() bool { return r.saleState(sku) == flashsale.SalePaused })
	// Shoppers keep knocking on the closed door.
	r.knock(sku, knockers)
	ended := time.Now()
	restore()
	// Until the gate call that finds it gone times out (500ms), the hung
	// reserves hold the sale's share of the purchase slots (16), and the
	// rest of the 18 shoppers are shed 503 overloaded: refused at once,
	// nothing done, told to come back, which is failing closed too.
	closed := r.failClosed(began, ended, time.Second, false, "sale_paused", "overloaded")
	if paused > 2*time.Second {
		t.Errorf("the sale was paused %v after the gate went, want within the probe's second or so", paused)
	}
	if v := r.sale(sku); v.PauseReason == "" {
		t.Errorf("the sale was paused without a reason")
	}
	// Resume is refused while the counter is gone; the operator rebuilds.
	if resp := r.do("POST", "/admin/sales/"+sku+"/resume", nil, nil); resp.status == 200 {
		t.Errorf("resume with the counter lost: %d %s, want it refused until a rebuild", resp.status, resp.body)
	}
	r.rebuildAndResume(sku)
	outcomes := l.wait(t, within)
	r.settle(sku)
	r.verify(sku, outcomes, row{fault: fault, failClosed: closed})
}

// TestRedisConnectionCut: the gate's connections are cut through a proxy
// and its keys deleted meanwhile, as a Redis restart without persistence
// would leave it.
func TestRedisConnectionCut(t *testing.T) {
	needFaults(t)
	proxy := testenv.NewProxy(t, hostOf(testenv.RedisURL()))
	r := newRig(t, rigConfig{redisURL: "redis://" + proxy.Addr() + "/0", start: true})
	redisLost(t, r, "1a Redis connections cut mid-sale, keys lost", proxy.Cut, func() {
		testenv.DeleteKeys(r.redis, r.prefix)
		proxy.Restore()
	})
}

// TestRedisRestart: a Redis of the suite's own is killed (SIGKILL) mid-sale
// and started again, empty: the "counter gone" case.
func TestRedisRestart(t *testing.T) {
	needFaults(t)
	srv := testenv.StartRedisServer(t)
	r := newRig(t, rigConfig{redisURL: srv.URL(), redisDirect: srv.URL(), start: true})
	redisLost(t, r, "1b Redis process killed mid-sale, restarted empty", srv.Kill, srv.Start)
}

// recordLost runs the record drill: the load wins some units, the record
// goes away (cut) for long enough that many reserves fail after the gate
// said yes, then comes back (restore). Every reserve meanwhile is answered
// within the record's timeout: 503, or 201 for a write that waited for the
// record to come back; every 201 any shopper saw
// has a durable row afterwards; the units of failed writes come back
// exactly once (the audit log shows one give-back per voided hold); the
// totals are exact.
func recordLost(t *testing.T, r *rig, fault string, cut, restore func()) {
	const sku = "phone"
	r.createSale(sku, stock, nil)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	knockers := r.admitted(sku, 10)
	l := r.startLoad(ctx, sku, shoppers, workers, mixed)
	r.untilWon(l, stock/3)

	began := time.Now()
	cut()
	r.knock(sku, knockers)
	// Long enough for the load's shoppers to fail some writes too.
	time.Sleep(time.Second)
	r.knock(sku, knockers)
	ended := time.Now()
	restore()
	closed := r.failClosed(began, ended, 4*time.Second, true, "unavailable", "sale_paused")
	outcomes := l.wait(t, within)
	r.settle(sku)
	totals, err := r.eng.Store.SaleTotals(context.Background(), r.sale(sku).ID)
	if err != nil {
		t.Fatal(err)
	}
	if totals.Voided == 0 {
		t.Errorf("no record write failed after the gate said yes; the drill proved nothing")
	}
	r.verify(sku, outcomes, row{fault: fmt.Sprintf("%s (%d voided)", fault, totals.Voided), failClosed: closed})
}

// TestPostgresConnectionCut: every connection to the record is cut, and
// new ones refused, mid-sale, through a proxy in front of the shared
// PostgreSQL.
func TestPostgresConnectionCut(t *testing.T) {
	needFaults(t)
	base := testenv.Postgres(t)
	proxy := testenv.NewProxy(t, hostOf(base))
	r := newRig(t, rigConfig{databaseURL: viaProxy(base, proxy.Addr()), start: true})
	recordLost(t, r, "2a PostgreSQL connections cut mid-sale", proxy.Cut, proxy.Restore)
}

// TestPostgresRestart: a PostgreSQL of the suite's own crashes (immediate
// shutdown, recovery from the write-ahead log at the next start) mid-sale
// and comes back.
func TestPostgresRestart(t *testing.T) {
	needFaults(t)
	srv := testenv.StartPostgresServer(t)
	r := newRig(t, rigConfig{databaseURL: srv.URL(), start: true})
	recordLost(t, r, "2b PostgreSQL server crashed mid-sale, restarted", srv.Crash, srv.Start)
}
