package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
)

// The servers below are private: a redis-server or a PostgreSQL cluster
// that the test starts on a port of its own and may kill and restart as it
// likes, without touching the machine's shared servers that every other
// test run uses. They are for drills that need a real process to die.

// RedisServer is a redis-server process of the test's own, keeping nothing
// on disk, so a restart loses every key as a production Redis without
// persistence does. Safe for concurrent use.
type RedisServer struct {
	t    testing.TB
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedisServer starts a redis-server on a free loopback port and
// stops it when t ends. Where redis-server is not installed, t is skipped
// (failed under CI).
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(t, "redis-server", err)
	}
	s := &RedisServer{t: t, port: freePort(t)}
	t.Cleanup(func() { s.Kill() })
	s.Start()
	return s
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Start starts the server if it is not running and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	waitFor(s.t, "redis-server on "+s.Addr(), func(ctx context.Context) error {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true,
			ForceSingleClient: true, DisableRetry: true})
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Do(ctx, c.B().Ping().Build()).Error()
	})
}

// Kill kills the server at once (SIGKILL), as a crash would, and waits for
// it to be gone. Every key is lost.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// PostgresServer is a PostgreSQL cluster of the test's own, in a temporary
// directory, that the test may crash and restart. Safe for concurrent use.
type PostgresServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// asUser runs the server's commands as the postgres user, which the
	// server needs when the tests run as root.
	asUser string

	mu sync.Mutex
}

// StartPostgresServer creates a cluster (initdb) and starts it on a free
// loopback port; it is stopped and removed when t ends. Where PostgreSQL's
// server programs are not installed, t is skipped (failed under CI).
func StartPostgresServer(t testing.TB) *PostgresServer {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		Unavailable(t, "PostgreSQL's server programs (initdb, pg_ctl)", err)
	}
	dir, err := os.MkdirTemp("", "flashsale-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &PostgresServer{t: t, bin: bin, dir: dir, port: freePort(t)}
	t.Cleanup(func() {
		_ = s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(t, "a postgres user to run PostgreSQL as (the tests run as root)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.asUser = "postgres"
	}
	if err := s.run("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	s.Start()
	return s
}

// URL is a connection URL of the server's postgres database.
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Addr is the server's host:port.
func (s *PostgresServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server if it is stopped and waits until it answers.
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-w", "-t", "30",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", s.port, s.dir), "start"); err != nil {
		s.t.Fatalf("pg_ctl start: %v", err)
	}
	waitFor(s.t, "PostgreSQL on "+s.Addr(), func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, s.URL())
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
}

// Crash stops the server the way a crash does (immediate shutdown: no
// checkpoint; the next start recovers from the write-ahead log), cutting
// every connection.
func (s *PostgresServer) Crash() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop"); err != nil {
		s.t.Fatalf("pg_ctl stop: %v", err)
	}
}

func (s *PostgresServer) data() string { return filepath.Join(s.dir, "data") }

// run runs one of PostgreSQL's programs, as the postgres user when needed.
func (s *PostgresServer) run(prog string, args ...string) error {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", prog, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// postgresBin finds the directory of initdb and pg_ctl: on PATH, else the
// newest /usr/lib/postgresql/*/bin (Debian keeps them off PATH).
func postgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb is neither on PATH nor in /usr/lib/postgresql/*/bin")
}

// freePort returns a loopback port nothing listens on at the moment.
func freePort(t testing.TB) int {
	t.Helper()
	return freePorts(t, 1)[0]
}

// freePorts returns n distinct free ports on loopback, all held open until
// every one is chosen.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// waitFor calls ping until it succeeds, for at most 30 seconds.
func waitFor(t testing.TB, what string, ping func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ping(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
