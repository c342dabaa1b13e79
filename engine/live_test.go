package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
)

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct {
	id    string
	event string
	data  string
}

// feed is one open live stream, read in the background.
type feed struct {
	t      *testing.T
	events chan sseEvent
	done   chan error // the stream's end: nil at EOF
	cancel context.CancelFunc
}

// openFeed opens path (a live route) with the given headers and checks it
// answers 200 text/event-stream.
func openFeed(t *testing.T, base, path string, hdr map[string]string) *feed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	f := &feed{t: t, events: make(chan sseEvent, 1024), done: make(chan error, 1), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					f.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[6:]
			}
		}
		f.done <- sc.Err()
	}()
	t.Cleanup(cancel)
	return f
}

// next returns the next event, failing after a deadline.
func (f *feed) next() sseEvent {
	f.t.Helper()
	select {
	case ev := <-f.events:
		return ev
	case err := <-f.done:
		f.t.Fatalf("the stream ended (%v) before an event", err)
	case <-time.After(10 * time.Second):
		f.t.Fatal("no event within 10s")
	}
	return sseEvent{}
}

// liveSale is the part of the event `sale` the tests read.
type liveSale struct {
	SKU       string           `json:"sku"`
	State     string           `json:"state"`
	Counter   *int64           `json:"counter"`
	Pending   int64            `json:"pending"`
	Confirmed int64            `json:"confirmed"`
	Waiting   int64            `json:"waiting"`
	Admitted  int64            `json:"admittedUpTo"`
	Rejection map[string]int64 `json:"rejections"`
	Invariant struct {
		OK bool `json:"ok"`
	} `json:"invariant"`
	Outbox *struct {
		Pending int64 `json:"pending"`
	} `json:"outbox"`
	At        time.Time  `json:"at"`
	SoldOutAt *time.Time `json:"soldOutAt"`
	Rates     struct {
		Seconds    float64            `json:"seconds"`
		Admissions float64            `json:"admissions"`
		Reserves   float64            `json:"reserves"`
		Wins       float64            `json:"wins"`
		Rejections map[string]float64 `json:"rejections"`
	} `json:"rates"`
}

// sale reads the next event, which must be a `sale`.
func (f *feed) sale() (sseEvent, liveSale) {
	f.t.Helper()
	ev := f.next()
	if ev.event != "sale" {
		f.t.Fatalf("event %q, want sale: %s", ev.event, ev.data)
	}
	var s liveSale
	if err := json.Unmarshal([]byte(ev.data), &s); err != nil {
		f.t.Fatalf("decode %s: %v", ev.data, err)
	}
	return ev, s
}

// round runs one round of the live feed a second later by the test's
// clock.
func (h *harness) round() {
	h.t.Helper()
	h.clock.Advance(time.Second)
	if err := h.eng.API.LiveOnce(context.Background()); err != nil {
		h.t.Fatalf("live round: %v", err)
	}
}

// The feed sends the sale's figures at once, then one event a round with
// the rates of the last seconds: admissions, reserves, units taken and
// rejections by code; and when the sale sells out, the moment it did.
func TestLiveFeedFigures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("LIVE1", map[string]any{"initialStock": 3})
		f := openFeed(t, h.srv.URL, "/admin/sales/LIVE1/live", nil)
		_, first := f.sale()
		if first.SKU != "LIVE1" || first.Counter == nil || *first.Counter != 3 || first.State != "open" || first.Outbox == nil {
			t.Fatalf("first event: %+v", first)
		}

		// Three shoppers take the three units; a fourth is told sold out.
		for _, u := range []string{"ann", "bob", "cat"} {
			if r := h.reserve("LIVE1", u, h.admit("LIVE1", u), "k-"+u, nil); r.status != http.StatusCreated {
				t.Fatalf("reserve %s: %d %s", u, r.status, r.body)
			}
		}
		if r := h.reserve("LIVE1", "dan", h.admit("LIVE1", "dan"), "k-dan", nil); r.code() != "sold_out" {
			t.Fatalf("reserve dan: %d %s, want sold_out", r.status, r.body)
		}
		h.round()
		ev, s := f.sale()
		if s.Counter == nil || *s.Counter != 0 || s.Pending != 3 || s.State != "sold_out" {
			t.Fatalf("after the rush: counter %v, pending %d, state %s", s.Counter, s.Pending, s.State)
		}
		if s.Rates.Seconds != 1 || s.Rates.Wins != 3 || s.Rates.Reserves != 4 || s.Rates.Admissions != 4 ||
			s.Rates.Rejections["sold_out"] != 1 {
			t.Fatalf("rates over the second: %+v", s.Rates)
		}
		if s.SoldOutAt == nil || !s.SoldOutAt.Equal(s.At) {
			t.Fatalf("soldOutAt %v, want this round's %v", s.SoldOutAt, s.At)
		}
		soldOut := *s.SoldOutAt

		// A quiet second: the rates fall as the window moves on; the
		// sold-out moment stays.
		h.round()
		ev2, s := f.sale()
		if s.Rates.Seconds != 2 || s.Rates.Wins != 1.5 || s.SoldOutAt == nil || !s.SoldOutAt.Equal(soldOut) {
			t.Fatalf("a second later: rates %+v, soldOutAt %v (want %v)", s.Rates, s.SoldOutAt, soldOut)
		}
		if id1, _ := strconv.ParseInt(ev.id, 10, 64); strconv.FormatInt(id1, 10) != ev.id || ev2.id <= ev.id {
			t.Fatalf("event ids %q then %q: want increasing numbers", ev.id, ev2.id)
		}

		// The gauges carry the same figures.
		if got := gauge(t, h.eng, "flashsale_sale_units_left", "LIVE1"); got != 0 {
			t.Fatalf("flashsale_sale_units_left %v, want 0", got)
		}
		if got := gauge(t, h.eng, "flashsale_sale_pending_units", "LIVE1"); got != 3 {
			t.Fatalf("flashsale_sale_pending_units %v, want 3", got)
		}
		if got := gauge(t, h.eng, "flashsale_sale_admitted", "LIVE1"); got != 4 {
			t.Fatalf("flashsale_sale_admitted %v, want 4", got)
		}
	})
}

// A client that reconnects with Last-Event-ID is sent the events it
// missed, from those the server keeps, before the new ones; one without it
// is sent a fresh figure at once. ?history= sends the points to chart
// first.
func TestLiveFeedResumes(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("LIVE2", map[string]any{"initialStock": 5})
	// Another console keeps the sale watched throughout.
	keeper := openFeed(t, h.srv.URL, "/admin/sales/LIVE2/live", nil)
	keeper.sale()
	f := openFeed(t, h.srv.URL, "/admin/sales/LIVE2/live", nil)
	seen, _ := f.sale()
	f.cancel()
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end when its client went")
	}
	// Missed while away: two rounds, a unit taken in between.
	h.round()
	h.buy("LIVE2", "ann")
	h.round()

	again := openFeed(t, h.srv.URL, "/admin/sales/LIVE2/live", map[string]string{"Last-Event-ID": seen.id})
	m1, s1 := again.sale()
	m2, s2 := again.sale()
	if m1.id <= seen.id || m2.id <= m1.id || *s1.Counter != 5 || *s2.Counter != 4 {
		t.Fatalf("resumed with %s then %s (counters %d, %d) after %s; want the two missed rounds, in order",
			m1.id, m2.id, *s1.Counter, *s2.Counter, seen.id)
	}
	h.round()
	if m3, _ := again.sale(); m3.id <= m2.id {
		t.Fatalf("after the missed events: %s, want a new round", m3.id)
	}

	// Rounds nobody watched read only what the gauges need: they are not
	// kept to resume from; a client back after them gets a full event.
	keeper.cancel()
	again.cancel()
	waitFor(t, "the subscribers to be let go", func() bool {
		before, _ := h.eng.RecordCalls()
		h.round()
		after, _ := h.eng.RecordCalls()
		return after-before <= 1
	})
	last := m2.id
	back := openFeed(t, h.srv.URL, "/admin/sales/LIVE2/live", map[string]string{"Last-Event-ID": last})
	if ev, s := back.sale(); ev.id <= last || s.Outbox == nil || *s.Counter != 4 {
		t.Fatalf("back after unwatched rounds: event %s (after %s), outbox %v, counter %d; want one full, fresh event",
			ev.id, last, s.Outbox, *s.Counter)
	}
	back.cancel()

	charted := openFeed(t, h.srv.URL, "/admin/sales/LIVE2/live?history=900", nil)
	ev := charted.next()
	var hist struct {
		Points []struct {
			UnitsLeft *int64 `json:"unitsLeft"`
		} `json:"points"`
	}
	if ev.event != "history" || json.Unmarshal([]byte(ev.data), &hist) != nil || len(hist.Points) < 4 ||
		*hist.Points[0].UnitsLeft != 5 || *hist.Points[len(hist.Points)-1].UnitsLeft != 4 {
		t.Fatalf("history: %s %s", ev.event, ev.data)
	}
	if _, s := charted.sale(); *s.Counter != 4 {
		t.Fatalf("after the history: counter %d", *s.Counter)
	}
	if r := h.do("GET", "/admin/sales/LIVE2/live?history=901", nil, nil); r.code() != "bad_request" {
		t.Fatalf("history=901: %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/admin/sales/NOPE/live", nil, nil); r.code() != "not_found" {
		t.Fatalf("an unknown sale: %d %s", r.status, r.body)
	}
}

// The record calls of a round do not grow with the subscribers: forty
// watchers cost the record what one does, and none costs it nothing but
// what the background services read anyway.
func TestLiveFeedReadsTheRecordOncePerRound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		h.createSale("LIVE3", map[string]any{"initialStock": 5})
		callsOfRound := func() int64 {
			t.Helper()
			before, _ := h.eng.RecordCalls()
			h.round()
			after, _ := h.eng.RecordCalls()
			return after - before
		}
		h.round() // the catalog's list of active sales is read
		idle := callsOfRound()

		feeds := []*feed{openFeed(t, h.srv.URL, "/admin/sales/LIVE3/live", nil)}
		feeds[0].sale()
		one := callsOfRound()
		feeds[0].sale()
		for range 39 {
			f := openFeed(t, h.srv.URL, "/admin/sales/LIVE3/live", nil)
			f.sale() // subscribed
			feeds = append(feeds, f)
		}
		forty := callsOfRound()
		for _, f := range feeds {
			f.sale() // every subscriber was sent the round
		}
		// A watched round reads the sale's totals, its outbox figures and
		// its invite counts (and a draw, for a drawn sale: not this one).
		// One call more at most: the catalog's list of sales, read every
		// few seconds of wall time, may fall in either round.
		if one > 4 || forty > one+1 || idle > 1 {
			t.Fatalf("record calls a round: %d with no subscriber, %d with one, %d with forty", idle, one, forty)
		}
		for _, f := range feeds {
			f.cancel()
		}
		waitFor(t, "the subscribers to be let go", func() bool { return callsOfRound() <= 1 })
	})
}

// Behind a load balancer each server runs its own feed over the shared
// gate, queue and record: the sale's figures agree everywhere, while each
// server's reserves and rejections a second are the traffic it answered.
func TestLiveFeedAcrossServers(t *testing.T) {
	h := newHarness(t, backend{name: "redis+postgres", redis: true, postgres: true})
	cfg := h.eng.Config
	cfg.DataDir = t.TempDir()
	other, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(other.Handler)
	t.Cleanup(func() { srv.Close(); other.Close() })

	h.createSale("LIVE4", map[string]any{"initialStock": 4})
	here := openFeed(t, h.srv.URL, "/admin/sales/LIVE4/live", nil)
	there := openFeed(t, srv.URL, "/admin/sales/LIVE4/live", nil)
	here.sale()
	there.sale()
	h.buy("LIVE4", "ann")
	h.buy("LIVE4", "bob")
	h.clock.Advance(time.Second)
	for _, e := range []*engine.Engine{h.eng, other} {
		if err := e.API.LiveOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	_, a := here.sale()
	_, b := there.sale()
	if *a.Counter != 2 || *b.Counter != 2 || a.Confirmed != 2 || b.Confirmed != 2 || a.Rates.Wins != 2 || b.Rates.Wins != 2 {
		t.Fatalf("the sale's figures: here %+v, there %+v; want the same", a, b)
	}
	if a.Rates.Reserves != 2 || b.Rates.Reserves != 0 {
		t.Fatalf("reserves a second: here %v, there %v; want each server's own (2, 0)", a.Rates.Reserves, b.Rates.Reserves)
	}
}

// CloseStreams (what a graceful shutdown calls) ends every open stream at
// once, and refuses new ones.
func TestLiveFeedEndsAtShutdown(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("LIVE5", nil)
	f := openFeed(t, h.srv.URL, "/admin/sales/LIVE5/live", nil)
	list := openFeed(t, h.srv.URL, "/admin/live", nil)
	f.sale()
	if ev := list.next(); ev.event != "sales" || !strings.Contains(ev.data, `"sku":"LIVE5"`) {
		t.Fatalf("the list: %s %s", ev.event, ev.data)
	}
	h.eng.CloseStreams()
	for _, s := range []*feed{f, list} {
		select {
		case err := <-s.done:
			if err != nil {
				t.Fatalf("the stream ended with %v, want EOF", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a stream still open 5s after CloseStreams")
		}
	}
	if r := h.do("GET", "/admin/sales/LIVE5/live", nil, nil); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("a stream after CloseStreams: %d %s", r.status, r.body)
	}
}

// A stream outlives the server's read and write timeouts (serve sets 10s
// and 30s): the write timeout would cut it, had each write not its own
// deadline.
func TestLiveFeedOutlivesServerTimeouts(t *testing.T) {
	h := newHarness(t, backends[0])
	h.createSale("LIVE6", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.eng.Handler, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	f := openFeed(t, "http://"+ln.Addr().String(), "/admin/sales/LIVE6/live", nil)
	f.sale()
	time.Sleep(time.Second) // past both timeouts: what is tested is that they no longer apply
	h.round()
	f.sale()
}

// A retired sale leaves the metrics: none of its series stays behind.
func TestRetiredSaleLeavesMetrics(t *testing.T) {
	h := newHarness(t, backends[0], func(c *engine.Config) { c.RetireAfter = time.Hour })
	closes := start.Add(time.Minute)
	h.createSale("GONE", map[string]any{"initialStock": 2, "closesAt": closes.Format(time.RFC3339)})
	h.buy("GONE", "ann")
	ctx := context.Background()
	if err := h.eng.Watcher.CheckAll(ctx); err != nil {
		t.Fatal(err)
	}
	h.round()
	if n := seriesOf(t, h.eng, "GONE"); n < 8 {
		t.Fatalf("%d series of the open sale; want its gauges", n)
	}
	h.clock.Set(closes.Add(time.Hour))
	h.round()
	if done, err := h.eng.Retirer.RetireOnce(ctx); err != nil || len(done) != 1 {
		t.Fatalf("retire: %v %v", done, err)
	}
	h.round()
	if n := seriesOf(t, h.eng, "GONE"); n != 0 {
		t.Fatalf("%d series of the retired sale remain", n)
	}
}

// gauge returns the value of the metric's series for the sku.
func gauge(t *testing.T, e *engine.Engine, name, sku string) float64 {
	t.Helper()
	families, err := e.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sku" && l.GetValue() == sku {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{sku=%q}", name, sku)
	return 0
}

// seriesOf counts the series labelled with the sku.
func seriesOf(t *testing.T, e *engine.Engine, sku string) int {
	t.Helper()
	families, err := e.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sku" && l.GetValue() == sku {
					n++
				}
			}
		}
	}
	return n
}

// The console's page and files hold no data: with an admin token they are
// served to anyone (a browser opening a page cannot send the token; every
// figure is fetched with it); without one, only on loopback, like the
// operator routes.
func TestConsolePageServed(t *testing.T) {
	get := func(h http.Handler, path, remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	open := newHarness(t, backends[0])
	w := get(open.eng.Handler, "/admin/", "127.0.0.1:5000")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "/admin/assets/console.js") ||
		!strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /admin/ on loopback: %d %q %s", w.Code, w.Header(), w.Body.String()[:min(200, w.Body.Len())])
	}
	if w := get(open.eng.Handler, "/admin/assets/console.js", "127.0.0.1:5000"); w.Code != http.StatusOK ||
		!strings.Contains(w.Header().Get("Content-Type"), "javascript") {
		t.Fatalf("GET console.js: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	if w := get(open.eng.Handler, "/admin/", "192.0.2.7:5000"); w.Code != http.StatusForbidden {
		t.Fatalf("GET /admin/ from afar without an admin token: %d, want 403", w.Code)
	}
	for _, p := range []string{"/admin/assets/", "/admin/assets/nope.js"} {
		if w := get(open.eng.Handler, p, "127.0.0.1:5000"); w.Code != http.StatusNotFound {
			t.Fatalf("GET %s: %d, want 404", p, w.Code)
		}
	}

	guarded := newHarness(t, backends[0], func(c *engine.Config) { c.AdminToken = "s3cret" })
	if w := get(guarded.eng.Handler, "/admin/", "192.0.2.7:5000"); w.Code != http.StatusOK {
		t.Fatalf("GET /admin/ from afar with an admin token configured: %d, want the page", w.Code)
	}
	if w := get(guarded.eng.Handler, "/admin/sales", "192.0.2.7:5000"); w.Code != http.StatusUnauthorized {
		t.Fatalf("GET /admin/sales without the token: %d, want 401", w.Code)
	}
	if w := get(guarded.eng.Handler, "/admin/live", "192.0.2.7:5000"); w.Code != http.StatusUnauthorized {
		t.Fatalf("GET /admin/live without the token: %d, want 401", w.Code)
	}
}
