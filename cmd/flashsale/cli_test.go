package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/engine"
)

// every command and subcommand, as typed after "flashsale".
var everyCommand = [][]string{
	{"serve"}, {"token"}, {"verify"}, {"rehearse"}, {"help"},
	{"sale"}, {"sale", "create"}, {"sale", "list"}, {"sale", "show"}, {"sale", "update"}, {"sale", "watch"},
	{"sale", "pause"}, {"sale", "resume"}, {"sale", "rebuild"}, {"sale", "audit"}, {"sale", "counter-log"},
	{"order"}, {"order", "list"}, {"order", "history"}, {"order", "ship"}, {"order", "cancel"}, {"order", "refund"},
	{"outbox"}, {"outbox", "stats"}, {"outbox", "dead"}, {"outbox", "replay"},
}

// runCLI runs the command and returns its outputs and error.
func runCLI(args []string, environ map[string]string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = run(context.Background(), args, env(environ), &o, &e)
	return o.String(), e.String(), err
}

// --help, -h and "flashsale help COMMAND" print the command's usage on
// standard output and succeed, for every command and subcommand.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, c := range everyCommand {
		for _, ask := range [][]string{append(append([]string(nil), c...), "--help"), append(append([]string(nil), c...), "-h"),
			append([]string{"help"}, c...)} {
			out, errOut, err := runCLI(ask, nil)
			if err != nil || errOut != "" || !strings.Contains(out, "Usage") {
				t.Errorf("flashsale %s: err %v, stderr %q, stdout %q; want the usage on stdout", strings.Join(ask, " "), err, errOut, out)
				continue
			}
			if len(c) == 2 && !strings.Contains(out, "flashsale "+strings.Join(c, " ")) {
				t.Errorf("flashsale %s prints another command's usage:\n%s", strings.Join(ask, " "), out)
			}
		}
	}
	// A subcommand's help lists its flags, with their environment.
	out, _, _ := runCLI([]string{"sale", "create", "--help"}, nil)
	for _, want := range []string{"--stock int", "units on sale (required)", "--opens-at", "FLASHSALE_"} {
		if !strings.Contains(out, want) {
			t.Errorf("sale create --help lacks %q:\n%s", want, out)
		}
	}
}

// A mistake on the command line names the flag, in the operator's words:
// never an API field, a Go parse error or the flag package's own. A
// command line of the wrong shape is a usage error (exit status 2); a
// flag's value that does not parse is a configuration error like any
// other (exit status 1, see TestStartFailsClearly), marked bad below.
func TestMistakesNameTheFlag(t *testing.T) {
	const bad = "bad value: "
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"sale", "create", "--sku", "x"}, nil, "--stock is required"},
		{[]string{"sale", "create", "--stock", "3"}, nil, "--sku is required"},
		{[]string{"sale", "create"}, nil, "--sku and --stock are required"},
		{[]string{"sale", "create", "--sku", "x", "--stock", "many"}, nil, bad + `--stock "many": not a whole number`},
		{[]string{"sale", "create", "--sku", "x", "--stock", "3", "--opens-at", "tomorrow"}, nil, `--opens-at "tomorrow": not a time`},
		{[]string{"sale", "create", "--sku", "x", "--stock", "3", "--fairness", "best"}, nil, bad + `--fairness "best": must be one of fifo, random, lottery`},
		{[]string{"sale", "create", "--sku", "x", "--stock", "3", "--min-account-age", "a week"}, nil, bad + `--min-account-age "a week": not a duration`},
		{[]string{"sale", "list", "--colour"}, nil, "there is no flag --colour"},
		{[]string{"sale", "list", "-o", "yaml"}, nil, bad + `-o "yaml": must be one of table, json`},
		{[]string{"sale", "counter-log", "S"}, map[string]string{"FLASHSALE_LIMIT": "lots"}, bad + `FLASHSALE_LIMIT (--limit) "lots": not a whole number`},
		{[]string{"sale", "update", "S"}, nil, "give at least one change"},
		{[]string{"sale", "show"}, nil, "give exactly one SKU"},
		{[]string{"token", "--ttl"}, nil, "--ttl needs a value"},
		{[]string{"token", "--user", "a", "--ttl", "-1h"}, nil, "--ttl -1h0m0s: must be positive"},
		{[]string{"order", "ship", "ord_1"}, nil, "--version is required"},
		{[]string{"order", "ship", "ord_1", "--version", "0"}, nil, "--version 0"},
		{[]string{"rehearse", "--users", "ten"}, nil, bad + `--users "ten": not a whole number`},
		{[]string{"serve", "--addr"}, nil, "--addr needs a value"},
		{[]string{"serve", "--cors-origins", "*"}, nil, bad + `--cors-origins: CORS origin "*": no wildcards`},
		{[]string{"serve", "--cors-origins", "https://shop.example/checkout"}, nil, bad + `--cors-origins: CORS origin "https://shop.example/checkout"`},
	} {
		_, _, err := runCLI(tc.args, tc.env)
		want, code := strings.CutPrefix(tc.want, bad)
		exit := 2
		if code {
			exit = 1
		}
		if err == nil || exitCode(err) != exit || !strings.Contains(err.Error(), want) {
			t.Errorf("flashsale %s: %v (exit %d); want exit %d saying %q", strings.Join(tc.args, " "), err, exitCode(err), exit, want)
			continue
		}
		for _, leak := range []string{"strconv", "parse error", "initialStock", "invalid value", "flag provided"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("flashsale %s: %q says %q", strings.Join(tc.args, " "), err, leak)
			}
		}
	}
}

// cliServer is a server for the commands: the embedded default on the
// real clock, behind hook (which sees each request first).
type cliServer struct {
	eng  *engine.Engine
	srv  *httptest.Server
	hook atomic.Pointer[func(*http.Request)]
}

func newCLIServer(t *testing.T) *cliServer {
	t.Helper()
	eng, err := engine.Open(context.Background(), engine.Config{DataDir: t.TempDir(), Source: "cli-test"})
	if err != nil {
		t.Fatal(err)
	}
	s := &cliServer{eng: eng}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := s.hook.Load(); h != nil {
			(*h)(r)
		}
		eng.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		eng.CloseStreams()
		s.srv.Close()
		eng.Close()
	})
	return s
}

func (s *cliServer) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(append(args, "--server", s.srv.URL), nil)
	if err != nil {
		t.Fatalf("flashsale %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// The sale commands against a server: create (a server's refusal in the
// flags' words), list and counter-log as a table or JSON, show, update.
func TestSaleCommands(t *testing.T) {
	s := newCLIServer(t)
	_, _, err := runCLI([]string{"sale", "create", "--server", s.srv.URL, "--sku", "neg", "--stock", "-1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--stock must be between 0 and") || strings.Contains(err.Error(), "initialStock") {
		t.Fatalf("a negative stock: %v; want the server's refusal naming --stock", err)
	}
	out := s.cli(t, "sale", "create", "--sku", "cli-1", "--stock", "7", "--name", "Seven", "--rate", "40")
	if !strings.Contains(out, `"initialStock": 7`) || !strings.Contains(out, `"admissionPerSecond": 40`) {
		t.Fatalf("create printed:\n%s", out)
	}

	table := s.cli(t, "sale", "list")
	if !strings.HasPrefix(table, "SKU") || !strings.Contains(table, "cli-1") || !strings.Contains(table, "open") {
		t.Fatalf("list as a table:\n%s", table)
	}
	var listed struct {
		Sales []struct {
			SKU string `json:"sku"`
		} `json:"sales"`
	}
	if err := json.Unmarshal([]byte(s.cli(t, "sale", "list", "-o", "json")), &listed); err != nil || len(listed.Sales) != 1 {
		t.Fatalf("list -o json: %v %+v", err, listed)
	}
	if out := s.cli(t, "sale", "show", "cli-1"); !strings.Contains(out, `"sku": "cli-1"`) {
		t.Fatalf("show:\n%s", out)
	}
	if out := s.cli(t, "sale", "counter-log", "cli-1"); !strings.HasPrefix(out, "SEQ") || !strings.Contains(out, "load") {
		t.Fatalf("counter-log as a table:\n%s", out)
	}
	if out := s.cli(t, "sale", "counter-log", "cli-1", "--output", "json"); !strings.Contains(out, `"entries"`) {
		t.Fatalf("counter-log -o json:\n%s", out)
	}

	// The automation audit: nothing sold, nothing found; --cancel cancels
	// nothing either.
	if out := s.cli(t, "sale", "audit", "cli-1"); !strings.Contains(out, `"findings": []`) || !strings.Contains(out, `"policy"`) {
		t.Fatalf("audit:\n%s", out)
	}
	if out := s.cli(t, "sale", "audit", "cli-1", "--cancel"); !strings.Contains(out, `"cancelled": 0`) {
		t.Fatalf("audit --cancel:\n%s", out)
	}

	// Update: the flags given, and only those.
	closes := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	out = s.cli(t, "sale", "update", "cli-1", "--rate", "25", "--closes-at", closes.Format(time.RFC3339), "--name", "Seven, again")
	var v struct {
		Name     string    `json:"name"`
		Rate     int       `json:"admissionPerSecond"`
		ClosesAt time.Time `json:"closesAt"`
		Hold     int       `json:"holdSeconds"`
		Version  int64     `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Name != "Seven, again" || v.Rate != 25 || !v.ClosesAt.Equal(closes) || v.Hold != 600 {
		t.Fatalf("update printed %+v (%v):\n%s", v, err, out)
	}
}

// sale update reads the version first; when the sale moves between the
// read and the change (someone else changed it) it changes nothing, and
// says so, unless --retry asks it to read again and repeat the change.
func TestSaleUpdateVersionConflict(t *testing.T) {
	s := newCLIServer(t)
	s.cli(t, "sale", "create", "--sku", "cli-2", "--stock", "5")
	// Before each of the command's PATCHes, once per arm, another operator
	// changes the sale.
	var meddle atomic.Int32
	other, err := client.New(s.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	hook := func(r *http.Request) {
		if r.Method != http.MethodPatch || meddle.Add(-1) < 0 {
			return
		}
		ctx, adm, hold := context.Background(), other.Admin(""), 300
		if v, err := adm.Sale(ctx, "cli-2"); err == nil {
			_, _ = adm.UpdateSale(ctx, "cli-2", v.Version, client.SalePatch{HoldSeconds: &hold})
		}
	}
	s.hook.Store(&hook)

	meddle.Store(1)
	_, _, err = runCLI([]string{"sale", "update", "cli-2", "--rate", "9", "--server", s.srv.URL}, nil)
	if err == nil || !strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), "--retry") {
		t.Fatalf("update meddled with, no --retry: %v", err)
	}
	if rate := saleField(t, s, "cli-2", "admissionPerSecond"); rate != 0.0 {
		t.Fatalf("the rate became %v though the update was refused", rate)
	}

	meddle.Store(1)
	out, errOut, err := runCLI([]string{"sale", "update", "cli-2", "--rate", "9", "--retry", "--server", s.srv.URL}, nil)
	if err != nil || !strings.Contains(out, `"admissionPerSecond": 9`) || !strings.Contains(errOut, "reading it again") {
		t.Fatalf("update --retry: %v\n%s\n%s", err, out, errOut)
	}
	if hold := saleField(t, s, "cli-2", "holdSeconds"); hold != 300.0 {
		t.Fatalf("the other operator's change was lost: holdSeconds %v", hold)
	}
}

func httpGet(t *testing.T, url string) []byte {
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return buf.Bytes()
}

func saleField(t *testing.T, s *cliServer, sku, field string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(httpGet(t, s.srv.URL+"/admin/sales/"+sku), &m); err != nil {
		t.Fatal(err)
	}
	return m[field]
}

// lineWriter collects lines and cancels after n of them.
type lineWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Count(w.buf.String(), "\n") >= w.n {
		w.cancel()
	}
	return len(p), nil
}

// sale watch, when its output is not a terminal, prints a line a second
// from the live feed, and ends cleanly (no error) when its context does
// (Ctrl-C).
func TestSaleWatchPlain(t *testing.T) {
	s := newCLIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.eng.Start(ctx)
	defer s.eng.Stop()
	s.cli(t, "sale", "create", "--sku", "cli-3", "--stock", "12", "--name", "Watched")
	w := &lineWriter{n: 2, cancel: cancel}
	var errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"sale", "watch", "cli-3", "--server", s.srv.URL}, env(nil), w, &errOut)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch: %v\n%s", err, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch printed no two lines in 20s")
	}
	lines := strings.Split(strings.TrimSpace(w.buf.String()), "\n")
	for _, l := range lines[:2] {
		if !strings.Contains(l, "sku=cli-3 state=open left=12/12") || !strings.Contains(l, "invariant=") || strings.Contains(l, "\x1b") {
			t.Fatalf("a plain line: %q", l)
		}
	}
	_, _, err := runCLI([]string{"sale", "watch", "nope", "--server", s.srv.URL}, nil)
	if err == nil || !strings.Contains(err.Error(), "there is no sale nope") {
		t.Fatalf("watching a sale that is not there: %v", err)
	}
}

// The terminal view draws units left with a bar, the rates, the
// invariant and pacing, within the terminal's width.
func TestRenderLive(t *testing.T) {
	at := time.Date(2026, 8, 1, 10, 0, 7, 0, time.UTC)
	left := int64(250)
	v := &liveView{SKU: "shoe", Name: "Limited shoe", State: "open", InitialStock: 1000, Counter: &left,
		OpensAt: at.Add(-7 * time.Second), Waiting: 12000, AdmittedUpTo: 900, Pending: 300, Confirmed: 450, At: at,
		Rejections: map[string]int64{"sold_out": 30, "rate_limited": 4}}
	v.Rates.Admissions, v.Rates.Reserves, v.Rates.Wins = 120, 95.5, 80
	v.Rates.Rejections = map[string]float64{"sold_out": 3}
	v.Invariant.OK = true
	for _, width := range []int{60, 100} {
		out := renderLive(v, width, false)
		flat := regexp.MustCompile(`\s*\n\s{13}`).ReplaceAllString(out, " · ") // lines wrapped at a separator, joined
		for _, want := range []string{"Limited shoe (shoe) · OPEN", "10:00:07 UTC", "250 of 1,000", "[", "25%",
			"admissions 120 · reserves 96 · units taken 80 · rejections 3", "Invariant   holds", "sold_out 3/s (30) · rate_limited 0/s (4)"} {
			if !strings.Contains(flat, want) {
				t.Errorf("width %d: no %q in\n%s", width, want, out)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if visible(l) > width {
				t.Errorf("width %d: a line of %d: %q", width, visible(l), l)
			}
		}
	}
	v.Invariant.OK, v.State, v.PauseReason = false, "paused", "the invariant failed: counter + confirmed + pending = 1001"
	if out := renderLive(v, 80, true); !strings.Contains(out, "\x1b[1;31mFAILED\x1b[0m") || !strings.Contains(out, "Paused by the engine") {
		t.Errorf("a failed invariant and an engine's pause are not shown as such:\n%s", out)
	}
}

// A graceful shutdown does not wait on the operators' open live streams
// (they never end by themselves): serve ends them as it begins, and stops
// well within its shutdown timeout.
func TestShutdownEndsLiveStreams(t *testing.T) {
	base, stop := startServer(t, t.TempDir(), "--shutdown-timeout", "30s")
	cli(t, "sale", "create", "--server", base, "--sku", "cli-live", "--stock", "3")
	resp, err := http.Get(base + "/admin/sales/cli-live/live")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("open the stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	first := make([]byte, 64)
	if _, err := resp.Body.Read(first); err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("shutdown with a stream open: %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("shutdown took %s with a stream open", took)
	}
}
