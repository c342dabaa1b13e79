package token

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

var strictRawURL = base64.RawURLEncoding.Strict()

// FuzzDecodeB64 holds the verifier's decoder to encoding/base64's strict
// unpadded base64url, which the signer encodes with.
func FuzzDecodeB64(f *testing.F) {
	for _, s := range []string{"", "A", "AA", "AB", "AAA", "AAB", "AAAA", "_-_-", "QQ", "QR", "QUI", "QUJ", "a=", "a\n", "Zm9vYmFy"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var dst [MaxLen]byte
		if len(s) > 4*MaxLen/3 {
			return
		}
		n, ok := decodeB64(dst[:], s)
		want, err := strictRawURL.DecodeString(s)
		// The standard decoder skips '\r' and '\n'; ours, rightly for a
		// token, does not.
		if strings.ContainsAny(s, "\r\n") {
			if ok && (err != nil || !bytes.Equal(dst[:n], want)) {
				t.Fatalf("decodeB64(%q) = %x, encoding/base64: %x, %v", s, dst[:n], want, err)
			}
			return
		}
		if ok != (err == nil) || ok && !bytes.Equal(dst[:n], want) {
			t.Fatalf("decodeB64(%q) = %x, %v; encoding/base64: %x, %v", s, dst[:n], ok, want, err)
		}
	})
}

func TestDecodeB64ShortDestination(t *testing.T) {
	var dst [3]byte
	if _, ok := decodeB64(dst[:2], "AAAA"); ok {
		t.Error("decoded 3 bytes into 2")
	}
	if n, ok := decodeB64(dst[:], "AAAA"); !ok || n != 3 {
		t.Errorf("decodeB64 into an exact buffer = %d, %v", n, ok)
	}
}
