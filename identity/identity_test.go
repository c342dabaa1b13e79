package identity_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/identity"
	"github.com/golang-jwt/jwt/v5"
)

var (
	t0     = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	secret = []byte("test-secret-of-thirty-two-bytes!")
)

// rsaKey is generated once: a 2048-bit key takes a while.
var rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// claims builds a claim set: sub, exp an hour after t0, iat t0, and the
// changes given, where a nil value removes the claim.
func claims(changes jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "user-1", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func sign(t testing.TB, m jwt.SigningMethod, key any, c jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hs256(t testing.TB, opts ...identity.Option) *identity.Verifier {
	t.Helper()
	v, err := identity.NewHS256(secret, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// writePEM writes a public key to a file as an operator would, and reads it
// back into a Verifier.
func fromPEMFile(t testing.TB, blockType string, der []byte) *identity.Verifier {
	t.Helper()
	path := filepath.Join(t.TempDir(), "user-jwt.pub")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewPublicKeyPEM(b)
	if err != nil {
		t.Fatalf("NewPublicKeyPEM(%s): %v", blockType, err)
	}
	return v
}

func pkix(t testing.TB, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// wantRefused checks that err is ErrUnauthenticated and that its reason
// mentions want.
func wantRefused(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("err = %v, want ErrUnauthenticated", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want a reason mentioning %q", err, want)
	}
}

func TestHS256(t *testing.T) {
	v := hs256(t)
	if v.Algorithm() != "HS256" {
		t.Errorf("Algorithm = %q", v.Algorithm())
	}
	tok := sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"acct_created": 1700000000}))
	s, err := v.Verify("Bearer "+tok, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Shopper{
		UserID:         "user-1",
		AccountCreated: time.Unix(1700000000, 0).UTC(),
		Expires:        t0.Add(time.Hour),
	}
	if s != want {
		t.Errorf("Verify = %+v, want %+v", s, want)
	}
}

func TestEdDSA(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v := fromPEMFile(t, "PUBLIC KEY", pkix(t, pub))
	if v.Algorithm() != "EdDSA" {
		t.Errorf("Algorithm = %q", v.Algorithm())
	}
	s, err := v.Verify("Bearer "+sign(t, jwt.SigningMethodEdDSA, priv, claims(nil)), t0)
	if err != nil || s.UserID != "user-1" || !s.AccountCreated.IsZero() {
		t.Fatalf("Verify = %+v, %v", s, err)
	}

	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	_, err = v.Verify(sign(t, jwt.SigningMethodEdDSA, otherPriv, claims(nil)), t0)
	wantRefused(t, err, "signature")
}

func TestRS256(t *testing.T) {
	priv := rsaKey()
	for name, v := range map[string]*identity.Verifier{
		"PKIX":  fromPEMFile(t, "PUBLIC KEY", pkix(t, &priv.PublicKey)),
		"PKCS1": fromPEMFile(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&priv.PublicKey)),
	} {
		t.Run(name, func(t *testing.T) {
			if v.Algorithm() != "RS256" {
				t.Errorf("Algorithm = %q", v.Algorithm())
			}
			s, err := v.Verify(sign(t, jwt.SigningMethodRS256, priv, claims(nil)), t0)
			if err != nil || s.UserID != "user-1" {
				t.Fatalf("Verify = %+v, %v", s, err)
			}
			// RS384 and PS256 are signed with the same key, but are not
			// the configured algorithm.
			_, err = v.Verify(sign(t, jwt.SigningMethodRS384, priv, claims(nil)), t0)
			wantRefused(t, err, "algorithm")
			_, err = v.Verify(sign(t, jwt.SigningMethodPS256, priv, claims(nil)), t0)
			wantRefused(t, err, "algorithm")
		})
	}
}

func TestWrongSecret(t *testing.T) {
	tok := sign(t, jwt.SigningMethodHS256, []byte("another-secret-of-thirty-two-b!!"), claims(nil))
	_, err := hs256(t).Verify(tok, t0)
	wantRefused(t, err, "signature")
}

func TestAlgNone(t *testing.T) {
	v := hs256(t)
	tok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil))
	_, err := v.Verify(tok, t0)
	wantRefused(t, err, "algorithm")
	// The same, with the signature of a genuine token left on.
	genuine := sign(t, jwt.SigningMethodHS256, secret, claims(nil))
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	_, err = v.Verify(noneHeader+genuine[strings.IndexByte(genuine, '.'):], t0)
	wantRefused(t, err, "")
	// "None" and "NONE" are not algorithms of the verifier either.
	for _, alg := range []string{"None", "NONE", "hs256", ""} {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `","typ":"JWT"}`))
		_, err = v.Verify(h+genuine[strings.IndexByte(genuine, '.'):], t0)
		wantRefused(t, err, "")
	}
}

// TestAlgorithmConfusion: an HS256 token whose HMAC key is the RSA public
// key's PEM, which an attacker can read, must not pass an RS256 verifier,
// nor an RS256 token an HS256 one.
func TestAlgorithmConfusion(t *testing.T) {
	priv := rsaKey()
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix(t, &priv.PublicKey)})
	rs, err := identity.NewPublicKeyPEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{pemBytes, pkix(t, &priv.PublicKey)} {
		_, err = rs.Verify(sign(t, jwt.SigningMethodHS256, key, claims(nil)), t0)
		wantRefused(t, err, "algorithm")
	}

	pub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	ed := fromPEMFile(t, "PUBLIC KEY", pkix(t, pub))
	_, err = ed.Verify(sign(t, jwt.SigningMethodHS256, []byte(pub), claims(nil)), t0)
	wantRefused(t, err, "algorithm")
	_, err = ed.Verify(sign(t, jwt.SigningMethodRS256, priv, claims(nil)), t0)
	wantRefused(t, err, "algorithm")

	hs := hs256(t)
	_, err = hs.Verify(sign(t, jwt.SigningMethodRS256, priv, claims(nil)), t0)
	wantRefused(t, err, "algorithm")
	_, err = hs.Verify(sign(t, jwt.SigningMethodEdDSA, edPriv, claims(nil)), t0)
	wantRefused(t, err, "algorithm")
	// HS384 and HS512 with the right secret are still another algorithm.
	_, err = hs.Verify(sign(t, jwt.SigningMethodHS512, secret, claims(nil)), t0)
	wantRefused(t, err, "algorithm")
}

func TestExpiry(t *testing.T) {
	exp := t0.Add(time.Hour)
	tok := sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"exp": exp.Unix()}))
	for _, cached := range []bool{false, true} {
		var opts []identity.Option
		if cached {
			opts = append(opts, identity.WithCache(16))
		}
		v := hs256(t, opts...)
		// The leeway is 5 s: valid until exp+5s, exclusive.
		for _, tc := range []struct {
			now time.Time
			ok  bool
		}{
			{t0, true},
			{exp, true},
			{exp.Add(identity.DefaultLeeway - time.Nanosecond), true},
			{exp.Add(identity.DefaultLeeway), false},
			{exp.Add(time.Hour), false},
			{t0, true}, // a cache must not remember an expiry as a fact of the token
		} {
			_, err := v.Verify(tok, tc.now)
			if tc.ok && err != nil {
				t.Errorf("cached=%v, at exp%+v: %v, want valid", cached, tc.now.Sub(exp), err)
			}
			if !tc.ok {
				wantRefused(t, err, "expired")
			}
		}
	}

	strict := hs256(t, identity.WithLeeway(0))
	_, err := strict.Verify(tok, exp)
	wantRefused(t, err, "expired")
}

func TestNotBefore(t *testing.T) {
	nbf := t0.Add(time.Minute)
	tok := sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"nbf": nbf.Unix()}))
	for _, v := range []*identity.Verifier{hs256(t), hs256(t, identity.WithCache(16))} {
		if _, err := v.Verify(tok, nbf); err != nil {
			t.Fatalf("at nbf: %v", err)
		}
		_, err := v.Verify(tok, nbf.Add(-identity.DefaultLeeway-time.Nanosecond))
		wantRefused(t, err, "not valid yet")
	}
}

func TestRequiredClaims(t *testing.T) {
	v := hs256(t)
	for _, tc := range []struct {
		name   string
		change jwt.MapClaims
		reason string
	}{
		{"no sub", jwt.MapClaims{"sub": nil}, "sub"},
		{"empty sub", jwt.MapClaims{"sub": ""}, "sub"},
		{"numeric sub", jwt.MapClaims{"sub": 42}, "malformed"},
		{"no exp", jwt.MapClaims{"exp": nil}, "exp"},
		{"text exp", jwt.MapClaims{"exp": "tomorrow"}, "malformed"},
		{"long sub", jwt.MapClaims{"sub": strings.Repeat("u", identity.MaxUserIDLen+1)}, "sub"},
		{"unit separator in sub", jwt.MapClaims{"sub": "user\x1fsale"}, "sub"},
		{"newline in sub", jwt.MapClaims{"sub": "user\n1"}, "sub"},
		{"C1 control in sub", jwt.MapClaims{"sub": "user\u00851"}, "sub"},
		{"NUL in sub", jwt.MapClaims{"sub": "user\x00"}, "sub"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(tc.change)), t0)
			wantRefused(t, err, tc.reason)
		})
	}
	long := strings.Repeat("ü", identity.MaxUserIDLen/2)
	if s, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": long})), t0); err != nil || s.UserID != long {
		t.Errorf("a sub of exactly %d bytes: %+v, %v", identity.MaxUserIDLen, s, err)
	}
}

func TestAccountCreated(t *testing.T) {
	v := hs256(t)
	for _, tc := range []struct {
		value any
		want  time.Time
	}{
		{1700000000, time.Unix(1700000000, 0).UTC()},
		{1700000000.5, time.Unix(1700000000, 500_000_000).UTC()},
		{0, time.Unix(0, 0).UTC()},
		{1.7e9, time.Unix(1700000000, 0).UTC()},
	} {
		s, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"acct_created": tc.value})), t0)
		if err != nil || !s.AccountCreated.Equal(tc.want) {
			t.Errorf("acct_created %v: %v, %v; want %v", tc.value, s.AccountCreated, err, tc.want)
		}
	}
	for _, bad := range []any{"1700000000", "yesterday", true, map[string]any{}, []any{1}, -1, 1e300} {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"acct_created": bad})), t0)
		if !errors.Is(err, identity.ErrUnauthenticated) {
			t.Errorf("acct_created %#v: err = %v, want ErrUnauthenticated", bad, err)
		}
	}
	// null is not a number either; MapClaims cannot say null, so spell it.
	tok := signRaw(t, `{"sub":"user-1","exp":`+strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)+`,"acct_created":null}`)
	_, err := v.Verify(tok, t0)
	wantRefused(t, err, "acct_created")
}

// signRaw signs a claims JSON text as it is, with the test secret.
func signRaw(t testing.TB, claimsJSON string) string {
	t.Helper()
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body := base64.RawURLEncoding.EncodeToString([]byte(claimsJSON))
	sig, err := jwt.SigningMethodHS256.Sign(head+"."+body, secret)
	if err != nil {
		t.Fatal(err)
	}
	return head + "." + body + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestBearerHeader(t *testing.T) {
	v := hs256(t)
	tok := sign(t, jwt.SigningMethodHS256, secret, claims(nil))
	for _, h := range []string{tok, "Bearer " + tok, "bearer " + tok, "BEARER " + tok, "Bearer   " + tok + " ", "\tBearer\t" + tok} {
		if _, err := v.Verify(h, t0); err != nil {
			t.Errorf("Verify(%q): %v", h[:min(len(h), 12)], err)
		}
	}
	for _, h := range []string{"", "   ", "Bearer", "Bearer ", "bearer\t"} {
		_, err := v.Verify(h, t0)
		wantRefused(t, err, "no bearer token")
	}
	for _, h := range []string{"Basic " + tok, "Bearer" + tok, "Bearer " + tok + " extra", "Token " + tok, "Bearer Bearer " + tok} {
		_, err := v.Verify(h, t0)
		wantRefused(t, err, "")
	}
	_, err := v.Verify("Bearer "+strings.Repeat("a", identity.MaxTokenLen+1), t0)
	wantRefused(t, err, "malformed")
}

// TestErrorsDoNotEchoTheToken: the reason goes to the log, which must not
// collect tokens or what shoppers put in them.
func TestErrorsDoNotEchoTheToken(t *testing.T) {
	v := hs256(t)
	const marker = "MARKER"
	genuine := sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": marker}))
	for _, tok := range []string{
		sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": marker + "\x1f"})),
		sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": marker, "acct_created": marker})),
		sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": marker, "exp": marker})),
		sign(t, jwt.SigningMethodHS256, []byte(marker+"-another-secret-of-32-bytes"), claims(jwt.MapClaims{"sub": marker})),
		signRaw(t, `{"sub":"`+marker+`","exp":`+marker+`}`),
		genuine[:len(genuine)-3] + marker,
		marker + "." + marker + "." + marker,
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"`+marker+`"}`)) + ".e30.",
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":`+marker+`}`)) + ".e30.",
	} {
		_, err := v.Verify(tok, t0)
		if !errors.Is(err, identity.ErrUnauthenticated) {
			t.Fatalf("err = %v, want ErrUnauthenticated", err)
		}
		if msg := err.Error(); strings.Contains(msg, marker) || strings.Contains(msg, tok[:10]) {
			t.Errorf("error %q quotes the token", msg)
		}
	}
}

func TestNewHS256Secrets(t *testing.T) {
	if _, err := identity.NewHS256(nil); err == nil {
		t.Error("NewHS256 accepted an empty secret")
	}
	if _, err := identity.NewHS256([]byte(identity.DevelopmentSecret)); err != nil {
		t.Errorf("NewHS256(DevelopmentSecret): %v", err)
	}
	if identity.WeakSecret([]byte(identity.DevelopmentSecret)) || identity.WeakSecret(secret) {
		t.Error("a 32-byte secret is called weak")
	}
	// A short secret is the identity service's choice: it verifies, and
	// the server can tell that it should warn.
	short := []byte("secret")
	v, err := identity.NewHS256(short)
	if err != nil {
		t.Fatalf("NewHS256(short secret): %v", err)
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodHS256, short, claims(nil)), t0); err != nil {
		t.Errorf("a token of a short secret: %v", err)
	}
	if !identity.WeakSecret(short) {
		t.Error("WeakSecret(\"secret\") = false")
	}
}

func TestNewHS256CopiesSecret(t *testing.T) {
	s := append([]byte(nil), secret...)
	v, err := identity.NewHS256(s)
	if err != nil {
		t.Fatal(err)
	}
	s[0] ^= 1
	if _, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(nil)), t0); err != nil {
		t.Errorf("the verifier changed with the caller's slice: %v", err)
	}
}

func TestNewPublicKeyPEMErrors(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	smallRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	edPrivDER, err := x509.MarshalPKCS8PrivateKey(edPriv)
	if err != nil {
		t.Fatal(err)
	}
	block := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	for name, in := range map[string][]byte{
		"empty":           nil,
		"not PEM":         []byte("ssh-ed25519 AAAA"),
		"private key":     block("PRIVATE KEY", edPrivDER),
		"RSA private key": block("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(smallRSA)),
		"certificate":     block("CERTIFICATE", []byte{1, 2, 3}),
		"ECDSA":           block("PUBLIC KEY", pkix(t, &ecKey.PublicKey)),
		"RSA 1024":        block("PUBLIC KEY", pkix(t, &smallRSA.PublicKey)),
		"garbage DER":     block("PUBLIC KEY", []byte("garbage")),
		"PKCS1 garbage":   block("RSA PUBLIC KEY", []byte("garbage")),
	} {
		if v, err := identity.NewPublicKeyPEM(in); err == nil {
			t.Errorf("%s: NewPublicKeyPEM accepted it as %s", name, v.Algorithm())
		}
	}
}

func TestZeroVerifierRefuses(t *testing.T) {
	var v identity.Verifier
	_, err := v.Verify(sign(t, jwt.SigningMethodHS256, secret, claims(nil)), t0)
	wantRefused(t, err, "")
}

func TestConcurrentVerify(t *testing.T) {
	v := hs256(t, identity.WithCache(8))
	toks := make([]string, 20)
	for i := range toks {
		toks[i] = sign(t, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": "user-" + strconv.Itoa(i)}))
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := (g + i) % len(toks)
				s, err := v.Verify(toks[n], t0)
				if err != nil || s.UserID != "user-"+strconv.Itoa(n) {
					t.Errorf("Verify = %+v, %v", s, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
