package page_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// jsDir lays the page's modules and the tests in testdata/ side by side in
// a directory Node reads as ES modules, as the browser does.
func jsDir(t *testing.T) string {
	t.Helper()
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
// Node's test runner: timing, the API client, the protocol, the words
// (every catalogue complete, no word outside them), SHA-256 and the
// search.
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

// TestSHA256MatchesGo checks the page's SHA-256 against crypto/sha256 on
// every length across three blocks, random bytes, and the prefix hasher
// the proof of work uses, at every split of prefix and suffix.
func TestSHA256MatchesGo(t *testing.T) {
	bin := node(t)
	dir := jsDir(t)
	type prefixed struct {
		Prefix string `json:"prefix"`
		Suffix string `json:"suffix"`
	}
	var in struct {
		Messages []string   `json:"messages"`
		Prefixed []prefixed `json:"prefixed"`
	}
	var messages [][]byte
	for n := 0; n <= 200; n++ {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		messages = append(messages, b)
	}
	messages = append(messages, bytes.Repeat([]byte{0xff}, 4096), []byte("héllo wörld ✓"))
	for _, m := range messages {
		in.Messages = append(in.Messages, hex.EncodeToString(m))
	}
	var want []int
	for n := 0; n <= 130; n++ {
		p := make([]byte, n)
		_, _ = rand.Read(p)
		for _, suffix := range []string{"0", "7", "4711", "12345678901234"} {
			in.Prefixed = append(in.Prefixed, prefixed{Prefix: hex.EncodeToString(p), Suffix: suffix})
			want = append(want, zeroBits(sha256.Sum256(append(append([]byte{}, p...), suffix...))))
		}
	}
	body, _ := json.Marshal(in)
	cmd := exec.Command(bin, "digests.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node digests.js: %v", err)
	}
	var got struct {
		Digests  []string `json:"digests"`
		ZeroBits []int    `json:"zeroBits"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if len(got.Digests) != len(messages) || len(got.ZeroBits) != len(want) {
		t.Fatalf("got %d digests and %d counts, want %d and %d", len(got.Digests), len(got.ZeroBits), len(messages), len(want))
	}
	for i, m := range messages {
		if sum := sha256.Sum256(m); got.Digests[i] != hex.EncodeToString(sum[:]) {
			t.Errorf("%d-byte message: JS %s, Go %x", len(m), got.Digests[i], sum)
		}
	}
	for i := range want {
		if got.ZeroBits[i] != want[i] {
			t.Errorf("prefixed %d: JS %d zero bits, Go %d", i, got.ZeroBits[i], want[i])
		}
	}
}

// TestProofOfWorkSolvesForGo: a nonce the page finds passes the check the
// contract describes, done with Go's crypto/sha256, as the server will.
func TestProofOfWorkSolvesForGo(t *testing.T) {
	bin := node(t)
	dir := jsDir(t)
	raw := make([]byte, 18)
	_, _ = rand.Read(raw)
	salt := base64.RawURLEncoding.EncodeToString(raw)
	const difficulty = 16
	cmd := exec.Command(bin, "solve.js", salt, "16")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node solve.js: %v", err)
	}
	nonce := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`^[0-9]+$`).MatchString(nonce) {
		t.Fatalf("nonce %q is not decimal", nonce)
	}
	if got := zeroBits(sha256.Sum256([]byte(salt + nonce))); got < difficulty {
		t.Fatalf("SHA-256(%q + %q) starts with %d zero bits, want %d", salt, nonce, got, difficulty)
	}
}

func zeroBits(sum [32]byte) int {
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}
