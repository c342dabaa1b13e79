package control

import (
	"github.com/flashsale/flashsale"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/metrics"
)

// The gauge's reason label takes exactly the causes PauseCause returns.
func TestPauseCausesAreTheGaugeReasons(t *testing.T) {
	if !slices.Equal(PauseCauses, metrics.PauseReasons) {
		t.Fatalf("control.PauseCauses %v, metrics.PauseReasons %v", PauseCauses, metrics.PauseReasons)
	}
}

func TestPauseCause(t *testing.T) {
	for reason, want := range map[string]string{
		"paused by an operator":         CauseOperator,
		"checking the payment provider": CauseOperator,
		"":                              CauseOperator,
		"the stock gate is unreachable": CauseGate,
		"the stock gate has no counter for the sale":                           CauseGate,
		"lost shards of the stock gate could not be rebuilt from the record":   CauseGate,
		"shards rebuilt from the record do not add up to the sale's stock":     CauseGate,
		"the invariant failed: counter + confirmed + pending = 11, initial 10": CauseInvariant,
	} {
		if got := PauseCause(reason); got != want {
			t.Errorf("PauseCause(%q) = %q, want %q", reason, got, want)
		}
	}
}

// failClosedCall finds the engine's own pauses in the source: a reason
// given to FailClosed (or to the watcher's Pause) as a string literal, or
// as one of the root package's PauseGate constants.
var failClosedCall = regexp.MustCompile(`(?:FailClosed|cfg\.Pause)\([^"\n]*?(?:"([^"]+)"|flashsale\.(PauseGate\w+))`)

// pauseConstants are the root package's pause reasons, by name.
var pauseConstants = map[string]string{
	"PauseGateUnreachable": flashsale.PauseGateUnreachable,
	"PauseGateLost":        flashsale.PauseGateLost,
	"PauseGateNoCounter":   flashsale.PauseGateNoCounter,
}

// Every reason the engine pauses a sale with is classified as the
// engine's, never as an operator's: a new FailClosed reason that
// PauseCause does not know would hide an incident from the alert on
// pauses no operator made.
func TestEveryEnginePauseHasACause(t *testing.T) {
	root := filepath.Join("..")
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range failClosedCall.FindAllStringSubmatch(string(b), -1) {
			n++
			reason := m[1]
			if m[2] != "" {
				var ok bool
				if reason, ok = pauseConstants[m[2]]; !ok {
					t.Errorf("%s: FailClosed(flashsale.%s): a pause reason this test does not know", path, m[2])
					continue
				}
			}
			if PauseCause(reason) == CauseOperator {
				t.Errorf("%s: FailClosed(%q) is classified as an operator's pause", path, reason)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Fatalf("found %d engine pauses in the source; the pattern no longer matches them", n)
	}
}
