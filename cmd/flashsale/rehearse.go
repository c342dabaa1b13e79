package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/rehearsal"
)

const rehearseAbout = `Runs a whole sale with N synthetic shoppers who follow the real client
protocol (ticket, jittered polling, the proof of work, reserve, confirm;
some pay late, some fail payment, some walk away so that holds expire;
--bots of them automation), and prints the funnel: what each layer turned
away, what was sold, and the oversold count checked against the record.

Without --target it runs in process on the embedded default (or on
--redis-url/--database-url), its clock compressed: the sale's minutes take
seconds, every real code path runs. With --target it drives a running
server over HTTP in real time.`

func rehearse(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags(command{name: "rehearse", args: "--users N --units M [flags]", about: rehearseAbout}, stdout)
	var cfg rehearsal.Config
	var fairness, report string
	var quiet bool
	fs.IntVar(&cfg.Users, "users", 100000, "synthetic shoppers")
	fs.IntVar(&cfg.Units, "units", 1000, "units for sale")
	fs.StringVar(&cfg.Target, "target", "", "base URL of a running server (empty: in process)")
	fs.StringVar(&cfg.Edge, "edge", "", "with --target: base URL of an edge (serve --role edge) that answers the waiting room's routes, the target being its origin")
	fs.StringVar(&cfg.AdminToken, "admin-token", getenv("FLASHSALE_ADMIN_TOKEN"), "the target's admin token")
	fs.StringVar(&cfg.UserJWTSecret, "user-jwt-secret", getenv("FLASHSALE_USER_JWT_SECRET"), "HS256 secret the target verifies shopper JWTs with (empty: the development key)")
	fs.StringVar(&cfg.InstrumentClaim, "instrument-claim", getenv("FLASHSALE_INSTRUMENT_CLAIM"), "the JWT claim the target reads the payment instrument from (its --instrument-claim; empty: pmf)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 256, "requests in flight against the target")
	fs.Float64Var(&cfg.Bots, "bots", 0, "share of the crowd that is automation (0 to 1)")
	fs.IntVar(&cfg.Invited, "invited", 0, "people of the crowd who hold an invite code and redeem it instead of taking a ticket")
	fs.Float64Var(&cfg.PayFail, "pay-fail", 0.05, "share of winners whose payment fails (they cancel)")
	fs.Float64Var(&cfg.Abandon, "abandon", 0.05, "share of winners who walk away (their holds expire)")
	fs.Float64Var(&cfg.PayLate, "pay-late", 0.02, "share of winners who pay after the hold expired")
	fs.StringVar(&fairness, "fairness", "fifo", "fifo, random or lottery")
	fs.DurationVar(&cfg.Hold, "hold", 60*time.Second, "the sale's hold")
	fs.IntVar(&cfg.AdmissionPerSecond, "admission-per-second", 0, "the pacer's ceiling (default a quarter of the units)")
	fs.IntVar(&cfg.ChallengeBits, "challenge-bits", 8, "the proof of work's base difficulty (0: none)")
	fs.DurationVar(&cfg.MinAccountAge, "min-account-age", 72*time.Hour, "the sale's minimum account age")
	fs.DurationVar(&cfg.Arrival, "arrival", 10*time.Second, "the window the crowd arrives in, 30% of it before the open")
	fs.IntVar(&cfg.BotsPerCard, "bots-per-card", 10, "bot accounts sharing one payment instrument")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "in process: where the SQLite file goes (default: a temporary directory, removed)")
	fs.StringVar(&cfg.RedisURL, "redis-url", getenv("FLASHSALE_REDIS_URL"), "in process: the gate in this Redis")
	fs.StringVar(&cfg.DatabaseURL, "database-url", getenv("FLASHSALE_DATABASE_URL"), "in process: the record in this PostgreSQL")
	fs.IntVar(&cfg.Workers, "workers", 0, "in process: goroutines running the shoppers (default 2 per CPU)")
	fs.BoolVar(&quiet, "quiet-sale", false, "run a quiet second sale and a plain query beside the big one and compare their p99 with idle")
	fs.StringVar(&cfg.PlainQueryURL, "plain-query-url", "", "PostgreSQL the plain query runs against (default --database-url)")
	fs.IntVar(&cfg.CrowdNice, "crowd-nice", 10, "with --target and --quiet-sale: the niceness the crowd runs at once the probe, in a process of its own, has its idle baseline (0: unchanged)")
	probeSKU := fs.String("probe-sku", "", "run only the isolation probe of this quiet sale against --target (what --quiet-sale starts as its own process)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "makes the crowd reproducible (0: random)")
	fs.StringVar(&report, "report", "", "also write the report as an HTML page to this file")
	noProgress := fs.Bool("no-progress", false, "no live progress line")
	memLimit := fs.Int("memory-limit-mib", 600, "a soft limit on the process's heap, in MiB (Go's GC works harder near it; 0: none), so that a rehearsal of millions stays inside a laptop's gigabyte")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the rehearsal to this file (go tool pprof)")
	heapProfile := fs.String("memprofile", "", "in process: write a heap profile, taken once the crowd has arrived, to this file")
	if err := parseQuiet(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("rehearse: unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	if *probeSKU != "" {
		return rehearsal.Probe(ctx, cfg, *probeSKU, os.Stdin, stdout)
	}
	cfg.Fairness = flashsale.Fairness(fairness)
	cfg.Quiet = quiet
	if quiet && cfg.Target != "" {
		probeInChild(&cfg)
	}
	if !*noProgress {
		cfg.Progress = stderr
	}
	if *memLimit > 0 {
		debug.SetMemoryLimit(int64(*memLimit) << 20)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *heapProfile != "" {
		f, err := os.Create(*heapProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.HeapProfile = f
	}
	rep, err := rehearsal.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.WriteText(stdout)
	if report != "" {
		f, err := os.Create(report)
		if err != nil {
			return err
		}
		if err := rep.WriteHTML(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nReport written to %s\n", report)
	}
	if pass, why := rep.Verdict(); !pass {
		return fmt.Errorf("the rehearsal failed: %s", why)
	}
	return nil
}

// probeInChild has the rehearsal run its isolation probe as a child
// process of this same program (see rehearsal.Probe), so that the crowd's
// CPU is not the probe's. The shoppers' key and the plain query's URL go
// to the child in its environment, never on its command line. Where this
// program cannot find itself the probe stays in process.
func probeInChild(cfg *rehearsal.Config) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	argv := []string{exe, "rehearse", "--target", cfg.Target}
	if cfg.Edge != "" {
		argv = append(argv, "--edge", cfg.Edge)
	}
	if cfg.InstrumentClaim != "" {
		argv = append(argv, "--instrument-claim", cfg.InstrumentClaim)
	}
	cfg.ProbeCommand = append(argv, "--no-progress", "--probe-sku")
	if cfg.UserJWTSecret != "" {
		cfg.ProbeEnv = append(cfg.ProbeEnv, "FLASHSALE_USER_JWT_SECRET="+cfg.UserJWTSecret)
	}
	if url := cmp.Or(cfg.PlainQueryURL, cfg.DatabaseURL); url != "" {
		cfg.ProbeEnv = append(cfg.ProbeEnv, "FLASHSALE_DATABASE_URL="+url)
	}
}
