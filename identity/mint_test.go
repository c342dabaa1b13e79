package identity_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/identity"
	"github.com/golang-jwt/jwt/v5"
)

func TestMintHS256(t *testing.T) {
	now := time.Date(2026, 8, 1, 10, 0, 0, 700_000_000, time.UTC)
	dev := []byte(identity.DevelopmentSecret)
	tok, err := identity.MintHS256(dev, "alice", 720*time.Hour, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewHS256(dev)
	if err != nil {
		t.Fatal(err)
	}
	s, err := v.Verify("Bearer "+tok, now)
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Shopper{
		UserID:         "alice",
		AccountCreated: time.Date(2026, 7, 2, 10, 0, 0, 0, time.UTC),
		Expires:        time.Date(2026, 8, 2, 10, 0, 0, 0, time.UTC),
	}
	if s != want {
		t.Errorf("Verify(MintHS256) = %+v, want %+v", s, want)
	}

	var c jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		t.Fatal(err)
	}
	if c["iat"] != float64(now.Unix()) {
		t.Errorf("iat = %v, want %d", c["iat"], now.Unix())
	}
	if _, err := v.Verify(tok, now.Add(24*time.Hour+identity.DefaultLeeway)); err == nil {
		t.Error("a minted token outlived its ttl")
	}
}

func TestMintHS256NoAccountAge(t *testing.T) {
	tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), "bob", identity.NoAccountAge, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(jwtClaimsJSON(t, tok), "acct_created") {
		t.Error("NoAccountAge still wrote acct_created")
	}
	v, _ := identity.NewHS256([]byte(identity.DevelopmentSecret))
	s, err := v.Verify(tok, t0)
	if err != nil || !s.AccountCreated.IsZero() {
		t.Errorf("Verify = %+v, %v; want no account creation time", s, err)
	}
	// Zero age is an account created now, not a missing claim.
	tok, _ = identity.MintHS256([]byte(identity.DevelopmentSecret), "bob", 0, t0, time.Hour)
	if s, _ := v.Verify(tok, t0); !s.AccountCreated.Equal(t0) {
		t.Errorf("age 0: AccountCreated = %v, want %v", s.AccountCreated, t0)
	}
}

func jwtClaimsJSON(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, err := jwt.NewParser().DecodeSegment(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMintHS256Errors(t *testing.T) {
	dev := []byte(identity.DevelopmentSecret)
	for name, f := range map[string]func() (string, error){
		"empty secret":    func() (string, error) { return identity.MintHS256(nil, "u", 0, t0, time.Hour) },
		"empty user":      func() (string, error) { return identity.MintHS256(dev, "", 0, t0, time.Hour) },
		"control in user": func() (string, error) { return identity.MintHS256(dev, "a\x1fb", 0, t0, time.Hour) },
		"long user": func() (string, error) {
			return identity.MintHS256(dev, strings.Repeat("u", identity.MaxUserIDLen+1), 0, t0, time.Hour)
		},
		"zero ttl":     func() (string, error) { return identity.MintHS256(dev, "u", 0, t0, 0) },
		"negative ttl": func() (string, error) { return identity.MintHS256(dev, "u", 0, t0, -time.Hour) },
		"before 1970":  func() (string, error) { return identity.MintHS256(dev, "u", 100*365*24*time.Hour, t0, time.Hour) },
	} {
		if tok, err := f(); err == nil {
			t.Errorf("%s: minted %q", name, tok)
		}
	}
}
