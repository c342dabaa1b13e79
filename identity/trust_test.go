package identity_test

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/identity"
)

// TestAudience: with an audience configured, a token must name it in aud
// (a string, or one of a list); a token for another of the shop's
// services, or for none, is refused. Without one, aud is not looked at.
func TestAudience(t *testing.T) {
	v := hs256(t, identity.WithAudience("flashsale"))
	for name, aud := range map[string]any{"string": "flashsale", "in a list": []string{"accounts", "flashsale"}} {
		if _, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"aud": aud})), t0); err != nil {
			t.Errorf("aud as %s: %v", name, err)
		}
	}
	for name, aud := range map[string]any{"another service": "accounts", "a list without it": []string{"accounts", "mail"},
		"none": nil, "a prefix of it": "flash"} {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"aud": aud})), t0)
		wantRefused(t, err, "aud")
		_ = name
	}
	if _, err := hs256(t).Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"aud": "accounts"})), t0); err != nil {
		t.Errorf("no audience configured, aud accounts: %v", err)
	}
}

// TestIssuer: with an issuer configured, iss must be exactly it.
func TestIssuer(t *testing.T) {
	v := hs256(t, identity.WithIssuer("https://id.shop.example"))
	if _, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iss": "https://id.shop.example"})), t0); err != nil {
		t.Errorf("the configured issuer: %v", err)
	}
	for _, iss := range []any{"https://id.other.example", "https://id.shop.example/", nil} {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iss": iss})), t0)
		wantRefused(t, err, "iss")
	}
	if _, err := hs256(t).Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iss": "anyone"})), t0); err != nil {
		t.Errorf("no issuer configured: %v", err)
	}
}

// TestMaxLifetime: exp - iat may be at most the maximum lifetime (a day by
// default); a token without iat is judged by what is left of it; an iat in
// the future cannot stretch a token.
func TestMaxLifetime(t *testing.T) {
	tok := func(iat any, exp time.Time) string {
		return sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"iat": iat, "exp": exp.Unix()}))
	}
	def := hs256(t)
	if _, err := def.Verify(tok(t0.Unix(), t0.Add(identity.DefaultMaxLifetime)), t0); err != nil {
		t.Errorf("a token of exactly a day: %v", err)
	}
	_, err := def.Verify(tok(t0.Unix(), t0.Add(identity.DefaultMaxLifetime+time.Second)), t0)
	wantRefused(t, err, "maximum lifetime")
	// A year-long token is refused on its first day and on its last.
	year := tok(t0.Unix(), t0.Add(365*24*time.Hour))
	for _, at := range []time.Time{t0, t0.Add(364*24*time.Hour + time.Hour)} {
		_, err := def.Verify(year, at)
		wantRefused(t, err, "maximum lifetime")
	}

	hour := hs256(t, identity.WithMaxLifetime(time.Hour))
	if _, err := hour.Verify(tok(t0.Unix(), t0.Add(time.Hour)), t0); err != nil {
		t.Errorf("an hour's token, an hour allowed: %v", err)
	}
	_, err = hour.Verify(tok(t0.Unix(), t0.Add(2*time.Hour)), t0.Add(time.Minute))
	wantRefused(t, err, "maximum lifetime")

	// Without iat: refused while exp is more than the lifetime (and the
	// leeway) away, accepted within it.
	_, err = hour.Verify(tok(nil, t0.Add(2*time.Hour)), t0)
	wantRefused(t, err, "maximum lifetime")
	if _, err := hour.Verify(tok(nil, t0.Add(time.Hour+identity.DefaultLeeway)), t0); err != nil {
		t.Errorf("no iat, exp within the lifetime: %v", err)
	}

	// An iat in the future, beyond the leeway, is refused; within it, not.
	_, err = def.Verify(tok(t0.Add(time.Hour).Unix(), t0.Add(2*time.Hour)), t0)
	wantRefused(t, err, "iat")
	if _, err := def.Verify(tok(t0.Add(identity.DefaultLeeway).Unix(), t0.Add(time.Hour)), t0); err != nil {
		t.Errorf("iat within the leeway: %v", err)
	}
}

// TestCachedTokenKeepsRefusals: a token refused for its audience, issuer
// or lifetime is not cached, and stays refused when asked again.
func TestCachedTokenKeepsRefusals(t *testing.T) {
	v := hs256(t, identity.WithCache(16), identity.WithAudience("flashsale"), identity.WithIssuer("id"),
		identity.WithMaxLifetime(time.Hour))
	good := sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"aud": "flashsale", "iss": "id"}))
	for i := 0; i < 2; i++ {
		if _, err := v.Verify(good, t0); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	for _, c := range []jwt.MapClaims{{"aud": "other", "iss": "id"}, {"aud": "flashsale", "iss": "other"},
		{"aud": "flashsale", "iss": "id", "exp": t0.Add(3 * time.Hour).Unix()}} {
		bad := sign(t, jwt.SigningMethodHS256, secret, claims(c))
		for i := 0; i < 2; i++ {
			if _, err := v.Verify(bad, t0); err == nil {
				t.Fatalf("round %d: %v accepted", i, c)
			}
		}
	}
}

// TestMintForAServer: a token minted with the server's audience and issuer
// (what `flashsale token --user-jwt-audience … --user-jwt-issuer …` and the
// demo's token route do) passes that server's checks; minted without
// them, it is refused there.
func TestMintForAServer(t *testing.T) {
	v := hs256(t, identity.WithAudience("flashsale"), identity.WithIssuer("https://id.shop.example"))
	tok, err := identity.MintHS256(secret, "u1", time.Hour, t0, time.Hour,
		identity.MintAudience("flashsale"), identity.MintIssuer("https://id.shop.example"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tok, t0); err != nil {
		t.Errorf("minted for the server: %v", err)
	}
	plain, err := identity.MintHS256(secret, "u1", time.Hour, t0, time.Hour, identity.MintAudience(""), identity.MintIssuer(""))
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(plain, t0)
	wantRefused(t, err, "aud")
}
