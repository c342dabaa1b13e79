package token

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// MinSecretLen is the shortest secret a Key may have: 32 bytes, the size of
// the HMAC-SHA256 output, below which the MAC's strength would be the key's.
const MinSecretLen = 32

// MaxKeyIDLen is the longest key id. Key ids travel in every token, so they
// are meant to be short ("k1", "2026-08").
const MaxKeyIDLen = 32

// Key is one HMAC key of a Keyring. ID names it inside every token it signs,
// so that a verifier picks the key without trying them all and a key can be
// retired by leaving it out of the ring. An ID is 1 to MaxKeyIDLen letters,
// digits, '-', '_' or '.'; Secret is at least MinSecretLen bytes.
//
// Key's String and GoString print the ID only, so a Key that reaches a log
// does not leak its secret.
type Key struct {
	ID     string
	Secret []byte
}

// String returns the key's id, never its secret.
func (k Key) String() string { return "token.Key(" + k.ID + ")" }

// GoString returns the key's id, never its secret.
func (k Key) GoString() string { return k.String() }

// validate reports why k cannot be used. Its messages name the key id,
// never the secret.
func (k Key) validate() error {
	if err := validKeyID(k.ID); err != nil {
		return err
	}
	if len(k.Secret) < MinSecretLen {
		return fmt.Errorf("token: key %q: secret is %d bytes, want at least %d", k.ID, len(k.Secret), MinSecretLen)
	}
	return nil
}

func validKeyID(id string) error {
	if id == "" || len(id) > MaxKeyIDLen {
		return fmt.Errorf("token: key id must be 1 to %d characters", MaxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return fmt.Errorf("token: key id %q: only letters, digits, '-', '_' and '.' are allowed", id)
		}
	}
	return nil
}

// GenerateKey returns a new key named id with a random secret of
// MinSecretLen bytes from crypto/rand. It returns an error only if id is not
// a valid key id.
func GenerateKey(id string) (Key, error) {
	if err := validKeyID(id); err != nil {
		return Key{}, err
	}
	secret := make([]byte, MinSecretLen)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails; it crashes the program instead.
	return Key{ID: id, Secret: secret}, nil
}

// ParseKeys parses a flag or environment value of the form
// "kid:secret,kid2:secret2", each secret in base64url (with or without
// padding). The first key is the one a Keyring made from the result signs
// with; the others still verify, which is how keys rotate: add the new key
// in front, and drop the old one once every token it signed has expired.
//
// It returns an error for an empty spec, a malformed entry, an invalid id, a
// secret that does not decode or is shorter than MinSecretLen, or an id given
// twice. Error messages name key ids and positions, never secrets.
func ParseKeys(spec string) ([]Key, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("token: no keys given; want kid:base64url-secret[,kid:base64url-secret...]")
	}
	entries := strings.Split(spec, ",")
	keys := make([]Key, 0, len(entries))
	for i, entry := range entries {
		entry = strings.TrimSpace(entry)
		id, enc, ok := strings.Cut(entry, ":")
		if !ok || id == "" || enc == "" {
			return nil, fmt.Errorf("token: key %d of %d: want kid:base64url-secret", i+1, len(entries))
		}
		if err := validKeyID(id); err != nil {
			return nil, fmt.Errorf("key %d of %d: %w", i+1, len(entries), err)
		}
		secret, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
		if err != nil {
			// The decoder's error quotes an offset, not the input, but
			// say nothing about the secret to be sure.
			return nil, fmt.Errorf("token: key %q: the secret is not valid base64url", id)
		}
		k := Key{ID: id, Secret: secret}
		if err := k.validate(); err != nil {
			return nil, err
		}
		for _, prev := range keys {
			if prev.ID == id {
				return nil, fmt.Errorf("token: key id %q is given twice", id)
			}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// FormatKeys returns keys in the form ParseKeys reads, secrets in base64url
// without padding. The result holds the secrets: treat it as one.
func FormatKeys(keys []Key) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k.ID)
		b.WriteByte(':')
		b.WriteString(base64.RawURLEncoding.EncodeToString(k.Secret))
	}
	return b.String()
}
