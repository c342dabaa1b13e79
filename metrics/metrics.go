// Package metrics defines the Prometheus collectors of the funnel: requests
// and rejections by layer and code, gate latency, the invariant's state, and
// the outbox (pending events, lag, dead letters, deliveries).
//
// A nil *Metrics is valid and records nothing, so services and tests that do
// not care about metrics pass nil.
//
// Overselling is neither prevented nor caused here; the invariant's figures
// (package invariant) are published here.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Layers of the funnel, cheapest first, used to label rejections.
const (
	LayerQueue       = "queue"
	LayerAdmission   = "admission"
	LayerEligibility = "eligibility"
	LayerGate        = "gate"
	LayerRecord      = "record"
	// LayerCapacity sheds what the purchase path has no slot for
	// (package bulkhead), before any of the layers behind it is asked.
	LayerCapacity = "capacity"
)

// Metrics holds the collectors. Safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	recordCalls    *prometheus.CounterVec
	rejections     *prometheus.CounterVec
	gateSeconds    *prometheus.HistogramVec
	gateErrors     *prometheus.CounterVec
	reserved       *prometheus.CounterVec
	restocked      *prometheus.CounterVec
	invariantOK    *prometheus.GaugeVec
	invariantDiff  *prometheus.GaugeVec
	invariantAt    *prometheus.GaugeVec
	salePaused     *prometheus.GaugeVec
	// The per-sale gauges of the live feed (Sale), labelled by SKU; a
	// sale leaves them, and every other per-sale series, when it is
	// retired (ForgetSale).
	saleUnits     *prometheus.GaugeVec
	salePending   *prometheus.GaugeVec
	saleConfirmed *prometheus.GaugeVec
	saleWaiting   *prometheus.GaugeVec
	saleAdmitted  *prometheus.GaugeVec
	saleWarm      *prometheus.GaugeVec

	outboxPending   prometheus.Gauge
	outboxLag       prometheus.Gauge
	outboxDead      prometheus.Gauge
	outboxDelivered *prometheus.CounterVec
	outboxRetried   *prometheus.CounterVec
	outboxBuried    *prometheus.CounterVec
	outboxLatency   *prometheus.HistogramVec
	// byRoute caches the request collectors of each route and status: the
	// label lookup (hashing both labels) was a measurable part of a poll.
	byRouteMu sync.RWMutex
	byRoute   map[routeStatus]routeCollectors
}

type routeStatus struct {
	route  string
	status int
}

type routeCollectors struct {
	count   prometheus.Counter
	seconds prometheus.Observer
}

// New registers the collectors, with the Go and process collectors, on a
// registry of their own (no global state).
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "status"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashsale_http_request_seconds",
			Help:    "HTTP request latency by route pattern.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		recordCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_record_calls_total",
			Help: "Calls to the record made by HTTP requests, by route pattern and outcome " +
				"(answered: 2xx/3xx; rejected: 4xx/5xx). The funnel's promise: none for a rejected shopper request.",
		}, []string{"route", "outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_rejections_total",
			Help: "Requests told no, by funnel layer and contract error code.",
		}, []string{"layer", "code"}),
		gateSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashsale_gate_seconds",
			Help:    "Latency of stock gate calls by operation.",
			Buckets: []float64{.00001, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"op"}),
		gateErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_gate_errors_total",
			Help: "Stock gate calls that failed (the sale fails closed).",
		}, []string{"op"}),
		reserved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_reserved_units_total",
			Help: "Units held by new reservations, by sale SKU.",
		}, []string{"sku"}),
		restocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_restocked_units_total",
			Help: "Units returned to stock, by source (sweeper, cancel, void, reconcile).",
		}, []string{"source"}),
		invariantOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_invariant_ok",
			Help: "1 if counter + confirmed + pending == initial holds for the sale (allowing for holds in flight), else 0.",
		}, []string{"sku"}),
		invariantDiff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_invariant_difference",
			Help: "counter + confirmed + pending - initial at the last check; positive means units that do not exist could be sold.",
		}, []string{"sku"}),
		invariantAt: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_invariant_checked_timestamp_seconds",
			Help: "Unix time of the last invariant check of the sale.",
		}, []string{"sku"}),
		salePaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_sale_paused",
			Help: "1 while the sale is paused, on the series of why (reason: operator, gate or invariant); 0 on the others.",
		}, []string{"sku", "reason"}),
		saleUnits: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_sale_units_left",
			Help: "Units the stock gate has left to sell (absent while the gate holds no counter for the sale).",
		}, []string{"sku"}),
		salePending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_sale_pending_units",
			Help: "Units held by pending reservations (the record, as last read).",
		}, []string{"sku"}),
		saleConfirmed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_sale_confirmed_units",
			Help: "Units of confirmed orders (the record, as last read).",
		}, []string{"sku"}),
		saleWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_sale_waiting",
			Help: "Places given by the waiting room and not yet admitted.",
		}, []string{"sku"}),
		saleAdmitted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_sale_admitted",
			Help: "Places admitted so far (the queue's admitted-up-to, at most the places given).",
		}, []string{"sku"}),
		saleWarm: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_sale_warm",
			Help: "1 when the sale's counter is in the gate and every edge holds its snapshot.",
		}, []string{"sku"}),
		outboxPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flashsale_outbox_pending_events",
			Help: "Events in the outbox not yet delivered (nor dead-lettered), at the relay's last look.",
		}),
		outboxLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flashsale_outbox_lag_seconds",
			Help: "Age of the oldest pending event in the outbox, at the relay's last look.",
		}),
		outboxDead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flashsale_outbox_dead_events",
			Help: "Dead-lettered events waiting for an operator (flashsale outbox dead / replay).",
		}),
		outboxDelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_outbox_delivered_total",
			Help: "Events the sink took, by sink (at least once: a redelivery counts again).",
		}, []string{"sink"}),
		outboxRetried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_outbox_retries_total",
			Help: "Failed deliveries put back for a later attempt, by sink.",
		}, []string{"sink"}),
		outboxBuried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_outbox_dead_lettered_total",
			Help: "Events dead-lettered after their last attempt, by sink.",
		}, []string{"sink"}),
		outboxLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashsale_outbox_delivery_seconds",
			Help:    "From an event's write to the sink's acknowledgement, by sink.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"sink"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestSeconds, m.recordCalls, m.rejections, m.gateSeconds, m.gateErrors,
		m.reserved, m.restocked, m.invariantOK, m.invariantDiff, m.invariantAt, m.salePaused,
		m.saleUnits, m.salePending, m.saleConfirmed, m.saleWaiting, m.saleAdmitted, m.saleWarm,
		m.outboxPending, m.outboxLag, m.outboxDead, m.outboxDelivered, m.outboxRetried, m.outboxBuried, m.outboxLatency,
	)
	return m
}

// RecordCalls records the calls to the record one HTTP request made.
func (m *Metrics) RecordCalls(route string, rejected bool, n int) {
	if m == nil || n <= 0 {
		return
	}
	outcome := "answered"
	if rejected {
		outcome = "rejected"
	}
	m.recordCalls.WithLabelValues(route, outcome).Add(float64(n))
}

// BackgroundRecordCalls publishes the calls to the record made outside any
// request (the sweeper, the invariant watcher, the relay...).
func (m *Metrics) BackgroundRecordCalls(f func() float64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "flashsale_record_calls_background_total",
		Help: "Calls to the record made outside any HTTP request: the background services.",
	}, f))
}

// Request records one HTTP request.
func (m *Metrics) Request(route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	key := routeStatus{route, status}
	m.byRouteMu.RLock()
	c, ok := m.byRoute[key]
	m.byRouteMu.RUnlock()
	if !ok {
		// Routes are the mux's patterns and statuses few: the map stays
		// small.
		c = routeCollectors{count: m.requests.WithLabelValues(route, statusText(status)),
			seconds: m.requestSeconds.WithLabelValues(route)}
		m.byRouteMu.Lock()
		if m.byRoute == nil {
			m.byRoute = map[routeStatus]routeCollectors{}
		}
		m.byRoute[key] = c
		m.byRouteMu.Unlock()
	}
	c.count.Inc()
	c.seconds.Observe(d.Seconds())
}

// Rejection records one request told no by a funnel layer.
func (m *Metrics) Rejection(layer, code string) {
	if m == nil {
		return
	}
	m.rejections.WithLabelValues(layer, code).Inc()
}

// Gate records one gate call; a non-nil err counts as a gate error.
func (m *Metrics) Gate(op string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.gateSeconds.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.gateErrors.WithLabelValues(op).Inc()
	}
}

// Reserved records units held by a new reservation.
func (m *Metrics) Reserved(sku string, units int) {
	if m == nil {
		return
	}
	m.reserved.WithLabelValues(sku).Add(float64(units))
}

// Restocked records units returned to stock.
func (m *Metrics) Restocked(source string, units int) {
	if m == nil {
		return
	}
	m.restocked.WithLabelValues(source).Add(float64(units))
}

// Invariant records the outcome of an invariant check.
func (m *Metrics) Invariant(sku string, ok bool, difference int64, at time.Time) {
	if m == nil {
		return
	}
	v := 0.0
	if ok {
		v = 1
	}
	m.invariantOK.WithLabelValues(sku).Set(v)
	m.invariantDiff.WithLabelValues(sku).Set(float64(difference))
	m.invariantAt.WithLabelValues(sku).Set(float64(at.Unix()))
}

// PauseReasons are the values of flashsale_sale_paused's reason label:
// control.PauseCauses, repeated here so that metrics imports nothing.
var PauseReasons = []string{"operator", "gate", "invariant"}

// SalePaused records why a sale is paused (one of PauseReasons), or that
// it is not (""): 1 on the reason's series, 0 on the others, so the
// series of a sale are always the same few.
func (m *Metrics) SalePaused(sku, reason string) {
	if m == nil {
		return
	}
	for _, r := range PauseReasons {
		v := 0.0
		if r == reason {
			v = 1
		}
		m.salePaused.WithLabelValues(sku, r).Set(v)
	}
}

// SaleFigures is one sale's state for the per-sale gauges.
type SaleFigures struct {
	SKU string
	// UnitsLeft is the gate's counter; UnitsKnown is false while the gate
	// holds none for the sale (not yet loaded, lost, unreachable), and the
	// gauge is then left out rather than reported as zero.
	UnitsLeft  int64
	UnitsKnown bool
	Pending    int64
	Confirmed  int64
	Waiting    int64
	Admitted   int64
	// PauseReason is one of PauseReasons while the sale is paused, else "".
	PauseReason string
	Warm        bool
}

// Sale records a sale's gauges. Every server that runs the live feed
// records the same figures for the sales it sees (they come from the
// shared gate, queue and record), so a dashboard over several takes the
// max by sku, not the sum.
func (m *Metrics) Sale(f SaleFigures) {
	if m == nil {
		return
	}
	if f.UnitsKnown {
		m.saleUnits.WithLabelValues(f.SKU).Set(float64(f.UnitsLeft))
	} else {
		m.saleUnits.DeleteLabelValues(f.SKU)
	}
	m.salePending.WithLabelValues(f.SKU).Set(float64(f.Pending))
	m.saleConfirmed.WithLabelValues(f.SKU).Set(float64(f.Confirmed))
	m.saleWaiting.WithLabelValues(f.SKU).Set(float64(f.Waiting))
	m.saleAdmitted.WithLabelValues(f.SKU).Set(float64(f.Admitted))
	warm := 0.0
	if f.Warm {
		warm = 1
	}
	m.saleWarm.WithLabelValues(f.SKU).Set(warm)
	m.SalePaused(f.SKU, f.PauseReason)
}

// ForgetSale removes every series labelled with the sale's SKU, once the
// sale is retired: without it each sale ever run would stay in the
// registry, and in every scrape, for as long as the process lives.
func (m *Metrics) ForgetSale(sku string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"sku": sku}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.reserved, m.invariantOK, m.invariantDiff, m.invariantAt, m.salePaused,
		m.saleUnits, m.salePending, m.saleConfirmed, m.saleWaiting, m.saleAdmitted, m.saleWarm,
	} {
		v.DeletePartialMatch(l)
	}
}

// Outbox records the outbox's figures: pending events, the age of the
// oldest, and dead letters.
func (m *Metrics) Outbox(pending int64, lag time.Duration, dead int64) {
	if m == nil {
		return
	}
	m.outboxPending.Set(float64(pending))
	m.outboxLag.Set(lag.Seconds())
	m.outboxDead.Set(float64(dead))
}

// OutboxDelivered records one event the sink took, latency after it was
// written.
func (m *Metrics) OutboxDelivered(sink string, latency time.Duration) {
	if m == nil {
		return
	}
	m.outboxDelivered.WithLabelValues(sink).Inc()
	m.outboxLatency.WithLabelValues(sink).Observe(latency.Seconds())
}

// OutboxRetried records a failed delivery put back for later.
func (m *Metrics) OutboxRetried(sink string) {
	if m == nil {
		return
	}
	m.outboxRetried.WithLabelValues(sink).Inc()
}

// OutboxDeadLettered records an event dead-lettered.
func (m *Metrics) OutboxDeadLettered(sink string) {
	if m == nil {
		return
	}
	m.outboxBuried.WithLabelValues(sink).Inc()
}

var statusTexts = func() [600]string {
	var t [600]string
	for i := range t {
		t[i] = itoa(i)
	}
	return t
}()

func statusText(code int) string {
	if code >= 0 && code < len(statusTexts) {
		return statusTexts[code]
	}
	return itoa(code)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

// PurchaseInFlight publishes the purchase path's requests in flight, its
// bound and one sale's share of it (package bulkhead), read from inFlight and limit at each scrape. A
// gauge at its bound is a sale being shed; the sheds themselves are
// flashsale_rejections_total{layer="capacity",code="overloaded"}.
func (m *Metrics) PurchaseInFlight(inFlight func() int, limit, saleLimit int) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashsale_purchase_in_flight",
			Help: "Purchase requests (reserve, confirm, cancel, get a reservation) in flight now.",
		}, func() float64 { return float64(inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashsale_purchase_in_flight_limit",
			Help: "The bound on purchase requests in flight (--max-in-flight); past it they are shed with 503 overloaded.",
		}, func() float64 { return float64(limit) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashsale_purchase_sale_in_flight_limit",
			Help: "One sale's share of the purchase requests in flight (--sale-max-in-flight).",
		}, func() float64 { return float64(saleLimit) }),
	)
}

// RoomInFlight publishes the waiting room's requests in progress and
// waiting for a slot, over every sale, and one sale's bound on those in
// progress (package bulkhead), read at each scrape. Its sheds are
// flashsale_rejections_total{layer="capacity",code="overloaded"} too.
func (m *Metrics) RoomInFlight(inFlight, waiting func() int, saleLimit int) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashsale_room_in_flight",
			Help: "Waiting-room requests (ticket, status, admission, registration) in progress now, over every sale.",
		}, func() float64 { return float64(inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashsale_room_waiting",
			Help: "Waiting-room requests waiting, parked, for a slot of their sale now.",
		}, func() float64 { return float64(waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashsale_room_sale_in_flight_limit",
			Help: "One sale's bound on waiting-room requests in progress (--room-sale-in-flight); past it they wait, then are shed with 503 overloaded.",
		}, func() float64 { return float64(saleLimit) }),
	)
}

// RecordPool publishes a record connection pool's connections in use and
// its bound, read from stat at each scrape, labelled with the pool's name
// (purchase, background, relay): a pool at its bound is the saturation
// that isolation keeps from spreading.
func (m *Metrics) RecordPool(name string, stat func() (inUse, max int32)) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{"pool": name}
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "flashsale_record_pool_in_use",
			Help:        "Connections of the record's pool in use now, by pool.",
			ConstLabels: labels,
		}, func() float64 { n, _ := stat(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "flashsale_record_pool_max",
			Help:        "The bound of the record's pool, by pool.",
			ConstLabels: labels,
		}, func() float64 { _, n := stat(); return float64(n) }),
	)
}

// EdgeSnapshots publishes, at an edge, how long ago it last fetched the
// sales' snapshots from its origin (fetched; zero before the first fetch,
// then the age is counted from started). An edge that cannot refresh
// answers from its last snapshots for a few seconds, then turns shoppers
// away with 503: the age is what says so first.
func (m *Metrics) EdgeSnapshots(fetched, now func() time.Time) {
	if m == nil {
		return
	}
	started := now()
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flashsale_edge_snapshots_age_seconds",
		Help: "Seconds since this edge last fetched the sales' snapshots from its origin.",
	}, func() float64 {
		at := fetched()
		if at.IsZero() {
			at = started
		}
		return now().Sub(at).Seconds()
	}))
}
