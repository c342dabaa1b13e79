package identity_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/identity"
	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerify feeds Verify arbitrary header values. The seeds (here and in
// testdata/fuzz/FuzzVerify) are signed with the test secret, so the fuzzer
// starts from genuine tokens. Verify must not panic; what it accepts must
// meet the contract; a cached verifier must answer as an uncached one.
func FuzzVerify(f *testing.F) {
	plain := hs256(f)
	cached := hs256(f, identity.WithCache(64))
	f.Add("Bearer " + sign(f, jwt.SigningMethodHS256, secret, claims(nil)))
	f.Add(sign(f, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"acct_created": 1700000000.25, "nbf": t0.Unix()})))
	f.Add(sign(f, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"exp": t0.Unix()})))
	f.Add(sign(f, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": "a\x1fb"})))
	f.Add(sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil)))
	f.Add(signRaw(f, `{"sub":"u","exp":1785582000,"acct_created":"1"}`))
	f.Add("")
	f.Add("Bearer")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, h string) {
		s, err := plain.Verify(h, t0)
		if err != nil {
			if !errors.Is(err, identity.ErrUnauthenticated) || s != (identity.Shopper{}) {
				t.Fatalf("Verify = %+v, %v; want a zero shopper and ErrUnauthenticated", s, err)
			}
		} else {
			if !identity.ValidUserID(s.UserID) {
				t.Fatalf("accepted user id %q", s.UserID)
			}
			if !t0.Before(s.Expires.Add(identity.DefaultLeeway)) {
				t.Fatalf("accepted a token that expired at %v", s.Expires)
			}
		}
		for _, now := range []time.Time{t0, t0} { // the second may be a cache hit
			cs, cerr := cached.Verify(h, now)
			if cs != s || cerr != err {
				t.Fatalf("cached Verify = %+v, %v; uncached %+v, %v", cs, cerr, s, err)
			}
		}
	})
}

// TestFuzzCorpusIsGenuine checks that the corpus's valid seeds still
// verify, so the fuzzer keeps starting from genuine tokens.
func TestFuzzCorpusIsGenuine(t *testing.T) {
	v := hs256(t)
	for _, name := range []string{"valid_bearer", "valid_raw", "valid_nbf_fraction"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzVerify", name))
		if err != nil {
			t.Fatal(err)
		}
		line, _, _ := strings.Cut(strings.TrimPrefix(string(b), "go test fuzz v1\n"), "\n")
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := v.Verify(s, t0); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
