package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if !strings.Contains(e.String(), "shoppers answered") {
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
