package identity

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/flashsale/flashsale"
)

// DefaultInstrumentClaim is the claim a shopper token carries its payment
// instrument's fingerprint in, unless WithInstrumentClaim names another:
// "pmf", as the public contract says.
const DefaultInstrumentClaim = "pmf"

// errBadInstrument: the instrument claim is there but is not a
// fingerprint. The identity service vouches for the instrument; a value it
// could not have meant is refused rather than ignored, as acct_created is.
const errBadInstrument reason = "the payment instrument claim is not a fingerprint"

// reservedClaims are the claims an instrument claim may not be named
// after: they mean something else.
var reservedClaims = map[string]bool{"sub": true, "exp": true, "iat": true, "nbf": true, "aud": true,
	"iss": true, "jti": true, "acct_created": true}

// WithInstrumentClaim names the claim that carries the fingerprint of the
// shopper's payment instrument (DefaultInstrumentClaim unless set; "" keeps
// the default). The name must not be one of the registered claims (sub,
// exp, iat, nbf, aud, iss, jti) nor acct_created: NewHS256 and
// NewPublicKeyPEM return an error for it.
func WithInstrumentClaim(name string) Option {
	return func(v *Verifier) {
		if name == "" {
			name = DefaultInstrumentClaim
		}
		v.instrumentClaim = name
	}
}

// checkInstrumentClaim reports why name cannot name the instrument claim.
func checkInstrumentClaim(name string) error {
	if reservedClaims[name] {
		return fmt.Errorf("identity: the instrument claim cannot be %q, a claim that means something else", name)
	}
	return nil
}

// InstrumentClaim returns the name of the claim v reads the payment
// instrument from.
func (v *Verifier) InstrumentClaim() string {
	if v.instrumentClaim == "" {
		return DefaultInstrumentClaim
	}
	return v.instrumentClaim
}

// UnmarshalJSON decodes the claims, and the instrument from the claim
// named c.instrumentClaim: a struct field for the contract's "pmf", read in
// the same pass; a look through every claim for another name.
func (c *claims) UnmarshalJSON(b []byte) error {
	type plain claims // without this method
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	if c.instrumentClaim == "" || c.instrumentClaim == DefaultInstrumentClaim {
		c.instrument = c.PMF
		return nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	c.instrument = all[c.instrumentClaim]
	return nil
}

// instrumentOf parses the instrument claim: absent, null or "" is none; a
// string must be a fingerprint (flashsale.ValidInstrument); anything else
// is refused.
func instrumentOf(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", true
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	if s == "" {
		return "", true
	}
	return s, flashsale.ValidInstrument(s)
}

// MintOption adds to a token MintHS256 mints.
type MintOption func(*mintClaims)

// MintInstrument has the token carry fingerprint as the shopper's payment
// instrument, in the claim named claim (DefaultInstrumentClaim when "").
// MintHS256 returns an error if fingerprint is not a fingerprint
// (flashsale.ValidInstrument) or claim is a reserved name.
func MintInstrument(claim, fingerprint string) MintOption {
	return func(c *mintClaims) {
		if claim == "" {
			claim = DefaultInstrumentClaim
		}
		c.instrumentClaim, c.instrument = claim, fingerprint
	}
}

// MarshalJSON encodes the claims, with the instrument under its claim's
// name.
func (c mintClaims) MarshalJSON() ([]byte, error) {
	type plain mintClaims // without this method
	b, err := json.Marshal(plain(c))
	if err != nil || c.instrumentClaim == "" {
		return b, err
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	all[c.instrumentClaim] = c.instrument
	return json.Marshal(all)
}
