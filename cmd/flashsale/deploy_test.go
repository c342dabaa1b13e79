package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v4"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The deployment shipped in deploy/ (issue 19): the compose file loads with
// the compose-spec loader, every flashsale command line and FLASHSALE_
// variable in it names a flag serve has, and the load balancer and
// Prometheus point at the services the compose file runs.

const deployDir = "../../deploy"

// loadCompose loads deploy/compose.yaml as `docker compose` would, with env
// as the environment (deploy/.env's values).
func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	dir, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml")}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("flashsale", true) })
}

// exampleEnv returns the variables deploy/.env.example names, each given a
// value as an operator would.
func exampleEnv(t *testing.T) map[string]string {
	t.Helper()
	names, err := dotenv.Read(filepath.Join(deployDir, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for name, v := range names {
		if v != "" {
			t.Errorf(".env.example gives %s a value; every secret must be the operator's own", name)
		}
		env[name] = "test-value-of-" + strings.ToLower(name)
	}
	return env
}

func TestComposeLoads(t *testing.T) {
	p, err := loadCompose(t, exampleEnv(t))
	if err != nil {
		t.Fatalf("compose.yaml with .env.example's variables set: %v", err)
	}
	for _, name := range []string{"postgres", "redis", "nats", "origin-1", "origin-2", "edge-1", "lb", "prometheus", "grafana"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("compose.yaml has no service %q", name)
		}
	}
	redis := strings.Join(p.Services["redis"].Command, " ")
	for _, want := range []string{`--save `, "--appendonly no"} {
		if !strings.Contains(redis+" ", want) {
			t.Errorf("redis runs without persistence (%q), not %q", want, redis)
		}
	}
	if !slices.Contains(p.Services["nats"].Command, "--jetstream") {
		t.Errorf("nats runs without JetStream: %q", p.Services["nats"].Command)
	}
	// Every file a service mounts from deploy/ is there.
	dir, _ := filepath.Abs(deployDir)
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			rel, err := filepath.Rel(dir, v.Source)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s mounts %s, outside deploy/", name, v.Source)
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts deploy/%s: %v", name, rel, err)
			}
		}
	}
}

// Without deploy/.env's secrets, compose refuses to start, naming them.
func TestComposeNeedsEverySecret(t *testing.T) {
	for name := range exampleEnv(t) {
		env := exampleEnv(t)
		delete(env, name)
		_, err := loadCompose(t, env)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v; want an error naming it", name, err)
		}
	}
}

// Every flashsale command line in compose.yaml, with its FLASHSALE_
// variables as the flags they stand for, parses against serve's own flag
// set: "-h" after them stops serve once they are parsed, before it opens
// anything, and an unknown flag or a bad value fails first.
func TestComposeCommandsUseServeFlags(t *testing.T) {
	p, err := loadCompose(t, exampleEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for name, s := range p.Services {
		if s.Build == nil {
			continue // not a flashsale image
		}
		seen++
		args := slices.Clone([]string(s.Command))
		if len(args) == 0 || args[0] != "serve" {
			t.Errorf("%s runs %q; want flashsale serve", name, args)
			continue
		}
		var vars []string
		for k, v := range s.Environment {
			if !strings.HasPrefix(k, "FLASHSALE_") || v == nil {
				continue
			}
			vars = append(vars, k)
			args = append(args, "--"+strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "FLASHSALE_")), "_", "-")+"="+*v)
		}
		var stderr bytes.Buffer
		// dispatch, not run, which answers --help with nil.
		err := dispatch(context.Background(), append(args, "-h"), func(string) string { return "" }, &bytes.Buffer{}, &stderr)
		if !errors.Is(err, flag.ErrHelp) {
			// The command as written, and the variables' names: their
			// values are secrets.
			t.Errorf("%s: flashsale %q with %v set: %v\n%s", name, []string(s.Command), vars, err, stderr.String())
		}
		role := flagValue(args, "role")
		switch {
		case strings.HasPrefix(name, "origin-") && role != "origin":
			t.Errorf("%s runs --role=%q", name, role)
		case strings.HasPrefix(name, "edge-") && (role != "edge" || flagValue(args, "origin-url") == "" || flagValue(args, "redis-url") == ""):
			t.Errorf("%s: an edge needs --role=edge, --origin-url and --redis-url: %q", name, args)
		}
		if !strings.HasPrefix(flagValue(args, "addr"), "0.0.0.0:") {
			t.Errorf("%s listens on %q, which the load balancer cannot reach", name, flagValue(args, "addr"))
		}
		if !strings.HasPrefix(flagValue(args, "metrics-addr"), "0.0.0.0:") {
			t.Errorf("%s serves /metrics on %q, which Prometheus cannot reach", name, flagValue(args, "metrics-addr"))
		}
		for _, shared := range []string{"token-keys", "user-jwt-secret", "admin-token"} {
			if flagValue(args, shared) == "" {
				t.Errorf("%s has no --%s: the fleet's servers must share it", name, shared)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("%d flashsale services in compose.yaml; want two origins and an edge", seen)
	}
}

// flagValue returns the last --name=value in args.
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if rest, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = rest
		}
	}
	return v
}

// The load balancer's servers are the compose file's origins and edges,
// each backend checked on /readyz; haproxy itself accepts the file where
// it is installed.
func TestHAProxyConfig(t *testing.T) {
	p, err := loadCompose(t, exampleEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(deployDir, "haproxy.cfg")
	f, err := os.Open(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	backends := map[string][]string{}
	checked := map[string]bool{}
	server := regexp.MustCompile(`^server\s+(\S+)\s+([^:\s]+):(\d+)`)
	var backend string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0 || strings.HasPrefix(line, "#"):
		case fields[0] == "backend":
			backend = fields[1]
		case fields[0] == "frontend" || fields[0] == "defaults" || fields[0] == "global" || fields[0] == "resolvers":
			backend = ""
		case backend != "" && line == "option httpchk GET /readyz":
			checked[backend] = true
		case backend != "" && server.MatchString(line):
			m := server.FindStringSubmatch(line)
			if _, ok := p.Services[m[2]]; !ok || m[3] != "8080" {
				t.Errorf("backend %s: server %s:%s is no flashsale service of compose.yaml", backend, m[2], m[3])
			}
			backends[backend] = append(backends[backend], m[2])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		want := "origins"
		if strings.HasPrefix(name, "edge-") {
			want = "edges"
		}
		if !slices.Contains(backends[want], name) {
			t.Errorf("%s is not a server of haproxy's backend %s", name, want)
		}
	}
	for b := range backends {
		if !checked[b] {
			t.Errorf("backend %s has no health check on /readyz", b)
		}
	}
	check(t, "haproxy", "-c", "-f", cfgPath)
}

// check runs a tool's own check of a file of deploy/, where the tool is
// installed; under CI (which installs it) its absence is a failure.
func check(t *testing.T, tool string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if testenv.InCI() {
			t.Fatalf("%s is not installed (CI=true: .ci/run installs it)", tool)
		}
		t.Logf("%s is not installed: %s %v is not run", tool, tool, args)
		return
	}
	out, err := exec.Command(tool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", tool, args, err, out)
	}
}

// Prometheus scrapes every flashsale service on its --metrics-addr port,
// and loads the rules file the compose file mounts beside its
// configuration; promtool accepts the configuration where it is installed.
func TestPrometheusConfig(t *testing.T) {
	p, err := loadCompose(t, exampleEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	prom := p.Services["prometheus"]
	mounted := func(target string) bool {
		for _, v := range prom.Volumes {
			if v.Target == target {
				return true
			}
		}
		return false
	}
	var configAt string
	for _, v := range prom.Volumes {
		if strings.HasSuffix(v.Source, filepath.Join("prometheus", "prometheus.yml")) {
			configAt = v.Target
		}
	}
	if configAt == "" || !slices.Contains([]string(prom.Command), "--config.file="+configAt) {
		t.Fatalf("prometheus does not run with deploy/prometheus/prometheus.yml (mounted at %q): %q", configAt, prom.Command)
	}
	for _, r := range cfg.RuleFiles {
		in := r
		if !filepath.IsAbs(r) {
			in = path.Join(path.Dir(configAt), r)
		}
		if !mounted(in) {
			t.Errorf("prometheus.yml loads %s (%s), which compose.yaml does not mount", r, in)
		}
	}
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, _ := strings.Cut(target, ":")
				if s, ok := p.Services[host]; ok && s.Build != nil {
					_, metricsPort, _ := strings.Cut(flagValue(s.Command, "metrics-addr"), ":")
					if port != metricsPort {
						t.Errorf("job %s scrapes %s on port %s; its --metrics-addr is port %q", sc.JobName, host, port, metricsPort)
					}
					scraped[host] = true
				}
			}
		}
	}
	for name, s := range p.Services {
		if s.Build != nil && !scraped[name] {
			t.Errorf("Prometheus does not scrape %s", name)
		}
	}
	check(t, "promtool", "check", "config", filepath.Join(deployDir, "prometheus", "prometheus.yml"))
}
