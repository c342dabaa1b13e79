package console_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestJavaScriptUnits runs the console's unit tests (testdata/*.test.js)
// with Node's test runner, the modules beside them as the browser loads
// them: formatting and axes, the event-stream reader, the charts' model.
// Without Node they skip (and fail under CI=true).
func TestJavaScriptUnits(t *testing.T) {
	bin, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "Node.js (node, for the console's JavaScript tests)", err)
	}
	dir := t.TempDir()
	for _, pattern := range []string{"static/*.js", "testdata/*.js"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no %s: %v", pattern, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type": "module"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests, _ := filepath.Glob(filepath.Join(dir, "*.test.js"))
	cmd := exec.Command(bin, append([]string{"--test", "--test-reporter=tap"}, tests...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" {
		t.Fatalf("node --test ran no test:\n%s", out)
	}
	t.Logf("node --test: %s tests passed", m[1])
}
