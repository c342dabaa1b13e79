package identity

import (
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var testSecret = []byte("test-secret-of-thirty-two-bytes!")

func mint(t testing.TB, sub string, exp time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": exp.Unix()}).SignedString(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCacheIsBounded(t *testing.T) {
	now := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	v, err := NewHS256(testSecret, WithCache(10))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if _, err := v.Verify(mint(t, "user-"+strconv.Itoa(i), now.Add(time.Hour)), now); err != nil {
			t.Fatal(err)
		}
		if n := v.cache.len(); n > 10 {
			t.Fatalf("after %d tokens the cache holds %d entries, want at most 10", i+1, n)
		}
	}
}

func TestCacheKeepsTokensInUse(t *testing.T) {
	now := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	v, _ := NewHS256(testSecret, WithCache(4))
	hot := mint(t, "poller", now.Add(time.Hour))
	if _, err := v.Verify(hot, now); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		_, _ = v.Verify(mint(t, "user-"+strconv.Itoa(i), now.Add(time.Hour)), now)
		if _, ok := v.cache.get(hot); !ok {
			t.Fatalf("a token verified between every other one fell out after %d others", i+1)
		}
	}
}

func TestCacheHoldsOnlyVerifiedTokens(t *testing.T) {
	now := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	v, _ := NewHS256(testSecret, WithCache(10))
	expired := mint(t, "late", now.Add(-time.Hour))
	forged := mint(t, "x", now.Add(time.Hour))
	forged = forged[:len(forged)-2] + "AA"
	for _, tok := range []string{expired, forged, "garbage"} {
		if _, err := v.Verify(tok, now); err == nil {
			t.Fatalf("Verify(%q) succeeded", tok)
		}
	}
	if n := v.cache.len(); n != 0 {
		t.Errorf("refused tokens left %d cache entries", n)
	}
	// An entry whose token expired is dropped when it is next asked for.
	tok := mint(t, "u", now.Add(time.Minute))
	_, _ = v.Verify(tok, now)
	if _, err := v.Verify(tok, now.Add(time.Hour)); err != errExpired {
		t.Errorf("a cached token past its exp: err = %v, want errExpired", err)
	}
	if n := v.cache.len(); n != 0 {
		t.Errorf("the expired entry stayed: %d entries", n)
	}
}

func TestRejectionReasons(t *testing.T) {
	now := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	v, _ := NewHS256(testSecret)
	for _, tc := range []struct {
		tok  string
		want error
	}{
		{"", errNoToken},
		{"a.b", errMalformed},
		{mint(t, "u", now.Add(-time.Hour)), errExpired},
		{mint(t, "", now.Add(time.Hour)), errNoSub},
		{mint(t, "a\x1fb", now.Add(time.Hour)), errBadSub},
	} {
		if _, err := v.Verify(tc.tok, now); err != tc.want {
			t.Errorf("Verify(%.20q) = %v, want %v", tc.tok, err, tc.want)
		}
	}
}
