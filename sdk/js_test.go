package sdk_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/challenge"
	"github.com/flashsale/flashsale/internal/testenv"
)

// node returns the path of Node.js, which runs the SDK's unit tests;
// without it the tests skip (and fail under CI).
func node(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "Node.js (node, for the SDK's JavaScript tests)", err)
	}
	return path
}

// TestJavaScriptUnits runs the SDK's unit tests (js/test/*.test.js) with
// Node's test runner, as .ci/run does: the waiting room's events, polling
// after Retry-After (never sooner), the reserve's key kept over retries,
// the proof of work through a worker, the API client, SHA-256.
func TestJavaScriptUnits(t *testing.T) {
	bin := node(t)
	tests, _ := filepath.Glob("js/test/*.test.js")
	if len(tests) == 0 {
		t.Fatal("no js/test/*.test.js")
	}
	cmd := exec.Command(bin, append([]string{"--test", "--test-reporter=tap"}, tests...)...)
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

// TestSHA256MatchesGo checks the SDK's SHA-256 against crypto/sha256 on
// every length across three blocks, random bytes, and the prefix hasher
// the proof of work uses, at every split of prefix and suffix.
func TestSHA256MatchesGo(t *testing.T) {
	bin := node(t)
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
			want = append(want, challenge.LeadingZeroBits(string(p), suffix))
		}
	}
	body, _ := json.Marshal(in)
	cmd := exec.Command(bin, "testdata/digests.js")
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

// TestProofOfWorkSolvesForGo: a nonce the SDK finds passes the check the
// contract describes: the server's own (challenge.LeadingZeroBits).
func TestProofOfWorkSolvesForGo(t *testing.T) {
	bin := node(t)
	raw := make([]byte, 18)
	_, _ = rand.Read(raw)
	salt := base64.RawURLEncoding.EncodeToString(raw)
	const difficulty = 16
	cmd := exec.Command(bin, "testdata/solve.js", salt, "16")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node solve.js: %v", err)
	}
	nonce := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`^[0-9]+$`).MatchString(nonce) {
		t.Fatalf("nonce %q is not decimal", nonce)
	}
	if got := challenge.LeadingZeroBits(salt, nonce); got < difficulty {
		t.Fatalf("SHA-256(%q + %q) starts with %d zero bits, want %d", salt, nonce, got, difficulty)
	}
}
