package metrics

import (
	"testing"
	"time"
)

// TestRequestCounts: requests are counted by route and status, and timed
// by route, also through the cached collectors of a route seen before.
func TestRequestCounts(t *testing.T) {
	m := New()
	m.Request("GET /sale/{sku}/status", 200, time.Millisecond)
	m.Request("GET /sale/{sku}/status", 200, 2*time.Millisecond)
	m.Request("GET /sale/{sku}/status", 401, time.Millisecond)
	m.Request("GET /sale/{sku}/ticket", 200, time.Millisecond)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	timed := map[string]uint64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "flashsale_http_requests_total":
				counts[labels["route"]+" "+labels["status"]] = mt.GetCounter().GetValue()
			case "flashsale_http_request_seconds":
				timed[labels["route"]] = mt.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]float64{"GET /sale/{sku}/status 200": 2, "GET /sale/{sku}/status 401": 1, "GET /sale/{sku}/ticket 200": 1}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s: %v requests, want %v (all: %v)", k, counts[k], v, counts)
		}
	}
	if timed["GET /sale/{sku}/status"] != 3 || timed["GET /sale/{sku}/ticket"] != 1 {
		t.Errorf("timed: %v", timed)
	}
	var nilMetrics *Metrics
	nilMetrics.Request("GET /", 200, time.Millisecond) // a nil Metrics records nothing, and does not panic
}
