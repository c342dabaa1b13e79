package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// flashsale sale invites: codes one a line (for a mailing's script) or as
// JSON; --count required and in range, said in the flag's words; --help.
func TestSaleInvites(t *testing.T) {
	s := newCLIServer(t)
	s.cli(t, "sale", "create", "--sku", "vip", "--stock", "3", "--opens-at", "+1h")

	out := s.cli(t, "sale", "invites", "vip", "--count", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] == lines[1] || strings.ContainsAny(lines[0], " \t") {
		t.Fatalf("invites as lines:\n%s", out)
	}
	var js struct{ Codes []string }
	if err := json.Unmarshal([]byte(s.cli(t, "sale", "invites", "vip", "--count", "2", "-o", "json")), &js); err != nil || len(js.Codes) != 2 {
		t.Fatalf("invites -o json: %v %+v", err, js)
	}
	if v := s.cli(t, "sale", "show", "vip"); !strings.Contains(v, `"issued": 5`) {
		t.Fatalf("the sale's invites after two batches:\n%s", v)
	}

	_, _, err := runCLI([]string{"sale", "invites", "vip", "--server", s.srv.URL}, nil)
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "--count is required") {
		t.Fatalf("no --count: %v", err)
	}
	_, _, err = runCLI([]string{"sale", "invites", "vip", "--count", "0", "--server", s.srv.URL}, nil)
	if err == nil || !strings.Contains(err.Error(), "count must be between 1 and 10000") || exitCode(err) != 1 {
		t.Fatalf("--count 0: %v", err)
	}
	_, _, err = runCLI([]string{"sale", "invites", "none", "--count", "1", "--server", s.srv.URL}, nil)
	if err == nil {
		t.Fatal("invites for no sale succeeded")
	}
	help, _, err := runCLI([]string{"sale", "invites", "--help"}, nil)
	if err != nil || !strings.Contains(help, "Usage: flashsale sale invites SKU --count N") || !strings.Contains(help, "--count") {
		t.Fatalf("--help: %v\n%s", err, help)
	}
}
