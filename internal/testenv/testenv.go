// Package testenv gives tests the real PostgreSQL, Redis and NATS (with
// JetStream) of the machine, each test isolated in its own schema, key
// prefix or stream and cleaned up after.
//
// Where a server does not answer, the test is skipped with a message that
// says how to provide it; under CI=true it fails instead, so CI cannot pass
// by skipping.
//
// Overselling is neither prevented nor caused here (a test helper).
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/rueidis"
)

// DefaultDatabaseURL and DefaultRedisURL are where the servers of this
// project's machines listen; TEST_DATABASE_URL and TEST_REDIS_URL override
// them.
const (
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	// DefaultNATSURL is the NATS server (with JetStream) of this project's
	// machines; TEST_NATS_URL overrides it.
	DefaultNATSURL = "nats://127.0.0.1:4222"
)

// InCI reports whether the tests run under CI, where a missing server is a
// failure rather than a skip.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// Unavailable skips t, or fails it under CI, because a server is missing.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available (%v); start it or set the variable named in README.md", what, err)
	if InCI() {
		t.Fatal(msg + " (CI=true: integration tests must run)")
	}
	t.Skip(msg)
}

// Suffix returns a random lower-case hex string for names of schemas and key
// prefixes.
func Suffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DatabaseURL returns the URL of the test PostgreSQL.
func DatabaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

// Postgres creates a schema of its own for t and returns a connection URL
// whose search_path is that schema. The schema is dropped when t ends.
func Postgres(t testing.TB) string {
	t.Helper()
	base := DatabaseURL()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		Unavailable(t, "PostgreSQL at "+redact(base), err)
	}
	schema := "t_" + Suffix()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		conn.Close(ctx)
		t.Fatalf("create schema: %v", err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", redact(base), err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// RedisURL returns the URL of the test Redis.
func RedisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultRedisURL
}

// Redis returns a client of the test Redis and a key prefix of t's own.
// Every key under the prefix is deleted when t ends.
func Redis(t testing.TB) (rueidis.Client, string) {
	t.Helper()
	opt, err := rueidis.ParseURL(RedisURL())
	if err != nil {
		t.Fatalf("parse TEST_REDIS_URL: %v", err)
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		Unavailable(t, "Redis at "+RedisURL(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := client.Do(ctx, client.B().Ping().Build()).Error(); err != nil {
		client.Close()
		Unavailable(t, "Redis at "+RedisURL(), err)
	}
	prefix := "fstest:" + Suffix() + ":"
	t.Cleanup(func() {
		DeleteKeys(client, prefix)
		client.Close()
	})
	return client, prefix
}

// DeleteKeys deletes every key that starts with prefix, on the one server
// or on every node of a cluster.
func DeleteKeys(client rueidis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rediskeys.DeletePrefix(ctx, client, prefix)
}

// NATSURL returns the URL of the test NATS server.
func NATSURL() string {
	if u := os.Getenv("TEST_NATS_URL"); u != "" {
		return u
	}
	return DefaultNATSURL
}

// NATS checks that the test NATS server answers with JetStream enabled and
// returns its URL and a name of t's own, in capitals (for a stream; its
// lower case suits subjects). The stream of that name, if t creates one, is
// deleted when t ends.
func NATS(t testing.TB) (natsURL, name string) {
	t.Helper()
	natsURL = NATSURL()
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second), nats.MaxReconnects(0))
	if err != nil {
		Unavailable(t, "NATS at "+natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		Unavailable(t, "JetStream at "+natsURL, err)
	}
	name = "T_" + strings.ToUpper(Suffix())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Logf("delete stream %s: %v", name, err)
		}
		nc.Close()
	})
	return natsURL, name
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
