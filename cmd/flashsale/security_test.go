package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// refusal is an item of docs/security.md's "refuses to start" list: doc is
// words of its bullet, args a command line it refuses, and want the words
// of the error.
type refusal struct {
	doc  string
	args []string
	want string
}

const (
	goodSecret = "a-shopper-jwt-secret-of-32-bytes-or-more"
	goodAdmin  = "an-admin-token-of-24-bytes-or-more"
)

// checklistItems returns the bullets of docs/security.md's section "What
// flashsale serve refuses to start with", each on one line.
func checklistItems(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### What `flashsale serve` refuses to start with")
	if !ok {
		t.Fatal("docs/security.md has no section on what serve refuses to start with")
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	var items []string
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "- "):
			items = append(items, strings.TrimPrefix(line, "- "))
		case strings.HasPrefix(line, "  ") && len(items) > 0:
			items[len(items)-1] += " " + strings.TrimSpace(line)
		}
	}
	return items
}

// TestSecurityChecklistRefusals walks the checklist's "refuses to start"
// items: each is an error from run (exit status 1) naming the flag, before
// the server answers anything; and the words that accept a risk
// (--insecure-admin, --demo) do let the server start.
func TestSecurityChecklistRefusals(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privDER, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallDER, _ := x509.MarshalPKIXPublicKey(&small.PublicKey)
	pemFile := func(name, typ string, der []byte) string {
		return writeTempFile(t, name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	refusals := []refusal{
		{"`--addr` not on loopback without `--admin-token`",
			[]string{"--addr", "0.0.0.0:0", "--user-jwt-secret", goodSecret}, "--admin-token"},
		{"`--addr` not on loopback with the development key",
			[]string{"--addr", "0.0.0.0:0", "--admin-token", goodAdmin}, "development key"},
		{"`--addr` not on loopback with the development key",
			[]string{"--addr", "0.0.0.0:0", "--admin-token", goodAdmin, "--role", "edge", "--redis-url", "redis://127.0.0.1:1/0",
				"--origin-url", "http://127.0.0.1:1"}, "development key"},
		{"`--user-jwt-public-key` holding a private key",
			[]string{"--user-jwt-public-key", pemFile("private.pem", "PRIVATE KEY", privDER)}, "--user-jwt-public-key"},
		{"something other than a public key",
			[]string{"--user-jwt-public-key", writeTempFile(t, "cert.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))},
			"--user-jwt-public-key"},
		{"an RSA key of fewer than 2048 bits",
			[]string{"--user-jwt-public-key", pemFile("small.pem", "PUBLIC KEY", smallDER)}, "--user-jwt-public-key"},
		{"`--user-jwt-max-lifetime` of zero or less", []string{"--user-jwt-max-lifetime", "0s"}, "--user-jwt-max-lifetime"},
		{"`--user-jwt-max-lifetime` of zero or less", []string{"--user-jwt-max-lifetime", "-1h"}, "--user-jwt-max-lifetime"},
		{"`--token-keys` with a secret shorter than 32 bytes", []string{"--token-keys", "k1:c2hvcnQtc2VjcmV0"}, "--token-keys"},
		{"`--token-keys` with a secret shorter than 32 bytes", []string{"--token-keys", "k1"}, "--token-keys"},
		{"`--events-sink webhook` without `--webhook-secret`",
			[]string{"--events-sink", "webhook", "--webhook-url", "https://hooks.shop.example/"}, "--webhook-secret"},
	}
	items := checklistItems(t)
	if len(items) == 0 {
		t.Fatal("the checklist lists nothing")
	}
	covered := make([]bool, len(items))
	for _, r := range refusals {
		found := false
		for i, item := range items {
			if strings.Contains(item, r.doc) {
				covered[i], found = true, true
			}
		}
		if !found {
			t.Errorf("docs/security.md's list has no item with %q", r.doc)
		}
	}
	for i, ok := range covered {
		if !ok {
			t.Errorf("no test for the refusal %q", items[i])
		}
	}

	for _, r := range refusals {
		t.Run(r.doc, func(t *testing.T) {
			// On a main that starts anyway, run serves until this
			// deadline and returns nil.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, r.args...)
			err := run(ctx, args, env(nil), &stdout, &stderr)
			if err == nil || exitCode(err) != 1 || !strings.Contains(oneLine(err), r.want) {
				t.Fatalf("serve %v: err %v (exit %d), want a refusal naming %q", r.args, err, exitCode(err), r.want)
			}
			if strings.Contains(stdout.String(), "listening") {
				t.Errorf("it listened before it refused:\n%s", stdout.String())
			}
		})
	}

	// The words that accept the risk start it, and say so in the log.
	pubFile := pemFile("public.pem", "PUBLIC KEY", pubDER)
	for _, extra := range [][]string{
		{"--addr", "0.0.0.0:0", "--insecure-admin", "--user-jwt-public-key", pubFile},
		{"--addr", "0.0.0.0:0", "--admin-token", goodAdmin, "--demo"},
		{"--addr", "0.0.0.0:0", "--admin-token", goodAdmin, "--user-jwt-secret", goodSecret},
	} {
		base, stop, _, logs := startServerLogs(t, t.TempDir(), nil, extra...)
		if code, _ := call(t, "GET", base+"/healthz", nil, ""); code != 200 {
			t.Errorf("serve %v: healthz %d", extra, code)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if extra[2] == "--insecure-admin" && !strings.Contains(logs.String(), "--insecure-admin") {
			t.Errorf("no warning for --insecure-admin:\n%s", logs.String())
		}
	}
}

// startServerLogs is startServerEnv that also returns the server's log.
func startServerLogs(t *testing.T, dataDir string, environ map[string]string, extra ...string) (string, func() error, *syncBuffer, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := new(syncBuffer), new(syncBuffer)
	done := make(chan error, 1)
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir}, extra...)
	go func() { done <- run(ctx, args, env(environ), stdout, stderr) }()
	re := regexp.MustCompile(`listening on http://(\S+?):(\d+) `)
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
			t.Cleanup(cancel)
			// Reach a server on every interface through loopback.
			return "http://127.0.0.1:" + m[2], stop, stdout, stderr
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

// TestServeWarnsWeakSecrets: a short HS256 secret and a short admin token
// start, with a warning naming each flag; long ones do not warn.
func TestServeWarnsWeakSecrets(t *testing.T) {
	_, stop, _, logs := startServerLogs(t, t.TempDir(), nil, "--user-jwt-secret", "s3cret", "--admin-token", "admin")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--user-jwt-secret is shorter than 32 bytes", "--admin-token is shorter than 24 bytes"} {
		if !strings.Contains(logs.String(), flag) {
			t.Errorf("no warning %q in:\n%s", flag, logs.String())
		}
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Error("the secret is in the log")
	}
	_, stop, _, logs = startServerLogs(t, t.TempDir(), nil, "--user-jwt-secret", goodSecret, "--admin-token", goodAdmin)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "is shorter than") {
		t.Errorf("a warning for long secrets:\n%s", logs.String())
	}
}

// TestServeHeaderLimit: every listener refuses headers beyond 16 KiB
// (431), where Go's default let each connection make the server hold a
// megabyte; ordinary requests, a JWT's worth of header, pass.
func TestServeHeaderLimit(t *testing.T) {
	base, stop, out := startServerOut(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--debug-addr", "127.0.0.1:0")
	defer stop()
	metrics := waitPrinted(t, out, `metrics at (http://\S+)/metrics`)
	debug := waitPrinted(t, out, `profiles and traces at (http://[0-9.:]+)/debug/pprof/`)
	for _, url := range []string{base + "/healthz", metrics + "/metrics", debug + "/debug/pprof/"} {
		for size, want := range map[int]int{8 << 10: 200, 64 << 10: http.StatusRequestHeaderFieldsTooLarge} {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Padding", strings.Repeat("a", size))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", url, err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s with %d bytes of header: %d, want %d", url, size, resp.StatusCode, want)
			}
		}
	}
}

// waitPrinted waits for serve to print a line matching re and returns its
// first group.
func waitPrinted(t *testing.T, out *syncBuffer, re string) string {
	t.Helper()
	r := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := r.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not print %s:\n%s", re, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServeMetricsAddr: with --metrics-addr, /metrics is served there
// without a token (leaving out sales not yet published) and not on --addr;
// without it, /metrics on --addr needs the admin token when one is set.
func TestServeMetricsAddr(t *testing.T) {
	get := func(url string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admin := map[string]string{"Authorization": "Bearer " + goodAdmin}

	base, stop, out := startServerOut(t, t.TempDir(), "--admin-token", goodAdmin, "--metrics-addr", "127.0.0.1:0")
	metrics := waitPrinted(t, out, `metrics at (http://\S+)/metrics`)
	cli(t, "sale", "create", "--server", base, "--admin-token", goodAdmin, "--sku", "hidden", "--stock", "3", "--opens-at", "+1h")
	cli(t, "sale", "create", "--server", base, "--admin-token", goodAdmin, "--sku", "shown", "--stock", "3", "--opens-at", "+0s")
	for _, sku := range []string{"hidden", "shown"} {
		cli(t, "sale", "pause", sku, "--server", base, "--admin-token", goodAdmin, "--reason", "check")
	}
	if code, _ := get(base+"/metrics", admin); code != 404 {
		t.Errorf("/metrics on --addr with --metrics-addr set: %d, want 404", code)
	}
	code, body := get(metrics+"/metrics", nil)
	if code != 200 || !strings.Contains(body, `flashsale_sale_paused{reason="operator",sku="shown"} 1`) || strings.Contains(body, "hidden") {
		t.Errorf("/metrics on --metrics-addr: %d, shown %t, hidden %t", code,
			strings.Contains(body, `sku="shown"`), strings.Contains(body, "hidden"))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	base, stop = startServer(t, t.TempDir(), "--admin-token", goodAdmin)
	defer stop()
	if code, _ := get(base+"/metrics", nil); code != 401 {
		t.Errorf("/metrics without the token: %d, want 401", code)
	}
	if code, body := get(base+"/metrics", admin); code != 200 || !strings.Contains(body, "flashsale_http_requests_total") {
		t.Errorf("/metrics with the token: %d", code)
	}
}
