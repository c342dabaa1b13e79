package rehearsal_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/rehearsal"
)

// The test binary doubles as the probe's child process (as flashsale
// rehearse --probe-sku does for the real one) and as a process that lowers
// its own priority, so that the test run's own keeps its.
const (
	childEnv  = "REHEARSAL_TEST_CHILD"
	targetEnv = "REHEARSAL_TEST_TARGET"
	dbEnv     = "REHEARSAL_TEST_DB"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "probe":
		cfg := rehearsal.Config{Target: os.Getenv(targetEnv), DatabaseURL: os.Getenv(dbEnv)}
		if err := rehearsal.Probe(context.Background(), cfg, os.Args[len(os.Args)-1], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "fail":
		fmt.Fprintln(os.Stderr, "probe child refuses")
		os.Exit(3)
	case "nice":
		os.Exit(niceChild())
	}
}

// probeCommand runs this test binary as the probe's child, in mode.
func probeCommand(cfg *rehearsal.Config, mode, target, dbURL string) {
	cfg.ProbeCommand = []string{os.Args[0]}
	cfg.ProbeEnv = []string{childEnv + "=" + mode, targetEnv + "=" + target, dbEnv + "=" + dbURL}
}

// A probe child that dies before its baseline fails the rehearsal at once,
// with the child's own words, rather than hanging it or running the crowd
// unmeasured.
func TestProbeChildFails(t *testing.T) {
	eng, err := engine.Open(context.Background(), engine.Config{DataDir: t.TempDir(), Source: "rehearsal-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	srv := httptest.NewServer(eng.Handler)
	t.Cleanup(srv.Close)
	cfg := rehearsal.Config{Target: srv.URL, Users: 10, Units: 1, Seed: 1, Quiet: true}
	probeCommand(&cfg, "fail", srv.URL, "")
	_, err = rehearsal.Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "probe child refuses") {
		t.Fatalf("Run with a failing probe: %v; want the child's message", err)
	}
}

// lowerPriority reaches every thread of the process, those the runtime
// starts afterwards included.
func TestLowerPriority(t *testing.T) {
	if runtime.GOOS != "linux" {
		if err := rehearsal.LowerPriority(5); err == nil {
			t.Fatal("lowerPriority claims to work where it cannot")
		}
		return
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=nice")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// niceChild lowers its priority, starts a thread, and checks every
// thread's niceness: 0 when all are at 7.
func niceChild() int {
	if err := rehearsal.LowerPriority(7); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread() // a new thread of its own, not given back
		close(started)
		time.Sleep(time.Hour)
	}()
	<-started
	tasks, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil || len(tasks) < 2 {
		fmt.Fprintln(os.Stderr, "threads:", tasks, err)
		return 1
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has ended
		}
		// The fields after the command's closing parenthesis: state is
		// field 3, nice field 19.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if n, err := strconv.Atoi(fields[19-3]); err != nil || n != 7 {
			fmt.Fprintf(os.Stderr, "%s: nice %s, want 7\n", f, fields[19-3])
			return 1
		}
	}
	return 0
}
