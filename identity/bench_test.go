package identity_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/flashsale/flashsale/identity"
	"github.com/golang-jwt/jwt/v5"
)

func benchVerify(b *testing.B, v *identity.Verifier, tok string) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyHS256(b *testing.B) {
	tok := "Bearer " + sign(b, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"acct_created": 1700000000}))
	benchVerify(b, hs256(b), tok)
}

// BenchmarkVerifyHS256Cached is a poller's second and later requests.
func BenchmarkVerifyHS256Cached(b *testing.B) {
	tok := "Bearer " + sign(b, jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"acct_created": 1700000000}))
	benchVerify(b, hs256(b, identity.WithCache(1024)), tok)
}

func BenchmarkVerifyEdDSA(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tok := sign(b, jwt.SigningMethodEdDSA, priv, claims(jwt.MapClaims{"acct_created": 1700000000}))
	benchVerify(b, fromPEMFile(b, "PUBLIC KEY", pkix(b, pub)), tok)
}

func BenchmarkVerifyRS256(b *testing.B) {
	priv := rsaKey()
	tok := sign(b, jwt.SigningMethodRS256, priv, claims(jwt.MapClaims{"acct_created": 1700000000}))
	benchVerify(b, fromPEMFile(b, "PUBLIC KEY", pkix(b, &priv.PublicKey)), tok)
}
