package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets a test run the real main, in a process of its own, to see
// what an operator sees: the exit status and stderr.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("FLASHSALE_TEST_MAIN_ARGS"); ok {
		os.Args = append([]string{"flashsale"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startFailure is a way for "flashsale serve" to fail at start, and the
// words its one line must have: the flag or the server at fault.
type startFailure struct {
	name string
	args []string
	env  map[string]string
	want string
	// secret, if set, must not appear in the message.
	secret string
}

// writeTempFile writes b to a file of its own and returns its path.
func writeTempFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startFailures are the configuration and connection errors of issue 19:
// each must end run with one line naming its flag or server, exit status 1.
func startFailures(t *testing.T) []startFailure {
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(edPriv)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallDER, err := x509.MarshalPKIXPublicKey(&small.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	corruptKeys := t.TempDir()
	if err := os.WriteFile(filepath.Join(corruptKeys, "token-keys"), []byte("this is not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataFile := writeTempFile(t, "not-a-dir", []byte("x"))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	return []startFailure{
		{name: "token keys malformed", args: []string{"--token-keys", "no-colon-here"}, want: "--token-keys"},
		{name: "token key too short", args: []string{"--token-keys", "k1:c2hvcnQ"}, want: "--token-keys"},
		{name: "token keys file corrupt", args: []string{"--data-dir", corruptKeys}, want: "--data-dir: the token keys in"},
		{name: "data dir is a file", args: []string{"--data-dir", dataFile}, want: "--data-dir"},
		{name: "PEM unreadable", args: []string{"--user-jwt-public-key", filepath.Join(t.TempDir(), "missing.pem")},
			want: "--user-jwt-public-key"},
		{name: "PEM garbage", args: []string{"--user-jwt-public-key", writeTempFile(t, "garbage.pem", []byte("not a pem file"))},
			want: "--user-jwt-public-key"},
		{name: "PEM private key", args: []string{"--user-jwt-public-key",
			writeTempFile(t, "private.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))},
			want: "--user-jwt-public-key"},
		{name: "PEM RSA too small", args: []string{"--user-jwt-public-key",
			writeTempFile(t, "small.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: smallDER}))},
			want: "--user-jwt-public-key"},
		{name: "PostgreSQL not answering", args: []string{"--database-url", "postgres://flashsale:hunter2-secret@127.0.0.1:1/flashsale"},
			want: "--database-url: PostgreSQL at 127.0.0.1:1", secret: "hunter2-secret"},
		{name: "database URL not PostgreSQL", args: []string{"--database-url", "mysql://127.0.0.1/x"}, want: "--database-url"},
		{name: "Redis not answering", args: []string{"--redis-url", "redis://127.0.0.1:1/0"}, want: "--redis-url: Redis at 127.0.0.1:1"},
		{name: "Redis URL malformed", args: []string{"--redis-url", "http://127.0.0.1/"}, want: "--redis-url"},
		{name: "NATS not answering", args: []string{"--events-sink", "nats", "--nats-url", "nats://127.0.0.1:1"},
			want: "--nats-url: NATS at 127.0.0.1:1"},
		{name: "address in use", args: []string{"--addr", busy.Addr().String()}, want: "--addr"},
		{name: "metrics address malformed", args: []string{"--metrics-addr", "nowhere"}, want: "--metrics-addr"},
		{name: "duration malformed", args: []string{"--admission-ttl", "soon"}, want: "--admission-ttl"},
		{name: "boolean malformed", args: []string{"--insecure-admin=perhaps"}, want: "--insecure-admin"},
		{name: "number malformed", args: []string{"--max-in-flight", "many"}, want: "--max-in-flight"},
		{name: "environment malformed", env: map[string]string{"FLASHSALE_ADMISSION_TTL": "soon"},
			want: "FLASHSALE_ADMISSION_TTL (--admission-ttl)"},
		{name: "role unknown", args: []string{"--role", "janitor"}, want: "--role"},
		{name: "edge without origin", args: []string{"--role", "edge"}, want: "--role edge"},
		{name: "log level unknown", args: []string{"--log-level", "loud"}, want: "--log-level"},
		{name: "in-flight bound negative", args: []string{"--max-in-flight", "-2"}, want: "--max-in-flight"},
		{name: "sale share negative", args: []string{"--sale-max-in-flight", "-1"}, want: "--sale-max-in-flight"},
		{name: "in-flight wait negative", args: []string{"--in-flight-wait", "-1s"}, want: "--in-flight-wait"},
		{name: "background pool empty", args: []string{"--background-max-conns", "0"}, want: "--background-max-conns"},
		{name: "JWT lifetime not positive", args: []string{"--user-jwt-max-lifetime", "0s"}, want: "--user-jwt-max-lifetime"},
		{name: "webhook without secret", args: []string{"--events-sink", "webhook", "--webhook-url", "http://127.0.0.1:1/"},
			want: "--webhook-secret"},
	}
}

// TestStartFailsClearly: every configuration or connection error at start
// ends run with an error (exit status 1) whose message, as main prints it
// on one line, names
// the flag or the server at fault, quickly, without a panic and without a
// password from a URL. On the main of issue 19, a bad --token-keys, or a
// PostgreSQL or Redis that does not answer, panicked in engine.Open.
func TestStartFailsClearly(t *testing.T) {
	for _, f := range startFailures(t) {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, f.args...)
			began := time.Now()
			err := run(ctx, args, env(f.env), &stdout, &stderr)
			if err == nil {
				t.Fatalf("serve %v started (or ran until the test's deadline)", f.args)
			}
			if took := time.Since(began); took > 8*time.Second {
				t.Errorf("it took %s to fail", took)
			}
			msg := oneLine(err)
			if code := exitCode(err); code != 1 {
				t.Errorf("exit status %d, want 1 (%s)", code, msg)
			}
			if !strings.Contains(msg, f.want) {
				t.Errorf("error %q does not name %q", msg, f.want)
			}
			if f.secret != "" && strings.Contains(msg+stderr.String(), f.secret) {
				t.Errorf("the password of the URL is shown: %q", msg)
			}
			if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "goroutine ") {
				t.Errorf("stderr has a panic:\n%s", stderr.String())
			}
		})
	}
}

// TestStartFailsClearlyProcess runs the real main for a few of the
// failures: exit status 1 and, on stderr, the one line "flashsale: ..."
// naming the flag, and nothing else (no usage, no stack trace).
func TestStartFailsClearlyProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary as the command")
	}
	wanted := map[string]bool{"token keys malformed": true, "PostgreSQL not answering": true,
		"Redis not answering": true, "duration malformed": true, "PEM private key": true}
	for _, f := range startFailures(t) {
		if !wanted[f.name] {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, f.args...)
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "FLASHSALE_TEST_MAIN_ARGS="+strings.Join(args, "\x1f"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "flashsale: ") || !strings.Contains(lines[0], f.want) {
				t.Errorf("stderr is not one line naming %q:\n%s", f.want, stderr.String())
			}
		})
	}
}
