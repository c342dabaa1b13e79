package token_test

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/token"
	"github.com/golang-jwt/jwt/v5"
)

func BenchmarkVerifyTicket(b *testing.B) {
	ring := newRing(b, testKey("k2"), testKey("k1"))
	s := ring.SignTicket(sampleTicket())
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.VerifyTicket(s, sampleSale); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyTicketParallel is an edge server's view: every core
// verifying status polls at once, sharing one ring.
func BenchmarkVerifyTicketParallel(b *testing.B) {
	ring := newRing(b, testKey("k2"), testKey("k1"))
	s := ring.SignTicket(sampleTicket())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ring.VerifyTicket(s, sampleSale); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkVerifyTicketForged(b *testing.B) {
	ring := newRing(b, testKey("k1"))
	s := ring.SignTicket(sampleTicket())
	s = s[:len(s)-2] + "AA"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.VerifyTicket(s, sampleSale); err != token.ErrInvalid {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyAdmission(b *testing.B) {
	ring := newRing(b, testKey("k1"))
	s := ring.SignAdmission(sampleAdmission())
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.VerifyAdmission(s, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignTicket(b *testing.B) {
	ring := newRing(b, testKey("k1"))
	tk := sampleTicket()
	b.ReportAllocs()
	for b.Loop() {
		_ = ring.SignTicket(tk)
	}
}

// ticketClaims is the ticket as a JWT would carry it.
type ticketClaims struct {
	jwt.RegisteredClaims
	Sale     string `json:"sale"`
	Arrival  int64  `json:"arr"`
	Position int64  `json:"pos"`
}

// BenchmarkVerifyJWTHS256 verifies the same ticket as an HS256 JWT with
// golang-jwt, the format this package chose not to use, for comparison.
func BenchmarkVerifyJWTHS256(b *testing.B) {
	tk := sampleTicket()
	secret := testKey("k1").Secret
	claims := ticketClaims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: tk.UserID},
		Sale:             tk.SaleID,
		Arrival:          tk.Arrival.UnixMilli(),
		Position:         tk.Position,
	}
	jt := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	jt.Header["kid"] = "k1"
	s, err := jt.SignedString(secret)
	if err != nil {
		b.Fatal(err)
	}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithTimeFunc(func() time.Time { return t0 }))
	keyFunc := func(t *jwt.Token) (any, error) {
		if t.Header["kid"] != "k1" {
			return nil, token.ErrInvalid
		}
		return secret, nil
	}
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		var c ticketClaims
		if _, err := parser.ParseWithClaims(s, &c, keyFunc); err != nil {
			b.Fatal(err)
		}
	}
}
