package token_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/token"
)

// testKey returns a key with a fixed secret, so that tokens in the checked-in
// fuzz corpus stay valid.
func testKey(id string) token.Key {
	return token.Key{ID: id, Secret: bytes.Repeat([]byte(id+"-secret."), 8)[:token.MinSecretLen]}
}

func TestParseKeysRoundTrip(t *testing.T) {
	k1, err := token.GenerateKey("2026-08")
	if err != nil {
		t.Fatal(err)
	}
	k2 := testKey("old_1")
	spec := token.FormatKeys([]token.Key{k1, k2})
	got, err := token.ParseKeys(spec)
	if err != nil {
		t.Fatalf("ParseKeys(FormatKeys): %v", err)
	}
	if len(got) != 2 || got[0].ID != k1.ID || !bytes.Equal(got[0].Secret, k1.Secret) ||
		got[1].ID != k2.ID || !bytes.Equal(got[1].Secret, k2.Secret) {
		t.Fatalf("round trip lost keys: %v", got)
	}
	if len(k1.Secret) != token.MinSecretLen {
		t.Errorf("GenerateKey secret is %d bytes, want %d", len(k1.Secret), token.MinSecretLen)
	}
}

func TestParseKeysLenient(t *testing.T) {
	k := testKey("k1")
	enc := strings.TrimPrefix(token.FormatKeys([]token.Key{k}), "k1:")
	// Padding and surrounding spaces, as an environment variable may have.
	spec := "  k1:" + enc + "= , k2:" + strings.TrimPrefix(token.FormatKeys([]token.Key{testKey("k2")}), "k2:") + "\n"
	got, err := token.ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got[0].Secret, k.Secret) {
		t.Fatalf("got %v", got)
	}
}

func TestParseKeysErrors(t *testing.T) {
	secret := token.FormatKeys([]token.Key{testKey("k1")})[len("k1:"):]
	short := token.FormatKeys([]token.Key{{ID: "k", Secret: []byte("0123456789abcdef0123456789abcde")}})[len("k:"):]
	for name, spec := range map[string]string{
		"empty":        "",
		"spaces":       "   ",
		"no colon":     "k1" + secret,
		"empty id":     ":" + secret,
		"empty secret": "k1:",
		"bad id":       "k 1:" + secret,
		"long id":      strings.Repeat("k", token.MaxKeyIDLen+1) + ":" + secret,
		"bad base64":   "k1:" + secret[:10] + "!" + secret[11:],
		"std base64":   "k1:" + strings.ReplaceAll(secret, "-", "+") + "+/",
		"short secret": "k1:" + short,
		"duplicate":    "k1:" + secret + ",k1:" + secret,
		"empty entry":  "k1:" + secret + ",",
	} {
		t.Run(name, func(t *testing.T) {
			keys, err := token.ParseKeys(spec)
			if err == nil {
				t.Fatalf("ParseKeys(%q) = %v, want an error", spec, keys)
			}
			if len(secret) > 0 && strings.Contains(err.Error(), secret[:12]) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

func TestGenerateKey(t *testing.T) {
	a, err := token.GenerateKey("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := token.GenerateKey("b")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Secret, b.Secret) {
		t.Error("two generated keys share a secret")
	}
	if _, err := token.GenerateKey(""); err == nil {
		t.Error("GenerateKey(\"\") succeeded")
	}
	if _, err := token.GenerateKey("a,b"); err == nil {
		t.Error("GenerateKey accepted an id with a comma, which ParseKeys could not read back")
	}
}

func TestKeyDoesNotPrintItsSecret(t *testing.T) {
	k := testKey("k1")
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, k)
		if strings.Contains(out, string(k.Secret[:8])) || strings.Contains(out, fmt.Sprint(k.Secret[:4])[1:8]) {
			t.Errorf("Sprintf(%s, key) = %q shows the secret", verb, out)
		}
		if !strings.Contains(out, "k1") {
			t.Errorf("Sprintf(%s, key) = %q does not name the key", verb, out)
		}
	}
}

func TestNewKeyringErrors(t *testing.T) {
	if _, err := token.NewKeyring(); err == nil {
		t.Error("NewKeyring() with no keys succeeded")
	}
	if _, err := token.NewKeyring(token.Key{ID: "k", Secret: make([]byte, token.MinSecretLen-1)}); err == nil {
		t.Error("NewKeyring accepted a short secret")
	}
	if _, err := token.NewKeyring(testKey("k1"), testKey("k1")); err == nil {
		t.Error("NewKeyring accepted a duplicate id")
	}
	if _, err := token.NewKeyring(token.Key{ID: "bad:id", Secret: testKey("x").Secret}); err == nil {
		t.Error("NewKeyring accepted an id ParseKeys could not read")
	}
}

func TestKeyringCopiesSecrets(t *testing.T) {
	k := testKey("k1")
	k.Secret = append([]byte(nil), k.Secret...)
	ring, err := token.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	tok := ring.SignTicket(token.Ticket{UserID: "u", SaleID: "s"})
	k.Secret[0] ^= 1 // the caller reuses its buffer
	if _, err := ring.VerifyTicket(tok, "s"); err != nil {
		t.Fatalf("the ring changed with the caller's slice: %v", err)
	}
	if got := ring.SigningKeyID(); got != "k1" {
		t.Errorf("SigningKeyID = %q", got)
	}
}
