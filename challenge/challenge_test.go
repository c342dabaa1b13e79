package challenge

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale/memory"
)

var now = time.Date(2026, 8, 1, 10, 0, 30, 0, time.UTC)

func issuer() *Issuer {
	return NewIssuer([]byte("a key of thirty-two bytes, more."), memory.NewQueue())
}

func TestSolveAndVerify(t *testing.T) {
	is := issuer()
	ctx := context.Background()
	c := is.Issue("sale_1", "alice", 12, now)
	if c.Algorithm != "sha256" || c.DifficultyBits != 12 || !c.Expires.After(now.Add(59*time.Second)) {
		t.Fatalf("challenge %+v", c)
	}
	if again := is.Issue("sale_1", "alice", 12, now.Add(20*time.Second)); again.Salt != c.Salt {
		t.Fatal("polls within the minute got different salts: the client would start over")
	}
	nonce := Solve(c.Salt, 12)
	if LeadingZeroBits(c.Salt, nonce) < 12 {
		t.Fatalf("Solve's nonce %s has %d zero bits", nonce, LeadingZeroBits(c.Salt, nonce))
	}
	wrong := "1"
	if wrong == nonce {
		wrong = "2"
	}
	for name, try := range map[string]func() error{
		"wrong nonce":     func() error { return is.Verify(ctx, "sale_1", "alice", c.Salt, wrong, now) },
		"another shopper": func() error { return is.Verify(ctx, "sale_1", "mallory", c.Salt, nonce, now) },
		"another sale":    func() error { return is.Verify(ctx, "sale_2", "alice", c.Salt, nonce, now) },
		"forged salt": func() error {
			return is.Verify(ctx, "sale_1", "alice", "v1.9999999999.1.000000000000000000000000", "0", now)
		},
		"easier salt": func() error {
			return is.Verify(ctx, "sale_1", "alice", c.Salt[:len("v1.")+11]+"0"+c.Salt[len("v1.")+13:], nonce, now)
		},
		"expired":     func() error { return is.Verify(ctx, "sale_1", "alice", c.Salt, nonce, c.Expires) },
		"not decimal": func() error { return is.Verify(ctx, "sale_1", "alice", c.Salt, "0x1f", now) },
		"another key's": func() error {
			return NewIssuer([]byte("another key....................."), memory.NewQueue()).Verify(ctx, "sale_1", "alice", c.Salt, nonce, now)
		},
		"an over-long one": func() error { return is.Verify(ctx, "sale_1", "alice", string(make([]byte, 500)), nonce, now) },
	} {
		if err := try(); !errors.Is(err, ErrFailed) {
			t.Errorf("%s: %v, want ErrFailed", name, err)
		}
	}
	// A wrong nonce did not spend the salt; the right one does, once.
	if err := is.Verify(ctx, "sale_1", "alice", c.Salt, nonce, now); err != nil {
		t.Fatalf("the solution after a wrong try: %v", err)
	}
	if err := is.Verify(ctx, "sale_1", "alice", c.Salt, nonce, now); !errors.Is(err, ErrFailed) {
		t.Fatalf("the same salt twice: %v", err)
	}
}

func TestDifficultyAdapts(t *testing.T) {
	p := Policy{}
	day := 24 * time.Hour
	for _, c := range []struct {
		name      string
		created   time.Time
		waiting   int64
		units     int64
		base, out int
	}{
		{"no challenge", now.Add(-400 * day), 1e6, 1, 0, 0},
		{"trusted, calm", now.Add(-400 * day), 5, 10, 16, 14},
		{"ordinary, calm", now.Add(-100 * day), 5, 10, 16, 16},
		{"month-old", now.Add(-20 * day), 5, 10, 16, 18},
		{"new account", now.Add(-time.Hour), 5, 10, 16, 20},
		{"unknown age", time.Time{}, 5, 10, 16, 20},
		{"pressure x100", now.Add(-100 * day), 2000, 10, 16, 18},
		{"new, pressure x1000", now.Add(-time.Hour), 1e7, 10, 16, 22},
		{"new, pressure x1000, low base", now.Add(-time.Hour), 1e7, 10, 12, 19},
		{"capped", now.Add(-time.Hour), 1e7, 1, 24, 22},
		{"floor", now.Add(-400 * day), 0, 10, 1, 1},
	} {
		if got := p.Difficulty(c.base, c.created, c.waiting, c.units, now); got != c.out {
			t.Errorf("%s: %d bits, want %d", c.name, got, c.out)
		}
	}
}

// BenchmarkVerify and BenchmarkSolve give the asymmetry the challenge
// rests on: verifying costs one hash whatever the difficulty; solving costs
// about 2^bits of them.
func BenchmarkVerify(b *testing.B) {
	is := issuer()
	ctx := context.Background()
	for _, bits := range []int{12, 16, 20} {
		c := is.Issue("sale_b", "u", bits, now)
		nonce := Solve(c.Salt, bits)
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				// The check a verify does, without spending the salt.
				if _, _, ok := is.parse("sale_b", "u", c.Salt); !ok || LeadingZeroBits(c.Salt, nonce) < bits {
					b.Fatal("does not verify")
				}
			}
		})
	}
	_ = ctx
}

func BenchmarkSolve(b *testing.B) {
	is := issuer()
	for _, bits := range []int{12, 16, 20} {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c := is.Issue(fmt.Sprintf("sale_%d", i), "u", bits, now)
				Solve(c.Salt, bits)
			}
		})
	}
}
