package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/internal/testenv"
)

// needFaults skips t unless the fault suite was asked for.
func needFaults(t *testing.T) {
	t.Helper()
	if os.Getenv("FLASHSALE_FAULTS") == "" {
		t.Skip("the fault suite runs only with FLASHSALE_FAULTS=1 (.ci/run sets it in a step of its own)")
	}
}

// row is one line of the fault table.
type row struct {
	fault string
	// failClosed is the longest a request took to be told 503 while the
	// fault lasted; detect is how long the invariant took to pause the
	// sale after the counter drifted. Zero: not measured by this fault.
	failClosed, detect time.Duration
	retried            int64
	initial            int
	sold, pending      int64
	counter            int64
	oversold           int64
}

var (
	tableMu sync.Mutex
	table   []row
)

func record(r row) {
	tableMu.Lock()
	table = append(table, r)
	tableMu.Unlock()
}

func TestMain(m *testing.M) {
	code := m.Run()
	sort.Slice(table, func(i, j int) bool { return table[i].fault < table[j].fault })
	if len(table) > 0 {
		printTable(os.Stdout)
	}
	os.Exit(code)
}

func printTable(w io.Writer) {
	ms := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-70s %12s %12s %8s %8s %5s %8s %8s %8s\n",
		"fault", "fail closed", "drift found", "retried", "initial", "sold", "pending", "counter", "oversold")
	fmt.Fprintln(w, strings.Repeat("-", 150))
	for _, r := range table {
		fmt.Fprintf(w, "%-70s %12s %12s %8d %8d %5d %8d %8d %8d\n",
			r.fault, ms(r.failClosed), ms(r.detect), r.retried, r.initial, r.sold, r.pending, r.counter, r.oversold)
	}
	fmt.Fprintln(w)
}

// rig is an engine on Redis and PostgreSQL behind an httptest server,
// with a direct Redis client (never through a fault proxy) to inspect the
// gate and play the second writer.
type rig struct {
	t      *testing.T
	eng    *engine.Engine
	srv    *httptest.Server
	http   *http.Client
	redis  rueidis.Client
	prefix string
	now    func() time.Time
	clock  *testenv.Clock

	retried atomic.Int64

	mu      sync.Mutex
	reqs    []request
	knocked []outcome // the 201s the knockers got
}

// request is one reserve as a shopper saw it.
type request struct {
	user       string
	start, end time.Time
	status     int
	code       string
}

// rigConfig says where the engine's gate and record are.
type rigConfig struct {
	// redisURL is what the engine dials (a proxy, or a private server);
	// redisDirect is the same Redis without the proxy. Empty: the shared
	// test Redis, directly.
	redisURL, redisDirect string
	// databaseURL is what the engine dials. Empty: a schema of the shared
	// test PostgreSQL.
	databaseURL string
	// clock, when set, is the engine's clock; nil is real time.
	clock *testenv.Clock
	// start runs the background services (warmer, sweeper, watcher).
	start bool
	tweak func(*engine.Config)
}

func newRig(t *testing.T, rc rigConfig) *rig {
	t.Helper()
	r := &rig{t: t, now: time.Now, clock: rc.clock}
	if rc.clock != nil {
		r.now = rc.clock.Now
	}
	cfg := engine.Config{
		DataDir:           t.TempDir(),
		Now:               r.now,
		Source:            "fault-server",
		SweepInterval:     200 * time.Millisecond,
		WarmInterval:      200 * time.Millisecond,
		InvariantInterval: time.Second,
		OrphanGrace:       5 * time.Second, // longer than a record write may take (3s)
		// GateTimeout stays at its production default (500ms): failing
		// closed within a second is what is measured.
		//
		// The shoppers here retry as hard as the faults make them, from
		// few accounts; the purchase rate limits would turn those retries
		// away before the fault is exercised, so they are off (their own
		// tests are in engine/bots_test.go).
		ReserveBurst: -1,
	}
	if rc.redisDirect == "" {
		var client rueidis.Client
		client, r.prefix = testenv.Redis(t)
		r.redis = client
		if rc.redisURL == "" {
			rc.redisURL = testenv.RedisURL()
		}
	} else {
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{hostOf(rc.redisDirect)},
			DisableCache: true, ForceSingleClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(client.Close)
		r.redis, r.prefix = client, "fsfault:"+testenv.Suffix()+":"
	}
	cfg.RedisURL, cfg.RedisPrefix = rc.redisURL, r.prefix
	cfg.DatabaseURL = rc.databaseURL
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = testenv.Postgres(t)
	}
	if rc.tweak != nil {
		rc.tweak(&cfg)
	}
	eng, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	r.eng = eng
	r.srv = httptest.NewServer(eng.Handler)
	r.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	ctx, stop := context.WithCancel(context.Background())
	if rc.start {
		eng.Start(ctx)
	}
	t.Cleanup(func() {
		stop()
		eng.Stop()
		// A failed drill may leave shoppers mid-request: cut them off
		// rather than wait for them.
		r.srv.CloseClientConnections()
		r.srv.Close()
		eng.Close()
	})
	return r
}

// hostOf returns the host:port of a redis:// or postgres:// URL.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return u.Host
}

// viaProxy returns raw with its host:port replaced by addr.
func viaProxy(raw, addr string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Host = addr
	return u.String()
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (r response) field(name string) string {
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	s, _ := m[name].(string)
	return s
}

// do sends one request; a transport error is status 0.
func (r *rig) do(method, path string, headers map[string]string, body any) response {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, r.srv.URL+path, rd)
	if err != nil {
		panic(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return response{}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func (r *rig) jwt(user string) string {
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), user, 720*time.Hour, r.now(), 24*time.Hour)
	if err != nil {
		panic(err)
	}
	return tok
}

func (r *rig) auth(user string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + r.jwt(user)}
}

// createSale creates an open sale of initial units.
func (r *rig) createSale(sku string, initial int, fields map[string]any) *flashsale.Sale {
	r.t.Helper()
	body := map[string]any{"sku": sku, "name": "Fault " + sku, "initialStock": initial,
		"opensAt": r.now().Add(-time.Second).Format(time.RFC3339Nano)}
	for k, v := range fields {
		body[k] = v
	}
	if resp := r.do("POST", "/admin/sales", nil, body); resp.status != http.StatusCreated {
		r.t.Fatalf("create sale: %d %s", resp.status, resp.body)
	}
	return r.sale(sku)
}

// sale reads the sale from the record.
func (r *rig) sale(sku string) *flashsale.Sale {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := r.eng.Store.SaleBySKU(ctx, sku)
	if err != nil {
		r.t.Fatalf("read sale %s: %v", sku, err)
	}
	return s
}

// saleState reads the sale's state from the record, "" if it cannot.
func (r *rig) saleState(sku string) flashsale.SaleState {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := r.eng.Store.SaleBySKU(ctx, sku)
	if err != nil {
		return ""
	}
	return s.State
}

// waitUntil polls cond until it holds or the deadline passes; it returns
// how long that took.
func (r *rig) waitUntil(what string, within time.Duration, cond func() bool) time.Duration {
	r.t.Helper()
	began := time.Now()
	for !cond() {
		if time.Since(began) > within {
			r.t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(began)
}

// outcome is how one shopper's attempt ended.
type outcome struct {
	user string
	// status and code of the final answer; reservation and body of a 201.
	status      int
	code        string
	reservation string
	body        string
	// confirmed: the shopper paid and has an order; cancelled: the
	// shopper cancelled.
	confirmed, cancelled bool
	err                  string
}

// shopperPlan says what a shopper does after winning.
type shopperPlan struct {
	confirm, cancel bool
	// twice sends every request twice at once, as a client whose
	// network delivers each request twice.
	twice bool
}

// backoff is the pause between a shopper's retries: short, so the drills
// stay quick, with jitter so retries do not march in step.
func backoff() { time.Sleep(time.Duration(20+rand.IntN(30)) * time.Millisecond) }

// admit takes the shopper through the waiting room. It returns the
// admission token, or a final code ("sold_out", "closed") when there is
// nothing to wait for.
func (r *rig) admit(ctx context.Context, sku, user string) (admission, final string) {
	for ctx.Err() == nil {
		resp := r.do("GET", "/sale/"+sku+"/ticket", r.auth(user), nil)
		switch {
		case resp.status == http.StatusOK:
		case resp.status == http.StatusConflict:
			return "", resp.code()
		default:
			r.retried.Add(1)
			backoff()
			continue
		}
		st := r.do("GET", "/sale/"+sku+"/status?token="+url.QueryEscape(resp.field("token")), nil, nil)
		switch st.field("state") {
		case "admitted":
			return st.field("admissionToken"), ""
		case "sold_out", "closed", "not_selected":
			return "", st.field("state")
		}
		r.retried.Add(1)
		backoff()
	}
	return "", "gave_up"
}

// shop is one shopper: admitted, it reserves with one Idempotency-Key,
// repeating the same request on every answer that asks to come back, until
// a final answer; a winner then confirms or cancels as planned.
func (r *rig) shop(ctx context.Context, sku, user string, plan shopperPlan) outcome {
	out := outcome{user: user}
	adm, final := r.admit(ctx, sku, user)
	if final != "" {
		out.code = final
		return out
	}
	key := "key-" + user
	for {
		if ctx.Err() != nil {
			out.err = "gave up: the sale never answered finally"
			return out
		}
		resp := r.reserveOnce(sku, user, adm, key, plan.twice, &out)
		if out.err != "" {
			return out
		}
		switch {
		case resp.status == http.StatusCreated:
			out.status, out.reservation, out.body = resp.status, resp.field("reservationId"), string(resp.body)
		case resp.status == http.StatusConflict || resp.code() == "admission_used":
			out.status, out.code = resp.status, resp.code()
			return out
		case resp.code() == "admission_expired" || resp.code() == "admission_invalid":
			// Admitted before a rebuild: back through the waiting room,
			// the same request under the same key.
			r.retried.Add(1)
			if adm, final = r.admit(ctx, sku, user); final != "" {
				out.code = final
				return out
			}
			continue
		case resp.status == http.StatusServiceUnavailable || resp.status == 0:
			r.retried.Add(1)
			backoff()
			continue
		default:
			out.err = fmt.Sprintf("reserve: unexpected %d %s", resp.status, resp.body)
			return out
		}
		break
	}
	if plan.twice {
		// And delivered once more, late: the replay is the first answer.
		again := r.reserveOnce(sku, user, adm, key, false, &out)
		if again.status != http.StatusCreated || string(again.body) != out.body {
			out.err = fmt.Sprintf("a late copy of the reserve got %d %s, the first %s", again.status, again.body, out.body)
		}
	}
	switch {
	case plan.confirm:
		for ctx.Err() == nil {
			resp := r.twice(plan.twice, "POST", "/reservations/"+out.reservation+"/confirm", r.auth(user), map[string]string{"paymentRef": "pay-" + user}, &out)
			if resp.status == http.StatusOK {
				out.confirmed = true
				break
			}
			if resp.code() == "reservation_expired" {
				break // the hold lapsed before the shopper paid
			}
			if resp.status != http.StatusServiceUnavailable && resp.status != 0 {
				out.err = fmt.Sprintf("confirm: %d %s", resp.status, resp.body)
				break
			}
			r.retried.Add(1)
			backoff()
		}
	case plan.cancel:
		for ctx.Err() == nil {
			resp := r.twice(plan.twice, "DELETE", "/reservations/"+out.reservation, r.auth(user), nil, &out)
			if resp.status == http.StatusOK {
				out.cancelled = true
				break
			}
			if resp.code() == "reservation_expired" {
				break // the sweeper took it first
			}
			if resp.status != http.StatusServiceUnavailable && resp.status != 0 {
				out.err = fmt.Sprintf("cancel: %d %s", resp.status, resp.body)
				break
			}
			r.retried.Add(1)
			backoff()
		}
	}
	return out
}

// reserveOnce sends the reserve (twice at once when dup is set, and then
// checks that both deliveries got the same answer) and logs it.
func (r *rig) reserveOnce(sku, user, adm, key string, dup bool, out *outcome) response {
	hdr := r.auth(user)
	hdr["Idempotency-Key"] = key
	hdr["X-Admission-Token"] = adm
	began := time.Now()
	resp := r.twice(dup, "POST", "/sale/"+sku+"/reserve", hdr, nil, out)
	r.mu.Lock()
	r.reqs = append(r.reqs, request{user: user, start: began, end: time.Now(), status: resp.status, code: resp.code()})
	r.mu.Unlock()
	if resp.status >= 500 && resp.status != http.StatusServiceUnavailable {
		out.err = fmt.Sprintf("reserve: %d %s", resp.status, resp.body)
	}
	return resp
}

// twice sends a request, or, with dup, sends it twice at once and checks
// that both got the same final answer (an answer that asks to come back,
// a 503, may differ: the two can land on either side of a fault).
func (r *rig) twice(dup bool, method, path string, hdr map[string]string, body any, out *outcome) response {
	if !dup {
		return r.do(method, path, hdr, body)
	}
	var a, b response
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = r.do(method, path, hdr, body) }()
	go func() { defer wg.Done(); b = r.do(method, path, hdr, body) }()
	wg.Wait()
	r.retried.Add(1)
	final := func(x response) bool { return x.status != 0 && x.status != http.StatusServiceUnavailable }
	if final(a) && final(b) && (a.status != b.status || !bytes.Equal(a.body, b.body)) {
		out.err = fmt.Sprintf("%s %s delivered twice got two answers: %d %s and %d %s", method, path, a.status, a.body, b.status, b.body)
	}
	if !final(a) {
		return b
	}
	return a
}

// load is shoppers at work on a sale.
type load struct {
	won  atomic.Int64
	done chan struct{}

	mu       sync.Mutex
	outcomes []outcome
}

// startLoad sends n shoppers, workers at a time, each with a plan.
func (r *rig) startLoad(ctx context.Context, sku string, n, workers int, plan func(i int) shopperPlan) *load {
	l := &load{done: make(chan struct{})}
	next := make(chan int)
	go func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := r.shop(ctx, sku, fmt.Sprintf("shopper-%04d", i), plan(i))
				if o.status == http.StatusCreated {
					l.won.Add(1)
				}
				l.mu.Lock()
				l.outcomes = append(l.outcomes, o)
				l.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

// wait waits for every shopper to finish.
func (l *load) wait(t *testing.T, within time.Duration) []outcome {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(within):
		t.Fatalf("the shoppers did not finish within %v", within)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.outcomes)
}

// untilWon waits until the shoppers have won n reservations.
func (r *rig) untilWon(l *load, n int64) {
	r.t.Helper()
	r.waitUntil(fmt.Sprintf("%d reservations won", n), 60*time.Second, func() bool { return l.won.Load() >= n })
}

// knock sends, for each of the admitted shoppers, one reserve now, all at
// once, and waits for the answers: shoppers at the door while a fault
// lasts, whatever the load's own shoppers are doing at that moment.
func (r *rig) knock(sku string, admitted map[string]string) {
	var wg sync.WaitGroup
	for user, adm := range admitted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := outcome{user: user}
			resp := r.reserveOnce(sku, user, adm, "knock-"+user, false, &out)
			if out.err != "" {
				r.t.Errorf("%s: %s", user, out.err)
			}
			if resp.status == http.StatusCreated {
				// A write that waited out the fault: verify checks its row.
				out.status, out.reservation, out.body = resp.status, resp.field("reservationId"), string(resp.body)
				r.mu.Lock()
				r.knocked = append(r.knocked, out)
				r.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// admitted admits n shoppers of the test's own (who reserve only when
// they knock) and returns their admission tokens.
func (r *rig) admitted(sku string, n int) map[string]string {
	r.t.Helper()
	out := map[string]string{}
	for i := 0; i < n; i++ {
		user := fmt.Sprintf("knocker-%02d", i)
		adm, final := r.admit(context.Background(), sku, user)
		if final != "" {
			r.t.Fatalf("admit %s: %s", user, final)
		}
		out[user] = adm
	}
	return out
}

// answersBetween returns the reserves that began in [from, to).
func (r *rig) answersBetween(from, to time.Time) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.reqs {
		if !q.start.Before(from) && q.start.Before(to) {
			out = append(out, q)
		}
	}
	return out
}

// failClosed checks that every reserve that began while the fault lasted
// was answered within limit, 503 with one of codes (or, with won, 201: a
// write that waited out the fault within its timeout), and returns the
// longest it took.
func (r *rig) failClosed(from, to time.Time, limit time.Duration, won bool, codes ...string) time.Duration {
	r.t.Helper()
	reqs := r.answersBetween(from, to)
	if len(reqs) == 0 {
		r.t.Fatalf("no reserve was sent while the fault lasted; the drill proved nothing")
	}
	var longest time.Duration
	for _, q := range reqs {
		d := q.end.Sub(q.start)
		longest = max(longest, d)
		if won && q.status == http.StatusCreated {
			continue
		}
		if q.status != http.StatusServiceUnavailable || !slices.Contains(codes, q.code) {
			r.t.Errorf("reserve by %s during the fault: %d %s, want 503 %v", q.user, q.status, q.code, codes)
		}
		if d > limit {
			r.t.Errorf("reserve by %s during the fault took %v, want under %v", q.user, d, limit)
		}
	}
	return longest
}

// rebuildAndResume is the operator's recovery of a sale paused because its
// gate failed: rebuild the counter from the record (repeated until the
// gate answers), then resume.
func (r *rig) rebuildAndResume(sku string) {
	r.t.Helper()
	var last response
	defer func() {
		if r.t.Failed() {
			_, err := r.eng.Control.Rebuild(context.Background(), sku)
			r.t.Logf("last rebuild answer: %d %s (%v)", last.status, last.body, err)
		}
	}()
	r.waitUntil("rebuild", 20*time.Second, func() bool {
		last = r.do("POST", "/admin/sales/"+sku+"/rebuild", nil, nil)
		return last.status == http.StatusOK
	})
	r.waitUntil("resume", 20*time.Second, func() bool {
		resp := r.do("POST", "/admin/sales/"+sku+"/resume", nil, nil)
		return resp.status == http.StatusOK
	})
}

// operate resumes the sale whenever it is paused (rebuilding first when
// resume asks for it), until ctx ends; it counts the pauses it lifted.
func (r *rig) operate(ctx context.Context, sku string) *atomic.Int64 {
	var lifted atomic.Int64
	go func() {
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			if r.saleState(sku) != flashsale.SalePaused {
				continue
			}
			resp := r.do("POST", "/admin/sales/"+sku+"/resume", nil, nil)
			if resp.code() == "rebuild_required" {
				if r.do("POST", "/admin/sales/"+sku+"/rebuild", nil, nil).status == http.StatusOK {
					resp = r.do("POST", "/admin/sales/"+sku+"/resume", nil, nil)
				}
			}
			if resp.status == http.StatusOK {
				lifted.Add(1)
			}
		}
	}()
	return &lifted
}

// settle waits until every hold the gate keeps is one the record keeps
// too: the background sweeper and reconciler have finished whatever the
// fault left halfway (restocks and voids whose second step failed).
func (r *rig) settle(sku string) {
	r.t.Helper()
	sale := r.sale(sku)
	ctx := context.Background()
	var last string
	began := time.Now()
	for {
		snap, err1 := r.eng.Gate.Snapshot(ctx, sale.ID)
		totals, err2 := r.eng.Store.SaleTotals(ctx, sale.ID)
		if err1 == nil && err2 == nil && snap.Held() == totals.Confirmed+totals.Pending {
			return
		}
		last = fmt.Sprintf("gate %+v, record %+v, errors %v %v", snap, totals, err1, err2)
		if time.Since(began) > 20*time.Second {
			r.t.Fatalf("the gate and the record did not settle: %s", last)
		}
		if r.clock != nil {
			// Nothing runs in the background on the test's clock: move
			// past the orphan grace, then sweep and reconcile.
			r.clock.Advance(6 * time.Second)
			_, _ = r.eng.Sweeper.SweepOnce(ctx)
			_, _ = r.eng.Sweeper.ReconcileAll(ctx)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verify checks the end of a drill: counter + confirmed + pending ==
// initial, the gate agrees with the record, nothing oversold, every 201 a
// shopper saw has a durable row in the state the shopper left it, no
// shopper holds twice, and every unit that came back came back once. It
// records the drill's row.
func (r *rig) verify(sku string, outcomes []outcome, fr row) {
	r.t.Helper()
	ctx := context.Background()
	sale := r.sale(sku)
	r.mu.Lock()
	outcomes = append(outcomes, r.knocked...)
	r.mu.Unlock()
	for _, o := range outcomes {
		if o.err != "" {
			r.t.Errorf("%s: %s", o.user, o.err)
		}
	}
	snap, err := r.eng.Gate.Snapshot(ctx, sale.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	totals, err := r.eng.Store.SaleTotals(ctx, sale.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	initial := int64(sale.InitialStock)
	live := totals.Confirmed + totals.Pending
	if !snap.Loaded {
		r.t.Fatalf("the gate has no counter at the end: %+v", snap)
	}
	if got := snap.Counter + live; got != initial {
		r.t.Errorf("counter %d + confirmed %d + pending %d = %d, want initial %d", snap.Counter, totals.Confirmed, totals.Pending, got, initial)
	}
	if snap.Drift() != 0 || snap.Held() != live || snap.Counter < 0 {
		r.t.Errorf("gate %+v disagrees with the record %+v", snap, totals)
	}
	oversold := max(0, live-initial)
	if oversold != 0 {
		r.t.Errorf("OVERSOLD by %d", oversold)
	}

	// Every 201 is a durable row, in the state its shopper left it.
	won := map[string]string{}
	for _, o := range outcomes {
		if o.status != http.StatusCreated {
			continue
		}
		if prev, ok := won[o.user]; ok && prev != o.reservation {
			r.t.Errorf("%s won twice: %s and %s", o.user, prev, o.reservation)
		}
		won[o.user] = o.reservation
		res, err := r.eng.Store.Reservation(ctx, o.reservation)
		if err != nil {
			r.t.Errorf("%s was told 201 %s, but the record has no row: %v", o.user, o.reservation, err)
			continue
		}
		want := flashsale.ReservationPending
		switch {
		case o.confirmed:
			want = flashsale.ReservationConfirmed
		case o.cancelled:
			want = flashsale.ReservationCancelled
		}
		if res.State != want && !(want == flashsale.ReservationPending && res.State == flashsale.ReservationExpired) {
			r.t.Errorf("%s's reservation %s is %s, want %s", o.user, o.reservation, res.State, want)
		}
	}
	r.exactlyOnce(sale)

	fr.initial = sale.InitialStock
	fr.sold, fr.pending, fr.counter, fr.oversold = totals.Confirmed, totals.Pending, snap.Counter, oversold
	fr.retried += r.retried.Load()
	record(fr)
	r.t.Logf("%s: %+v", fr.fault, fr)
}

// exactlyOnce reads the gate's audit log: every hold the gate took was
// taken once; a hold the record keeps live was never given back; a hold
// the record ended (expired, cancelled, voided) or never took was given
// back exactly once. Audit entries before the last rebuild are the old
// epoch's, which the rebuild replaced with the record's truth, so only a
// hold's give-backs after its last take count.
func (r *rig) exactlyOnce(sale *flashsale.Sale) {
	r.t.Helper()
	ctx := context.Background()
	entries, err := r.eng.Gate.Audit(ctx, sale.ID, 100_000)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(entries) > 0 && entries[0].Seq != 1 {
		r.t.Fatalf("the audit log was trimmed (first entry %d); the drill is too large to check", entries[0].Seq)
	}
	// From the last rebuild on (or the whole log).
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Op == "rebuild" {
			entries = entries[i+1:]
			break
		}
	}
	taken := map[string]int{}
	given := map[string]int{}
	for _, e := range entries {
		switch e.Op {
		case "reserve":
			taken[e.ReservationID]++
		case "restock", "void":
			given[e.ReservationID]++
		}
	}
	holds, err := r.eng.Gate.Holds(ctx, sale.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	ids := make([]string, 0, len(taken)+len(holds))
	for id := range taken {
		ids = append(ids, id)
	}
	for _, h := range holds {
		ids = append(ids, h.ReservationID)
	}
	sort.Strings(ids)
	ids = slices.Compact(ids)
	states, err := r.eng.Store.ReservationStates(ctx, sale.ID, ids)
	if err != nil {
		r.t.Fatal(err)
	}
	inGate := map[string]bool{}
	for _, h := range holds {
		inGate[h.ReservationID] = true
	}
	for _, id := range ids {
		state, known := states[id]
		switch {
		case taken[id] > 1:
			r.t.Errorf("hold %s was taken %d times", id, taken[id])
		case known && state.Live():
			if given[id] != 0 {
				r.t.Errorf("live hold %s (%s) was given back %d times", id, state, given[id])
			}
			if !inGate[id] {
				r.t.Errorf("live hold %s (%s) is not in the gate", id, state)
			}
		case taken[id] == 1 && given[id] != 1:
			r.t.Errorf("hold %s (%s in the record, known %v) was given back %d times, want once", id, state, known, given[id])
		case taken[id] == 0 && given[id] > 1:
			// A hold the rebuild put back, ended after it.
			r.t.Errorf("rebuilt hold %s (%s) was given back %d times", id, state, given[id])
		}
	}
}
