package page_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// node returns the path of Node.js, which runs the page's JavaScript unit
// tests; without it the tests skip (and fail under CI).
func node(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "Node.js (node, for the page's JavaScript tests)", err)
	}
	return path
}

// jsDir lays the page's modules, the SDK's it is built on, and the tests
// in testdata/ side by side in a directory Node reads as ES modules. (The
// SDK's own tests run in package sdk.)
func jsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, pattern := range []string{"static/*.js", "../sdk/js/*.js", "testdata/*.js"} {
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
	// The catalogues and the HTML, for the tests of the page's words.
	if err := os.MkdirAll(filepath.Join(dir, "i18n"), 0o755); err != nil {
		t.Fatal(err)
	}
	catalogs, _ := filepath.Glob("static/i18n/*.json")
	for _, f := range append(catalogs, "static/index.html") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel("static", f)
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type": "module"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestJavaScriptUnits runs the page's unit tests (testdata/*.test.js) with
// Node's test runner: the words (every catalogue complete, no word outside
// them, the SDK's notes included) and their formats.
func TestJavaScriptUnits(t *testing.T) {
	bin := node(t)
	dir := jsDir(t)
	tests, _ := filepath.Glob(filepath.Join(dir, "*.test.js"))
	cmd := exec.Command(bin, append([]string{"--test", "--test-reporter=tap"}, tests...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	// Make sure they ran, rather than trusting an exit code.
	m := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" {
		t.Fatalf("node --test ran no test:\n%s", out)
	}
	t.Logf("node --test: %s tests passed", m[1])
}
