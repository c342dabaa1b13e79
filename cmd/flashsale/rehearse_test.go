package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/rehearsal"
)

// flashsale rehearse runs a sale in process and prints the funnel; with
// --report it also writes the page.
func TestRehearseCommand(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.html")
	var o, e bytes.Buffer
	args := []string{"rehearse", "--users", "2000", "--units", "40", "--seed", "3", "--hold", "10s", "--report", report}
	if err := run(context.Background(), args, env(nil), &o, &e); err != nil {
		t.Fatalf("rehearse: %v\n%s", err, e.String())
	}
	for _, want := range []string{"2,000 shoppers, 40 units", "The funnel", "confirmed 40", "oversold 0", "Report written to"} {
		if !strings.Contains(o.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, o.String())
		}
	}
	if !strings.Contains(e.String(), "shoppers done") || !strings.Contains(e.String(), "admitted/s") {
		t.Errorf("no progress line on stderr: %q", e.String())
	}
	page, err := os.ReadFile(report)
	if err != nil || !bytes.Contains(page, []byte("<svg")) {
		t.Fatalf("report page: %v, %d bytes", err, len(page))
	}
	for _, bad := range [][]string{{"rehearse", "--users", "0"}, {"rehearse", "--fairness", "loudest"}, {"rehearse", "extra"}} {
		if err := run(context.Background(), bad, env(nil), &o, &e); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Against a target, --quiet-sale runs the probe as this program's own
// child, with the secrets in its environment and never on its command
// line, where any user of the machine could read them.
func TestProbeInChild(t *testing.T) {
	cfg := rehearsal.Config{Target: "http://127.0.0.1:1", Edge: "http://127.0.0.1:2", UserJWTSecret: "jwt-secret",
		DatabaseURL: "postgres://u:db-secret@h/db", PlainQueryURL: "postgres://u:plain-secret@h/db"}
	probeInChild(&cfg)
	argv := strings.Join(cfg.ProbeCommand, " ")
	if len(cfg.ProbeCommand) < 2 || cfg.ProbeCommand[len(cfg.ProbeCommand)-1] != "--probe-sku" ||
		!strings.Contains(argv, "rehearse --target http://127.0.0.1:1 --edge http://127.0.0.1:2") {
		t.Fatalf("probe command %q: want this program's rehearse --target ... --edge ... --probe-sku", argv)
	}
	if strings.Contains(argv, "secret") {
		t.Errorf("a secret on the probe's command line: %q", argv)
	}
	env := strings.Join(cfg.ProbeEnv, "\n")
	for _, want := range []string{"FLASHSALE_USER_JWT_SECRET=jwt-secret", "FLASHSALE_DATABASE_URL=postgres://u:plain-secret@h/db"} {
		if !strings.Contains(env, want) {
			t.Errorf("probe environment lacks %q: %q", want, env)
		}
	}
}
