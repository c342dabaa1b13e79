package metrics

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The dashboard and the alerts shipped in deploy/ (for Grafana and
// Prometheus) name only metrics the server exports: a renamed metric
// fails here, not on launch day with an empty panel or an alert that can
// never fire.

const (
	dashboardFile = "../deploy/grafana/flashsale.json"
	alertsFile    = "../deploy/prometheus/alerts.yml"
)

// exported returns the names of every series the server can export: every
// collector fed once, then gathered (a vector shows only once it has a
// child), histograms with their _bucket, _sum and _count.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := New()
	now := time.Now()
	m.BackgroundRecordCalls(func() float64 { return 1 })
	m.PurchaseInFlight(func() int { return 1 }, 2, 1)
	m.RoomInFlight(func() int { return 1 }, func() int { return 0 }, 4)
	m.RecordPool("purchase", func() (int32, int32) { return 1, 2 })
	m.EdgeSnapshots(func() time.Time { return now }, time.Now)
	m.Request("GET /sale/{sku}", 200, time.Millisecond)
	m.RecordCalls("POST /sale/{sku}/reserve", false, 1)
	m.Rejection(LayerGate, "sold_out")
	m.Gate("reserve", time.Millisecond, errors.New("down"))
	m.Reserved("s", 1)
	m.Restocked("sweeper", 1)
	m.Invariant("s", true, 0, now)
	m.Sale(SaleFigures{SKU: "s", UnitsKnown: true, PauseReason: "gate"})
	m.Outbox(1, time.Second, 1)
	m.OutboxDelivered("log", time.Millisecond)
	m.OutboxRetried("log")
	m.OutboxDeadLettered("log")
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		n := f.GetName()
		names[n] = true
		if f.GetType().String() == "HISTOGRAM" {
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\b(flashsale_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+)\b`)

// named returns the metric names a file mentions.
func named(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, m := range metricName.FindAllString(string(b), -1) {
		set[m] = true
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestDeployNamesExportedMetrics(t *testing.T) {
	have := exported(t)
	for _, file := range []string{dashboardFile, alertsFile} {
		names := named(t, file)
		if len(names) < 5 {
			t.Fatalf("%s names %d metrics; the pattern no longer finds them", file, len(names))
		}
		for _, n := range names {
			if !have[n] {
				t.Errorf("%s names %s, which the server does not export", file, n)
			}
		}
	}
}

// TestDeployAlertsCoverEachConcern checks the alerts an operator was
// promised are there, each with a summary.
func TestDeployAlertsCoverEachConcern(t *testing.T) {
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, alert := range []string{"FlashsaleInvariantBroken", "FlashsalePausedByTheEngine", "FlashsaleGateUnreachable",
		"FlashsaleOutboxLagging", "FlashsaleDeadLetters", "FlashsaleEdgeNotRefreshing", "FlashsalePurchasePathShedding"} {
		if !strings.Contains(string(b), "alert: "+alert+"\n") {
			t.Errorf("%s has no alert %s", alertsFile, alert)
		}
	}
}

// dashboard is the part of the Grafana dashboard the tests read.
type dashboard struct {
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// Every query of the dashboard parses as PromQL (promtool checks them as
// recording rules, with the sale variable replaced), and every panel but
// the rows has one.
func TestDashboardQueriesParse(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			n++
			expr := strings.ReplaceAll(tg.Expr, "$sku", ".*")
			q, _ := json.Marshal(expr)
			rules.WriteString("      - record: dashboard:query" + itoa(n) + "\n        expr: " + string(q) + "\n")
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Unavailable(t, "promtool (apt-get install prometheus)", err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("the dashboard's queries do not parse: %v\n%s", err, out)
	}
}
