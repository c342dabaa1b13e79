package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/waitroom"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// startServer runs "flashsale serve" in the background and returns its
// address and a function that stops it and returns run's error.
func startServer(t *testing.T, dataDir string, extra ...string) (string, func() error) {
	t.Helper()
	base, stop, _ := startServerOut(t, dataDir, extra...)
	return base, stop
}

// startServerOut is startServer that also returns what serve prints.
func startServerOut(t *testing.T, dataDir string, extra ...string) (string, func() error, *syncBuffer) {
	t.Helper()
	return startServerEnv(t, dataDir, nil, extra...)
}

// startServerEnv is startServerOut with an environment.
func startServerEnv(t *testing.T, dataDir string, environ map[string]string, extra ...string) (string, func() error, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := new(syncBuffer), new(syncBuffer)
	done := make(chan error, 1)
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir}, extra...)
	go func() { done <- run(ctx, args, env(environ), stdout, stderr) }()
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			stop := func() error {
				cancel()
				select {
				case err := <-done:
					return err
				case <-time.After(20 * time.Second):
					t.Fatal("serve did not stop")
					return nil
				}
			}
			t.Cleanup(func() { cancel() })
			return m[1], stop, stdout
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func call(t *testing.T, method, url string, hdr map[string]string, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func cli(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), args, env(nil), &out, &errOut); err != nil {
		t.Fatalf("flashsale %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// TestServeSaleAndShutdown drives the command end to end: serve on the
// embedded default, the sale subcommands, a shopper through the funnel with
// a token from "flashsale token", and a graceful shutdown after which a
// restart on the same data dir still has every acknowledged reservation.
func TestServeSaleAndShutdown(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServer(t, dir)

	out := cli(t, "sale", "create", "--server", base, "--sku", "cli-shoe", "--stock", "3", "--opens-at", "+0s", "--hold-seconds", "600",
		"--title", "Cli shoe", "--brand-color", "#112233", "--shop-url", "https://shop.example.com/")
	if !strings.Contains(out, `"sku": "cli-shoe"`) || !strings.Contains(out, `"initialStock": 3`) ||
		!strings.Contains(out, `"title": "Cli shoe"`) || !strings.Contains(out, `"brandColor": "#112233"`) ||
		!strings.Contains(out, `"shopUrl": "https://shop.example.com/"`) {
		t.Fatalf("create printed:\n%s", out)
	}
	if out := cli(t, "sale", "list", "--server", base); !strings.Contains(out, "cli-shoe") || !strings.Contains(out, "SKU") {
		t.Fatalf("list printed:\n%s", out)
	}

	id := reserveOne(t, shopperOf(t, base, "alice"), "cli-shoe", "k1").ReservationID
	if out := cli(t, "sale", "pause", "cli-shoe", "--server", base, "--reason", "count check"); !strings.Contains(out, `"state": "paused"`) ||
		!strings.Contains(out, "count check") {
		t.Fatalf("pause printed:\n%s", out)
	}
	if out := cli(t, "sale", "rebuild", "--server", base, "cli-shoe"); !strings.Contains(out, `"counter": 2`) {
		t.Fatalf("rebuild printed:\n%s", out)
	}
	if out := cli(t, "sale", "resume", "cli-shoe", "--server", base); !strings.Contains(out, `"state": "open"`) {
		t.Fatalf("resume printed:\n%s", out)
	}
	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	// Restart on the same data dir: the acknowledged reservation is there,
	// and the waiting room's key survived (the old ticket still verifies).
	base, stop = startServer(t, dir)
	defer stop()
	if res, err := shopperOf(t, base, "alice").Reservation(context.Background(), id); err != nil || res.State != flashsale.ReservationPending {
		t.Fatalf("after restart: %+v %v", res, err)
	}
	if out := cli(t, "sale", "show", "cli-shoe", "--server", base); !strings.Contains(out, `"pending": 1`) {
		t.Fatalf("show after restart:\n%s", out)
	}
}

func TestTokenCommand(t *testing.T) {
	out := cli(t, "token", "--user", "bob", "--account-age", "48h")
	v, err := identity.NewHS256([]byte(identity.DevelopmentSecret))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := v.Verify(strings.TrimSpace(out), time.Now())
	if err != nil || sh.UserID != "bob" || time.Since(sh.AccountCreated) < 47*time.Hour {
		t.Fatalf("token verifies as %+v, %v", sh, err)
	}
	if sh.Instrument != "" {
		t.Fatalf("a token without --pmf carries an instrument: %+v", sh)
	}
	// --pmf: the payment instrument, as the store would vouch for it.
	if sh, err := v.Verify(strings.TrimSpace(cli(t, "token", "--user", "bob", "--pmf", "card-42")), time.Now()); err != nil || sh.Instrument != "card-42" {
		t.Fatalf("token --pmf verifies as %+v, %v", sh, err)
	}
	if err := run(context.Background(), []string{"token", "--user", "bob", "--pmf", "not a card"}, env(nil), io.Discard, io.Discard); err == nil {
		t.Fatal("token --pmf with a space minted a token the server refuses")
	}
	// The same secret the server is given through its environment.
	var o, e bytes.Buffer
	if err := run(context.Background(), []string{"token", "--user", "carol"}, env(map[string]string{"FLASHSALE_USER_JWT_SECRET": "s3cret-s3cret"}), &o, &e); err != nil {
		t.Fatal(err)
	}
	v2, _ := identity.NewHS256([]byte("s3cret-s3cret"))
	if _, err := v2.Verify(strings.TrimSpace(o.String()), time.Now()); err != nil {
		t.Fatalf("token from the environment's secret: %v", err)
	}
}

// TestUsageErrors: a command line of the wrong shape is exit status 2. (A
// flag's value that is wrong is a configuration error, status 1: see
// TestStartFailsClearly.)
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"token"}, {"serve", "--addr"}, {"sale", "explode"}, {"sale", "show"},
		{"serve", "--no-such-flag"}, {"serve", "stray"}} {
		var o, e bytes.Buffer
		err := run(context.Background(), args, env(nil), &o, &e)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("flashsale %v: err %v, exit %d; want a usage error", args, err, exitCode(err))
		}
	}
}

// TestVerifyCommand: an honest draw verifies and places a shopper; a
// tampered one, or one whose commitment is not the one published, fails.
func TestVerifyCommand(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	var ps []string
	for i := 0; i < 50; i++ {
		ps = append(ps, waitroom.Pseudonym("sale_v", fmt.Sprintf("user-%d", i)))
	}
	doc := waitroom.DrawDocument{SKU: "v", SaleID: "sale_v", Fairness: "lottery", Algorithm: waitroom.DrawAlgorithm,
		SeedCommitment: waitroom.SeedCommitment(seed), Seed: fmt.Sprintf("%x", seed), Winners: 10, Order: waitroom.Order(seed, ps)}
	write := func(d waitroom.DrawDocument) string {
		path := t.TempDir() + "/draw.json"
		b, _ := json.Marshal(d)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	honest := write(doc)
	out := cli(t, "verify", "--user", "user-7", honest)
	if !strings.Contains(out, "OK:") || !strings.Contains(out, "user-7") || !strings.Contains(out, "was drawn at place") {
		t.Fatalf("honest draw:\n%s", out)
	}
	if out := cli(t, "verify", honest, "--user", "stranger"); !strings.Contains(out, "not among the entrants") {
		t.Fatalf("a stranger:\n%s", out)
	}
	tampered := doc
	tampered.Order = append([]string(nil), doc.Order...)
	tampered.Order[0], tampered.Order[1] = tampered.Order[1], tampered.Order[0]
	for name, args := range map[string][]string{
		"tampered order":     {"verify", write(tampered)},
		"another commitment": {"verify", "--commitment", waitroom.SeedCommitment([]byte("x")), honest},
	} {
		var o, e bytes.Buffer
		err := run(context.Background(), args, env(nil), &o, &e)
		if err == nil || exitCode(err) != 1 || !strings.Contains(o.String(), "MISMATCH") {
			t.Errorf("%s: err %v, output:\n%s", name, err, o.String())
		}
	}
}

// TestServeDemo: serve --demo prints its sale's waiting-room page, which
// answers, and the commands a new user can run from the source tree; the
// page's demo sign-in (GET /demo/token) mints shopper JWTs only for --demo
// with the development key.
func TestServeDemo(t *testing.T) {
	base, stop, stdout := startServerOut(t, t.TempDir(), "--demo")
	defer stop()
	re := regexp.MustCompile(`The waiting room:\s+(http://\S+/sale/(demo-\w+)/)`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; {
		if m = re.FindStringSubmatch(stdout.String()); m == nil && time.Now().After(deadline) {
			t.Fatalf("serve --demo did not print the page's address:\n%s", stdout.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(m[1], base+"/sale/") {
		t.Fatalf("page address %s is not on %s", m[1], base)
	}
	if !strings.Contains(stdout.String(), "go run ./cmd/flashsale token --user alice") {
		t.Errorf("the demo's instructions need a flashsale binary on PATH:\n%s", stdout.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(html), "/assets/app.js") {
		t.Fatalf("the page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if code, sale := call(t, "GET", base+"/sale/"+m[2], nil, ""); code != 200 || sale["state"] != "scheduled" {
		t.Fatalf("the demo sale: %d %v", code, sale)
	}

	code, res := call(t, "GET", base+"/demo/token?user=alice", nil, "")
	tok, _ := res["token"].(string)
	if code != 200 || tok == "" {
		t.Fatalf("demo token: %d %v", code, res)
	}
	v, err := identity.NewHS256([]byte(identity.DevelopmentSecret))
	if err != nil {
		t.Fatal(err)
	}
	if sh, err := v.Verify("Bearer "+tok, time.Now()); err != nil || sh.UserID != "alice" {
		t.Fatalf("the demo token does not verify as alice: %+v %v", sh, err)
	}
	if code, res := call(t, "GET", base+"/demo/token", nil, ""); code != 400 || res["error"].(map[string]any)["code"] != "bad_request" {
		t.Fatalf("demo token without a user: %d %v", code, res)
	}

	for _, extra := range [][]string{nil, {"--demo", "--user-jwt-secret", "a-real-secret-that-is-long-enough-0123456789"}} {
		base, stop := startServer(t, t.TempDir(), extra...)
		if code, _ := call(t, "GET", base+"/demo/token?user=mallory", nil, ""); code != 404 {
			t.Errorf("serve %v answers /demo/token with %d, want 404", extra, code)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeInFlightBounds: the purchase path's bound is twice its
// connections by default (SQLite: the writer and four readers), and the
// flags set it, here through their environment variables.
func TestServeInFlightBounds(t *testing.T) {
	gauge := func(base, name string) string {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		return m[1]
	}
	base, stop, _ := startServerEnv(t, t.TempDir(), nil)
	if got := gauge(base, "flashsale_purchase_in_flight_limit"); got != "10" {
		t.Errorf("default bound %s, want 10 (2 × (1 writer + 4 readers))", got)
	}
	if got := gauge(base, "flashsale_purchase_sale_in_flight_limit"); got != "5" {
		t.Errorf("default share of a sale %s, want half the bound, 5", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	base, stop, _ = startServerEnv(t, t.TempDir(), map[string]string{
		"FLASHSALE_MAX_IN_FLIGHT": "6", "FLASHSALE_SALE_MAX_IN_FLIGHT": "2", "FLASHSALE_IN_FLIGHT_WAIT": "0"})
	if got := gauge(base, "flashsale_purchase_in_flight_limit"); got != "6" {
		t.Errorf("bound from FLASHSALE_MAX_IN_FLIGHT=6: %s", got)
	}
	if got := gauge(base, "flashsale_purchase_sale_in_flight_limit"); got != "2" {
		t.Errorf("share from FLASHSALE_SALE_MAX_IN_FLIGHT=2: %s", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// --debug-addr serves Go's profiles and traces on a listener of its own;
// the server's own address never answers them, and neither shows the
// command line, where secrets may be.
func TestServeDebugAddr(t *testing.T) {
	base, stop, out := startServerOut(t, t.TempDir(), "--debug-addr", "127.0.0.1:0", "--admin-token", "admin-secret-4711")
	defer stop()
	var debug string
	deadline := time.Now().Add(10 * time.Second)
	for debug == "" {
		if m := regexp.MustCompile(`profiles and traces at (http://[0-9.:]+)/debug/pprof/`).FindStringSubmatch(out.String()); m != nil {
			debug = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not say where its profiles are:\n%s", out.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if debug == base {
		t.Fatalf("profiles on the server's own address %s", base)
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(debug + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile at the debug address: %d %.200s", code, body)
	}
	if code, _ := get(debug + "/debug/pprof/trace?seconds=0.05"); code != http.StatusOK {
		t.Errorf("execution trace at the debug address: %d", code)
	}
	if code, _ := get(base + "/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
		t.Errorf("the server's own address answers profiles: %d, want 404", code)
	}
	// The command line, where secrets given as flags are, is not served
	// (this test's own command line holds none, so the code is the check).
	if code, _ := get(debug + "/debug/pprof/cmdline"); code != http.StatusNotFound {
		t.Errorf("the command line is served at the debug address: %d, want 404", code)
	}
	if _, body := get(debug + "/debug/pprof/"); strings.Contains(body, "admin-secret-4711") {
		t.Error("the profiles' index shows the admin token")
	}
}

// TestServeInstrumentFlags: --instrument-claim names the claim the limits
// count (flashsale token --pmf --instrument-claim mints it), and the
// body's paymentFingerprint counts only with --trust-client-instrument.
func TestServeInstrumentFlags(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		token func(user string) string
		body  string
	}{
		{[]string{"--instrument-claim", "card_fp"}, func(user string) string {
			return strings.TrimSpace(cli(t, "token", "--user", user, "--pmf", "card-1", "--instrument-claim", "card_fp"))
		}, ""},
		{[]string{"--trust-client-instrument"}, func(user string) string {
			return strings.TrimSpace(cli(t, "token", "--user", user))
		}, `{"paymentFingerprint":"card-1"}`},
	} {
		t.Run(tc.flags[0], func(t *testing.T) {
			base, _ := startServer(t, t.TempDir(), tc.flags...)
			cli(t, "sale", "create", "--server", base, "--sku", "card-sale", "--stock", "5", "--opens-at", "+0s")
			codes := []int{}
			for _, user := range []string{"ann", "ben"} {
				auth := map[string]string{"Authorization": "Bearer " + tc.token(user)}
				_, tk := call(t, "GET", base+"/sale/card-sale/ticket", auth, "")
				_, st := call(t, "GET", base+"/sale/card-sale/status", map[string]string{"X-Ticket": tk["token"].(string)}, "")
				auth["X-Admission-Token"], auth["Idempotency-Key"] = st["admissionToken"].(string), "k"
				code, _ := call(t, "POST", base+"/sale/card-sale/reserve", auth, tc.body)
				codes = append(codes, code)
			}
			if codes[0] != 201 || codes[1] != 409 {
				t.Fatalf("two accounts on one card: %v, want 201 then 409", codes)
			}
		})
	}
}
