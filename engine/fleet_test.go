package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/token"
)

// The fleet test (issue 19): two origins and an edge on one PostgreSQL and
// one Redis (or Redis Cluster), behind a load balancer that sends each
// request, not each connection, to the next origin in turn, run a whole
// sale as a shop would see it from outside. Throughout, every server is
// asked for the sale, and none may answer 404 once it has answered it.
//
// The clock is the test's own and stands still while a change made
// through one server must reach the other: a cached sale never grows old
// then, so nothing but the record's notification (postgres.SaleListener)
// can carry a pause, a resume or a rebuild across. It moves only where the
// sale's figures (sold out, held units) must be read again, and to expire
// holds.

const fleetAdmin = "fleet-admin-token"

// fleet is two origins and an edge behind a round-robin load balancer.
type fleet struct {
	t     *testing.T
	clock *testenv.Clock
	// origins and their servers; lb the load balancer; edge and its
	// server.
	origins [2]*engine.Engine
	direct  [2]*httptest.Server
	edge    *engine.Engine
	edgeSrv *httptest.Server
	lb      *httptest.Server
	client  *http.Client

	turn    atomic.Uint64
	proxies map[string]*httputil.ReverseProxy
	// targets are the origins' URLs and the edge's, set before the first
	// request.
	targets [2]string
	edgeURL string
}

// newFleet assembles the fleet on PostgreSQL and the Redis at redisURL
// under prefix, and starts every server's background services (sale
// listener, warmer, sweeper, watcher, relay; the edge's fetcher).
func newFleet(t *testing.T, redisURL, prefix string) *fleet {
	t.Helper()
	f := &fleet{t: t, clock: testenv.NewClock(start), proxies: map[string]*httputil.ReverseProxy{}}
	f.client = &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	dbURL := testenv.Postgres(t)
	key, err := token.GenerateKey("fleet")
	if err != nil {
		t.Fatal(err)
	}
	// One keyring for the fleet: an admission the edge signs is checked
	// by whichever origin the reserve lands on.
	keys := token.FormatKeys([]token.Key{key})
	f.lb = httptest.NewServer(http.HandlerFunc(f.balance))
	ctx, cancel := context.WithCancel(context.Background())
	var started []*engine.Engine
	t.Cleanup(func() {
		f.lb.Close()
		cancel()
		for _, e := range started {
			e.Stop()
		}
		for _, s := range append(f.direct[:], f.edgeSrv) {
			if s != nil {
				s.Close()
			}
		}
		for _, e := range append(f.origins[:], f.edge) {
			if e != nil {
				e.Close()
			}
		}
	})
	for i := range f.origins {
		eng, err := engine.Open(ctx, engine.Config{
			Role: httpapi.RoleOrigin, DataDir: t.TempDir(), DatabaseURL: dbURL,
			RedisURL: redisURL, RedisPrefix: prefix, TokenKeys: keys, AdminToken: fleetAdmin,
			Now: f.clock.Now, Source: fmt.Sprintf("origin-%d", i),
			// Generous for a loaded machine: with the clock standing
			// still, a gate call that timed out would fail the sale
			// closed for good (nothing here resumes it), and the crowd
			// would poll a paused sale until its pace ran out. Failing
			// closed in time is the outage tests' (with the production
			// timeout); the rate limits are another test's.
			GateTimeout: 30 * time.Second, RecordTimeout: 30 * time.Second, MaxInFlight: 4096, ReserveBurst: -1,
		})
		if err != nil {
			t.Fatalf("open origin %d: %v", i, err)
		}
		f.origins[i] = eng
		f.direct[i] = httptest.NewServer(eng.Handler)
		f.targets[i] = f.direct[i].URL
	}
	edge, err := engine.Open(ctx, engine.Config{
		Role: httpapi.RoleEdge, DataDir: t.TempDir(), RedisURL: redisURL, RedisPrefix: prefix,
		// The edge reaches the origins through the load balancer, as
		// it would in a deployment.
		OriginURL: f.lb.URL, OriginToken: fleetAdmin, EdgeID: "edge-1", TokenKeys: keys, Now: f.clock.Now,
	})
	if err != nil {
		t.Fatalf("open the edge: %v", err)
	}
	f.edge = edge
	f.edgeSrv = httptest.NewServer(edge.Handler)
	f.edgeURL = f.edgeSrv.URL
	for _, u := range append(f.targets[:], f.edgeURL) {
		target, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		f.proxies[u] = httputil.NewSingleHostReverseProxy(target)
	}
	for _, e := range append(f.origins[:], f.edge) {
		e.Start(ctx)
		started = append(started, e)
	}
	return f
}

// balance is the load balancer: the waiting room's routes go to the
// edge; every other request to the next origin in turn, whatever
// connection it came on.
func (f *fleet) balance(w http.ResponseWriter, r *http.Request) {
	target := f.targets[f.turn.Add(1)%2]
	if roomRoute(r.URL.Path) {
		target = f.edgeURL
	}
	f.proxies[target].ServeHTTP(w, r)
}

// roomRoute reports whether path is one of the waiting room's, which the
// edges serve.
func roomRoute(path string) bool {
	if !strings.HasPrefix(path, "/sale/") {
		return false
	}
	for _, s := range []string{"/ticket", "/status", "/register", "/admission"} {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}

// call sends a request to base (a server, or the load balancer).
func (f *fleet) call(base, method, path string, hdr map[string]string, body any) (response, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: data}, err
}

// do is call for the test's own goroutine: it fails the test on a
// transport error.
func (f *fleet) do(base, method, path string, hdr map[string]string, body any) response {
	f.t.Helper()
	r, err := f.call(base, method, path, hdr, body)
	if err != nil {
		f.t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	return r
}

// admin sends an operator request to base.
func (f *fleet) admin(base, method, path string, body any) response {
	f.t.Helper()
	return f.do(base, method, path, map[string]string{"Authorization": "Bearer " + fleetAdmin}, body)
}

func (f *fleet) jwt(user string) string {
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, 720*time.Hour, f.clock.Now(), 24*time.Hour)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

// servers are the fleet's servers as a shopper's GET /sale/{sku} may reach
// them: each origin and the edge.
func (f *fleet) servers() map[string]string {
	return map[string]string{"origin-0": f.targets[0], "origin-1": f.targets[1], "edge": f.edgeURL}
}

// publishedState is the state GET /sale/{sku} answers at base ("404" for
// no sale, "503" for come back: an edge whose snapshots the test's clock
// has aged says so until its next fetch).
func (f *fleet) publishedState(base, sku string) (string, error) {
	r, err := f.call(base, "GET", "/sale/"+sku, nil, nil)
	switch {
	case err != nil:
		return "", err
	case r.status == http.StatusNotFound:
		return "404", nil
	case r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") != "":
		return "503", nil
	case r.status != http.StatusOK:
		return "", fmt.Errorf("GET /sale/%s: %d %s", sku, r.status, r.body)
	}
	var v struct{ State string }
	if err := json.Unmarshal(r.body, &v); err != nil {
		return "", err
	}
	return v.State, nil
}

// eventually polls cond until it holds. The deadline is generous for a
// loaded machine: the bound itself is measured by BenchmarkFleetPropagation,
// not asserted here.
func (f *fleet) eventually(what func() string, cond func() (bool, error)) {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			f.t.Fatalf("%s: %v", what(), err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting until %s", what())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// published waits until every server publishes the sale in one of the
// states, and checks that each still does when asked again.
func (f *fleet) published(sku string, states ...string) {
	f.t.Helper()
	for name, base := range f.servers() {
		var last string
		in := func() (bool, error) {
			st, err := f.publishedState(base, sku)
			last = st
			for _, s := range states {
				if st == s {
					return true, err
				}
			}
			return false, err
		}
		f.eventually(func() string { return fmt.Sprintf("%s publishes %s as %v (last %s)", name, sku, states, last) }, in)
		// Once there, it stays: no read begun before the change may put
		// the old sale back.
		if ok, err := in(); err != nil || !ok {
			f.t.Fatalf("%s published %s as %v, then %s (%v)", name, sku, states, last, err)
		}
	}
}

// catalogSale is the sale as the origin's catalog holds it.
func (f *fleet) catalogSale(i int, sku string) *flashsale.Sale {
	f.t.Helper()
	s, err := f.origins[i].Catalog.BySKU(context.Background(), sku)
	if err != nil {
		f.t.Fatalf("origin-%d catalog: %v", i, err)
	}
	return s
}

// acked is a reservation the fleet acknowledged (201), and what the
// shopper did with it since.
type acked struct {
	id, user, key, admission string
	state                    flashsale.ReservationState
}

// shopper's outcomes.
const (
	outWon     = "won"
	outSoldOut = "sold_out"
)

// shop takes the user through the waiting room at the edge and reserves
// through the load balancer, repeating every answer that says come back,
// until a final answer.
func (f *fleet) shop(sku, user string) (outcome string, a acked, err error) {
	auth := map[string]string{"Authorization": "Bearer " + f.jwt(user)}
	a = acked{user: user, key: "k-" + user}
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		pause := func() { time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond) }
		if a.admission == "" {
			r, err := f.call(f.lb.URL, "GET", "/sale/"+sku+"/ticket", auth, nil)
			if err != nil {
				return "", a, err
			}
			last = fmt.Sprintf("ticket %d %s", r.status, r.body)
			switch {
			case r.status == http.StatusConflict && r.code() == outSoldOut:
				return outSoldOut, a, nil
			case r.status == http.StatusServiceUnavailable:
				pause()
				continue
			case r.status != http.StatusOK:
				return "", a, fmt.Errorf("%s: %s", user, last)
			}
			var ticket struct{ Token string }
			if err := json.Unmarshal(r.body, &ticket); err != nil {
				return "", a, err
			}
			r, err = f.call(f.lb.URL, "GET", "/sale/"+sku+"/status?token="+url.QueryEscape(ticket.Token), nil, nil)
			if err != nil {
				return "", a, err
			}
			last = fmt.Sprintf("status %d %s", r.status, r.body)
			var st struct {
				State          string
				AdmissionToken string
			}
			_ = json.Unmarshal(r.body, &st)
			switch st.State {
			case "admitted":
				a.admission = st.AdmissionToken
			case outSoldOut:
				return outSoldOut, a, nil
			default:
				pause()
				continue
			}
		}
		hdr := map[string]string{"Authorization": auth["Authorization"], "Idempotency-Key": a.key,
			"X-Admission-Token": a.admission}
		r, err := f.call(f.lb.URL, "POST", "/sale/"+sku+"/reserve", hdr, nil)
		if err != nil {
			return "", a, err
		}
		last = fmt.Sprintf("reserve %d %s", r.status, r.body)
		switch code := r.code(); {
		case r.status == http.StatusCreated:
			var v struct{ ReservationID string }
			if err := json.Unmarshal(r.body, &v); err != nil || v.ReservationID == "" {
				return "", a, fmt.Errorf("%s: %s", user, last)
			}
			a.id, a.state = v.ReservationID, flashsale.ReservationPending
			return outWon, a, nil
		case code == outSoldOut:
			return outSoldOut, a, nil
		case r.status == http.StatusServiceUnavailable || code == "admission_expired" || code == "admission_used":
			if r.status == http.StatusForbidden {
				a.admission = ""
			}
			pause()
		default:
			return "", a, fmt.Errorf("%s: %s", user, last)
		}
	}
	return "", a, fmt.Errorf("%s: no final answer by the deadline; last: %s", user, last)
}

// crowd sends users through shop at once and returns what they were told.
func (f *fleet) crowd(sku string, users []string) (won []acked, soldOut []acked) {
	f.t.Helper()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, a, err := f.shop(sku, u)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case out == outWon:
				won = append(won, a)
			default:
				soldOut = append(soldOut, a)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		f.t.Fatalf("%d shoppers failed; first: %v", len(errs), errs[0])
	}
	return won, soldOut
}

// watch asks every server for the sale until stop, and reports any 404
// from a server that had already answered it: a sale, once it exists, is
// never denied by any server.
func (f *fleet) watch(sku string) (stop func() []string) {
	done := make(chan struct{})
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		violations []string
	)
	for name, base := range f.servers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := false
			for {
				select {
				case <-done:
					return
				case <-time.After(3 * time.Millisecond):
				}
				st, err := f.publishedState(base, sku)
				if err != nil {
					continue
				}
				if st != "404" {
					seen = true
				} else if seen {
					mu.Lock()
					violations = append(violations, name+" answered 404 after it had served the sale")
					mu.Unlock()
				}
			}
		}()
	}
	return func() []string {
		close(done)
		wg.Wait()
		return violations
	}
}

// checkRecord checks the sale's figures on the gate and the record (read
// through origin 0: they are shared): nothing oversold, the counter and
// the holds adding up to the stock, and every acknowledged reservation in
// the record in the state its shopper left it.
func (f *fleet) checkRecord(sku string, acks []acked) flashsale.SaleTotals {
	f.t.Helper()
	ctx := context.Background()
	eng := f.origins[0]
	sale, err := eng.Store.SaleBySKU(ctx, sku)
	if err != nil {
		f.t.Fatal(err)
	}
	snap, err := eng.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	totals, err := eng.Store.SaleTotals(ctx, sale.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	if live := totals.Confirmed + totals.Pending; live > int64(sale.InitialStock) {
		f.t.Fatalf("oversold: %d units held or bought of %d", live, sale.InitialStock)
	}
	if got := snap.Counter + totals.Confirmed + totals.Pending; got != int64(sale.InitialStock) || snap.Drift() != 0 {
		f.t.Fatalf("counter %d + confirmed %d + pending %d = %d, want %d (drift %d)",
			snap.Counter, totals.Confirmed, totals.Pending, got, sale.InitialStock, snap.Drift())
	}
	ids := map[string]bool{}
	for _, a := range acks {
		if ids[a.id] {
			f.t.Fatalf("reservation %s acknowledged to two shoppers", a.id)
		}
		ids[a.id] = true
		r, err := eng.Store.Reservation(ctx, a.id)
		if err != nil {
			f.t.Fatalf("acknowledged reservation %s of %s: %v", a.id, a.user, err)
		}
		if r.UserID != a.user || r.State != a.state {
			f.t.Fatalf("reservation %s in the record: %s, %s; want %s, %s", a.id, r.UserID, r.State, a.user, a.state)
		}
	}
	return totals
}

// TestFleet runs a whole sale on two origins and an edge behind a
// round-robin load balancer, on PostgreSQL with Redis, and with the CI's
// Redis Cluster.
func TestFleet(t *testing.T) {
	t.Run("redis+postgres", func(t *testing.T) {
		_, prefix := testenv.Redis(t)
		runFleetSale(t, newFleet(t, testenv.RedisURL(), prefix))
	})
	t.Run("cluster+postgres", func(t *testing.T) {
		_, prefix := testenv.RedisCluster(t)
		runFleetSale(t, newFleet(t, testenv.RedisClusterURL(), prefix))
	})
}

func runFleetSale(t *testing.T, f *fleet) {
	const sku, units = "fleet", 20
	a, b, lb := f.targets[0], f.targets[1], f.lb.URL

	// Created through the balancer: every server serves it, and from
	// then on none denies it.
	r := f.admin(lb, "POST", "/admin/sales", map[string]any{"sku": sku, "name": "Fleet", "initialStock": units,
		"opensAt": f.clock.Now().Format(time.RFC3339Nano)})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	stopWatch := f.watch(sku)
	defer func() {
		if v := stopWatch(); len(v) > 0 {
			t.Errorf("a sale that existed was denied: %v", v)
		}
	}()
	f.published(sku, "open")
	var acks []acked

	// A race for the stock: sixty shoppers, twenty units, reserves
	// landing on either origin.
	won, lost := f.crowd(sku, users("race", 60))
	if len(won) != units || len(lost) != 60-units {
		t.Fatalf("%d won, %d sold out; want %d and %d", len(won), len(lost), units, 60-units)
	}
	acks = append(acks, won...)
	f.checkRecord(sku, acks)
	// The figures are the gate's, shared: the snapshots read them again
	// once their second is up.
	f.clock.Advance(time.Second)
	f.published(sku, "sold_out")

	// Idempotent retries land on either origin, directly: the winner gets
	// its reservation again, not a second one; the loser its sold out.
	for _, w := range won[:5] {
		for _, base := range []string{a, b} {
			hdr := map[string]string{"Authorization": "Bearer " + f.jwt(w.user), "Idempotency-Key": w.key,
				"X-Admission-Token": w.admission}
			r := f.do(base, "POST", "/sale/"+sku+"/reserve", hdr, nil)
			var v struct{ ReservationID string }
			_ = json.Unmarshal(r.body, &v)
			if r.status != http.StatusCreated || v.ReservationID != w.id {
				t.Fatalf("%s's retry at %s: %d %s; want 201 with %s", w.user, base, r.status, r.body, w.id)
			}
		}
	}
	for _, l := range lost[:5] {
		if l.admission == "" {
			continue // told sold out by the waiting room, before any reserve
		}
		for _, base := range []string{a, b} {
			hdr := map[string]string{"Authorization": "Bearer " + f.jwt(l.user), "Idempotency-Key": l.key,
				"X-Admission-Token": l.admission}
			if r := f.do(base, "POST", "/sale/"+sku+"/reserve", hdr, nil); r.status != http.StatusConflict || r.code() != outSoldOut {
				t.Fatalf("%s's retry at %s: %d %s; want 409 sold_out", l.user, base, r.status, r.body)
			}
		}
	}

	// Paused through one origin: the other, and the edge, publish it
	// (with the clock still, by the notification alone), and the other
	// refuses reserves at once (the gate's flag is shared).
	if r := f.admin(a, "POST", "/admin/sales/"+sku+"/pause", map[string]any{"reason": "fleet drill"}); r.status != http.StatusOK {
		t.Fatalf("pause at origin-0: %d %s", r.status, r.body)
	}
	f.published(sku, "paused")
	hdr := map[string]string{"Authorization": "Bearer " + f.jwt(won[0].user), "Idempotency-Key": "other-key",
		"X-Admission-Token": won[0].admission}
	if r := f.do(b, "POST", "/sale/"+sku+"/reserve", hdr, nil); r.status != http.StatusServiceUnavailable || r.code() != "sale_paused" {
		t.Fatalf("a reserve at origin-1 while paused: %d %s", r.status, r.body)
	}
	if r := f.admin(b, "POST", "/admin/sales/"+sku+"/resume", nil); r.status != http.StatusOK {
		t.Fatalf("resume at origin-1: %d %s", r.status, r.body)
	}
	f.published(sku, "sold_out")

	// Five winners pay, five cancel, through the balancer; each repeats
	// it on the other origin and gets the same answer.
	for i, w := range won[:10] {
		auth := map[string]string{"Authorization": "Bearer " + f.jwt(w.user)}
		method, path, want := "POST", "/reservations/"+w.id+"/confirm", flashsale.ReservationConfirmed
		body := any(map[string]any{"paymentRef": "pay-" + w.user})
		if i >= 5 {
			method, path, want, body = "DELETE", "/reservations/"+w.id, flashsale.ReservationCancelled, nil
		}
		first := f.do(lb, method, path, auth, body)
		again := f.do(lb, method, path, auth, body)
		if first.status != http.StatusOK || again.status != http.StatusOK || !bytes.Equal(first.body, again.body) {
			t.Fatalf("%s %s twice: %d %s, then %d %s", method, path, first.status, first.body, again.status, again.body)
		}
		acks[i].state = want
	}
	f.checkRecord(sku, acks)
	f.clock.Advance(time.Second)
	f.published(sku, "open")
	// Units are back now, and a loser of the race who repeats its reserve
	// with the same key, on either origin (one of which never saw it), is
	// still told its first answer: final rejections are kept where every
	// server reads them, not in the process that gave them.
	for _, l := range lost[5:10] {
		if l.admission == "" {
			continue
		}
		for _, base := range []string{a, b} {
			hdr := map[string]string{"Authorization": "Bearer " + f.jwt(l.user), "Idempotency-Key": l.key,
				"X-Admission-Token": l.admission}
			if r := f.do(base, "POST", "/sale/"+sku+"/reserve", hdr, nil); r.status != http.StatusConflict || r.code() != outSoldOut {
				t.Fatalf("%s's retry at %s with units back: %d %s; want its first answer, 409 sold_out", l.user, base, r.status, r.body)
			}
		}
	}
	// The five cancelled units go to five of a new crowd of ten.
	won2, _ := f.crowd(sku, users("second", 10))
	if len(won2) != 5 {
		t.Fatalf("%d of the second crowd won the 5 cancelled units", len(won2))
	}
	acks = append(acks, won2...)
	f.checkRecord(sku, acks)

	// The holds nobody paid for expire, with the sweepers of both origins
	// racing for them (and their own rounds running too): each unit goes
	// back once.
	f.clock.Advance(time.Duration(flashsale.DefaultHoldSeconds+1) * time.Second)
	var wg sync.WaitGroup
	for _, eng := range f.origins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := eng.Sweeper.SweepOnce(context.Background()); err != nil {
				t.Errorf("sweep: %v", err)
			}
		}()
	}
	wg.Wait()
	expired := 0
	for i := range acks {
		if acks[i].state == flashsale.ReservationPending {
			acks[i].state = flashsale.ReservationExpired
			expired++
		}
	}
	if expired != 15 {
		t.Fatalf("%d holds left to expire; want 15", expired)
	}
	if totals := f.checkRecord(sku, acks); totals.Pending != 0 || totals.Confirmed != 5 || totals.Expired != 15 {
		t.Fatalf("after expiry: %+v", totals)
	}
	// The watcher's polls may have built a snapshot between the clock's
	// move and the sweep: the units back show once its second is up.
	f.clock.Advance(time.Second)
	f.published(sku, "open")

	// Rebuilt: paused through one origin, rebuilt through the other,
	// resumed through the first. Both catalogs carry the new epoch with
	// the clock still, and shoppers admitted under it buy the rest.
	before := f.catalogSale(1, sku).Epoch
	if r := f.admin(b, "POST", "/admin/sales/"+sku+"/pause", map[string]any{"reason": "rebuild drill"}); r.status != http.StatusOK {
		t.Fatalf("pause at origin-1: %d %s", r.status, r.body)
	}
	f.published(sku, "paused")
	if r := f.admin(a, "POST", "/admin/sales/"+sku+"/rebuild", nil); r.status != http.StatusOK {
		t.Fatalf("rebuild at origin-0: %d %s", r.status, r.body)
	}
	for i := range f.origins {
		f.eventually(func() string { return fmt.Sprintf("origin-%d's catalog has the rebuilt epoch", i) }, func() (bool, error) {
			return f.catalogSale(i, sku).Epoch == before+1, nil
		})
	}
	if r := f.admin(b, "POST", "/admin/sales/"+sku+"/resume", nil); r.status != http.StatusOK {
		t.Fatalf("resume at origin-1: %d %s", r.status, r.body)
	}
	f.published(sku, "open")
	won3, _ := f.crowd(sku, users("after-rebuild", 20))
	if len(won3) != 15 {
		t.Fatalf("%d won the 15 units left after the rebuild", len(won3))
	}
	acks = append(acks, won3...)
	if totals := f.checkRecord(sku, acks); totals.Pending != 15 || totals.Confirmed != 5 {
		t.Fatalf("at the end: %+v", totals)
	}
	f.clock.Advance(time.Second)
	f.published(sku, "sold_out")
}
