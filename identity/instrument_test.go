package identity_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/identity"
)

// TestInstrumentClaim: the store vouches for the payment instrument in the
// pmf claim; the shopper gets it as Instrument. Absent, null or "" is none;
// anything that is not a fingerprint refuses the token.
func TestInstrumentClaim(t *testing.T) {
	v := hs256(t)
	for _, tc := range []struct {
		value any
		want  string
	}{{"card-7f3a", "card-7f3a"}, {nil, ""}, {"", ""}, {strings.Repeat("x", 128), strings.Repeat("x", 128)}} {
		s, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"pmf": tc.value})), t0)
		if err != nil || s.Instrument != tc.want {
			t.Errorf("pmf %#v: %q, %v; want %q", tc.value, s.Instrument, err, tc.want)
		}
	}
	tok := signRaw(t, `{"sub":"user-1","exp":`+strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)+`,"pmf":null}`)
	if s, err := v.Verify(tok, t0); err != nil || s.Instrument != "" {
		t.Errorf("pmf null: %+v, %v", s, err)
	}
	for _, bad := range []any{"card 1", "card\x00", "card\x1f1", "carte-é", strings.Repeat("x", 129), 42, true, []any{"a"}, map[string]any{}} {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"pmf": bad})), t0)
		wantRefused(t, err, "payment instrument")
	}
}

// TestInstrumentClaimName: a store that calls the claim otherwise says so;
// the default pmf then means nothing; registered claims cannot be named.
func TestInstrumentClaimName(t *testing.T) {
	v := hs256(t, identity.WithInstrumentClaim("https://shop.example/card"))
	if v.InstrumentClaim() != "https://shop.example/card" {
		t.Fatalf("InstrumentClaim() = %q", v.InstrumentClaim())
	}
	s, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"https://shop.example/card": "c-1", "pmf": "other"})), t0)
	if err != nil || s.Instrument != "c-1" {
		t.Errorf("custom claim: %+v, %v", s, err)
	}
	if s, _ := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"pmf": "c-2"})), t0); s.Instrument != "" {
		t.Errorf("pmf under a custom name counted: %+v", s)
	}
	if hs256(t, identity.WithInstrumentClaim("")).InstrumentClaim() != "pmf" {
		t.Error(`WithInstrumentClaim("") is not the default`)
	}
	for _, name := range []string{"sub", "exp", "acct_created", "aud"} {
		if _, err := identity.NewHS256(secret, identity.WithInstrumentClaim(name)); err == nil {
			t.Errorf("instrument claim %q accepted", name)
		}
	}
}

// TestMintInstrument: flashsale token --pmf mints what Verify reads.
func TestMintInstrument(t *testing.T) {
	for _, claim := range []string{"", "card_fp"} {
		tok, err := identity.MintHS256(secret, "ann", time.Hour, t0, time.Hour, identity.MintInstrument(claim, "card-9"))
		if err != nil {
			t.Fatal(err)
		}
		s, err := hs256(t, identity.WithInstrumentClaim(claim)).Verify(tok, t0)
		if err != nil || s.Instrument != "card-9" || s.UserID != "ann" || s.AccountCreated.IsZero() {
			t.Errorf("claim %q: %+v, %v", claim, s, err)
		}
	}
	if tok, err := identity.MintHS256(secret, "ann", time.Hour, t0, time.Hour); err != nil {
		t.Fatal(err)
	} else if s, _ := hs256(t).Verify(tok, t0); s.Instrument != "" {
		t.Errorf("minted without an instrument: %+v", s)
	}
	for _, o := range []identity.MintOption{identity.MintInstrument("", "has space"), identity.MintInstrument("sub", "c")} {
		if _, err := identity.MintHS256(secret, "ann", time.Hour, t0, time.Hour, o); err == nil {
			t.Error("minted a token Verify would refuse")
		}
	}
}
