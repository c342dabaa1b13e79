// Package identity verifies the shoppers' JWTs, which the store's identity
// service issues and clients send as "Authorization: Bearer <JWT>", and mints
// such tokens with the development key so that a new user can try the routes
// by hand.
//
// A Verifier accepts exactly one algorithm, the one its key is for: HS256
// with a shared secret, or EdDSA or RS256 with a public key from a PEM file.
// A token must carry sub (the user id) and exp; iat, acct_created (the
// account's creation, in Unix seconds) and pmf (the fingerprint of the
// shopper's payment instrument, as the store vouches for it; the claim's
// name is configurable) are optional. Where the server is
// configured with an audience or an issuer, the token's aud and iss must
// name them (WithAudience, WithIssuer), so that a token the identity
// service issued for another of the shop's services is refused here; and
// no token lives longer than the maximum lifetime (WithMaxLifetime), so
// that a token that leaked is of use for a bounded time. Every rejection
// is ErrUnauthenticated; the HTTP layer answers it with the contract's
// unauthenticated code.
//
// Overselling is neither prevented nor caused here; the gate (packages
// memory and redis) counts the stock.
package identity

import (
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// Limits on what a token may carry.
const (
	// MaxUserIDLen is the longest sub accepted, in bytes. User ids travel
	// in waiting-room tokens and gate keys, so they are kept short.
	MaxUserIDLen = 200
	// MaxTokenLen is the longest token accepted; longer ones are refused
	// before any decoding.
	MaxTokenLen = 8 << 10
	// DefaultLeeway is how far exp (and nbf) may be off, for the clock skew
	// between the identity service and this server.
	DefaultLeeway = 5 * time.Second
	// MinHS256SecretLen is the shortest HS256 secret that is not weak: 256
	// bits, as RFC 7518 requires. See WeakSecret.
	MinHS256SecretLen = 32
	// MinRSABits is the smallest RSA modulus accepted.
	MinRSABits = 2048
	// DefaultMaxLifetime is the longest a token may live, exp - iat,
	// unless WithMaxLifetime says otherwise: a day, so that a token copied
	// from a shopper's device (a log, a shared screen) is of no use to
	// another for longer than that.
	DefaultMaxLifetime = 24 * time.Hour
)

// ErrUnauthenticated is the error Verify returns for every token it
// refuses. The error returned wraps it with a short reason for the log (see
// errors.Is); the reason never quotes the token or its claims.
var ErrUnauthenticated = errors.New("identity: unauthenticated")

// reason is a rejection of a token: ErrUnauthenticated with a fixed text for
// the log. The values are made once, so a rejection allocates nothing.
type reason string

func (r reason) Error() string        { return "identity: unauthenticated: " + string(r) }
func (r reason) Is(target error) bool { return target == ErrUnauthenticated }

const (
	errNoToken     reason = "no bearer token"
	errMalformed   reason = "malformed token"
	errSignature   reason = "bad signature or algorithm"
	errExpired     reason = "token expired"
	errNotYetValid reason = "token not valid yet"
	errNoExp       reason = "token has no exp claim"
	errNoSub       reason = "token has no sub claim"
	errBadSub      reason = "sub is too long or has control characters"
	errBadAcct     reason = "acct_created is not a number of Unix seconds"
	errAudience    reason = "aud does not name this service"
	errIssuer      reason = "iss is not the configured issuer"
	errIssuedLater reason = "iat is in the future"
	errTooLong     reason = "token lives longer than the maximum lifetime"
	errInvalid     reason = "invalid token"
)

// Shopper is the verified identity of a request.
type Shopper struct {
	// UserID is the token's sub: at most MaxUserIDLen bytes of valid UTF-8
	// without control characters.
	UserID string
	// AccountCreated is the token's acct_created in UTC, or the zero time if
	// the token has none; a sale with a minimum account age refuses a
	// shopper without one.
	AccountCreated time.Time
	// Expires is the token's exp in UTC.
	Expires time.Time
	// Instrument is the fingerprint of the shopper's payment instrument as
	// the identity service vouches for it (the claim WithInstrumentClaim
	// names, "pmf" by default), or "" when the token carries none. The
	// purchase limits per instrument count it, never a value the client
	// sends of its own accord.
	Instrument string
}

// Verifier verifies shopper tokens with one key and algorithm. It is
// immutable (its cache aside, which is locked) and safe for concurrent use
// by multiple goroutines. The zero Verifier refuses every token; make one
// with NewHS256 or NewPublicKeyPEM.
type Verifier struct {
	alg     string
	methods []string // []string{alg}, for jwt.WithValidMethods
	key     any
	leeway  time.Duration
	// audience and issuer, when not empty, must be the token's aud (one
	// of them) and iss.
	audience, issuer string
	maxLifetime      time.Duration
	cache            *cache // nil: no cache
	// instrumentClaim names the payment instrument's claim; "" is
	// DefaultInstrumentClaim.
	instrumentClaim string
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithLeeway sets how far exp and nbf may be off (DefaultLeeway unless
// set). A negative leeway is taken as zero.
func WithLeeway(d time.Duration) Option {
	return func(v *Verifier) { v.leeway = max(d, 0) }
}

// WithAudience requires every token's aud to name audience (aud may be a
// list; one of its values must be audience). A token without aud is
// refused. An empty audience checks nothing, the default.
func WithAudience(audience string) Option {
	return func(v *Verifier) { v.audience = audience }
}

// WithIssuer requires every token's iss to be issuer. A token without iss
// is refused. An empty issuer checks nothing, the default.
func WithIssuer(issuer string) Option {
	return func(v *Verifier) { v.issuer = issuer }
}

// WithMaxLifetime refuses a token whose exp - iat is longer than d
// (DefaultMaxLifetime unless set; d <= 0 keeps the default). A token
// without iat does not say how long it was issued for, so it is judged
// by what is left of it: it is refused while its exp is more than d (plus
// the leeway) away, as no token issued for at most d can be. A token with
// an iat in the future (beyond the leeway) is refused too, so that a late
// iat cannot stretch a token's real life.
func WithMaxLifetime(d time.Duration) Option {
	return func(v *Verifier) {
		if d > 0 {
			v.maxLifetime = d
		}
	}
}

// WithCache keeps up to about entries verified tokens (at least 2), so that a
// shopper polling with the same token every second is verified once. An
// entry answers only until its token's exp, as a fresh verification would.
// Only tokens that verified are kept, so forged ones cannot fill it; it is
// bounded, and its oldest half is dropped when it fills. entries <= 0 means
// no cache, the default.
func WithCache(entries int) Option {
	return func(v *Verifier) {
		if entries > 0 {
			v.cache = newCache(entries)
		} else {
			v.cache = nil
		}
	}
}

// NewHS256 returns a Verifier of HS256 tokens signed with secret, which it
// copies. It returns an error only for an empty secret. A secret shorter
// than MinHS256SecretLen is accepted, because the identity service that
// signs the tokens chose it, but it is weak: the server should log a
// warning (see WeakSecret).
func NewHS256(secret []byte, opts ...Option) (*Verifier, error) {
	if len(secret) == 0 {
		return nil, errors.New("identity: the HS256 secret is empty")
	}
	return newVerifier(jwt.SigningMethodHS256.Alg(), append([]byte(nil), secret...), opts)
}

// NewPublicKeyPEM returns a Verifier of tokens signed with the private half
// of the public key in pemBytes: an Ed25519 key verifies EdDSA tokens, an
// RSA key of at least MinRSABits verifies RS256 tokens. The key is the first
// PEM block, of type "PUBLIC KEY" (PKIX) or "RSA PUBLIC KEY" (PKCS #1). It
// returns an error for anything else, including a private key, which does
// not belong on this server.
func NewPublicKeyPEM(pemBytes []byte, opts ...Option) (*Verifier, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("identity: no PEM block in the public key file")
	}
	var pub any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		if strings.Contains(block.Type, "PRIVATE KEY") {
			return nil, fmt.Errorf("identity: the key file holds a %s; give the server the public key only", block.Type)
		}
		return nil, fmt.Errorf("identity: the key file holds a %q PEM block, want PUBLIC KEY or RSA PUBLIC KEY", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: parse %s: %w", block.Type, err)
	}
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return newVerifier(jwt.SigningMethodEdDSA.Alg(), k, opts)
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return nil, fmt.Errorf("identity: the RSA key has %d bits, want at least %d", k.N.BitLen(), MinRSABits)
		}
		return newVerifier(jwt.SigningMethodRS256.Alg(), k, opts)
	default:
		return nil, fmt.Errorf("identity: unsupported public key type %T; want Ed25519 or RSA", pub)
	}
}

// WeakSecret reports whether an HS256 secret is shorter than
// MinHS256SecretLen, short enough that tokens could be forged by guessing
// it.
func WeakSecret(secret []byte) bool { return len(secret) < MinHS256SecretLen }

func newVerifier(alg string, key any, opts []Option) (*Verifier, error) {
	v := &Verifier{alg: alg, methods: []string{alg}, key: key, leeway: DefaultLeeway, maxLifetime: DefaultMaxLifetime}
	for _, o := range opts {
		o(v)
	}
	if err := checkInstrumentClaim(v.InstrumentClaim()); err != nil {
		return nil, err
	}
	return v, nil
}

// Algorithm returns the one JWT algorithm v accepts: "HS256", "EdDSA" or
// "RS256".
func (v *Verifier) Algorithm() string { return v.alg }

// claims are the claims a shopper token may carry. acct_created is kept raw
// so that a value that is not a JSON number (a string, null) is refused
// rather than coerced.
type claims struct {
	jwt.RegisteredClaims
	AcctCreated json.RawMessage `json:"acct_created"`
	PMF         json.RawMessage `json:"pmf"`
	// instrumentClaim names the instrument's claim (set before decoding);
	// instrument is its raw value (set by UnmarshalJSON).
	instrumentClaim string
	instrument      json.RawMessage
}

// Verify returns the shopper of a token that is valid at now. authorization
// is an Authorization header value ("Bearer <JWT>", the scheme in any case)
// or the bare token.
//
// The token must be signed with v's algorithm and key (so "none" and tokens
// of another algorithm fail); carry an exp that, plus the leeway, is after
// now, and a sub of at most MaxUserIDLen bytes without control characters;
// be past its nbf, if it has one, less the leeway; have an iat, if it has
// one, no later than now plus the leeway; live no longer than the maximum
// lifetime (WithMaxLifetime); name v's audience and issuer, where v has
// them; if it carries acct_created, have a number there; and if it carries
// the instrument claim, a fingerprint there (flashsale.ValidInstrument), or
// null or "". Every refusal is an error that wraps ErrUnauthenticated. It
// is safe for concurrent use.
//
// A token found in the cache is checked against now for its exp and nbf
// only: everything else a verification decided stays true as time passes
// (a token without iat only comes nearer its exp).
func (v *Verifier) Verify(authorization string, now time.Time) (Shopper, error) {
	tok := bearerToken(authorization)
	switch {
	case tok == "":
		return Shopper{}, errNoToken
	case len(tok) > MaxTokenLen:
		return Shopper{}, errMalformed
	case v.key == nil:
		return Shopper{}, errInvalid
	}
	if v.cache != nil {
		if e, ok := v.cache.get(tok); ok {
			if err := v.checkTimes(e, now); err != nil {
				v.cache.remove(tok)
				return Shopper{}, err
			}
			return e.shopper, nil
		}
	}

	c := claims{instrumentClaim: v.instrumentClaim}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.leeway),
		jwt.WithTimeFunc(func() time.Time { return now }),
	}
	if v.audience != "" {
		opts = append(opts, jwt.WithAudience(v.audience))
	}
	if v.issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.issuer))
	}
	if _, err := jwt.NewParser(opts...).ParseWithClaims(tok, &c, v.keyFunc); err != nil {
		return Shopper{}, v.rejection(err, &c)
	}
	if err := v.checkLifetime(&c, now); err != nil {
		return Shopper{}, err
	}
	if c.Subject == "" {
		return Shopper{}, errNoSub
	}
	if !ValidUserID(c.Subject) {
		return Shopper{}, errBadSub
	}
	created, ok := unixSeconds(c.AcctCreated)
	if !ok {
		return Shopper{}, errBadAcct
	}
	instrument, ok := instrumentOf(c.instrument)
	if !ok {
		return Shopper{}, errBadInstrument
	}
	s := Shopper{UserID: c.Subject, AccountCreated: created, Expires: c.ExpiresAt.UTC(), Instrument: instrument}
	if v.cache != nil {
		e := entry{shopper: s}
		if c.NotBefore != nil {
			e.notBefore = c.NotBefore.Time
		}
		v.cache.put(tok, e)
	}
	return s, nil
}

// checkTimes repeats, for a cached token, the time checks of
// jwt.Validator, with the same comparisons, so that a cache hit answers as a
// fresh verification would.
func (v *Verifier) checkTimes(e entry, now time.Time) error {
	if !now.Before(e.shopper.Expires.Add(v.leeway)) {
		return errExpired
	}
	if !e.notBefore.IsZero() && now.Before(e.notBefore.Add(-v.leeway)) {
		return errNotYetValid
	}
	return nil
}

// checkLifetime refuses a token that lives longer than v's maximum
// lifetime: exp - iat, or for a token without iat, exp - now less the
// leeway. The parser has checked that exp is there.
func (v *Verifier) checkLifetime(c *claims, now time.Time) error {
	exp := c.ExpiresAt.Time
	if c.IssuedAt != nil {
		if exp.Sub(c.IssuedAt.Time) > v.maxLifetime {
			return errTooLong
		}
		return nil
	}
	if exp.Sub(now)-v.leeway > v.maxLifetime {
		return errTooLong
	}
	return nil
}

func (v *Verifier) keyFunc(*jwt.Token) (any, error) { return v.key, nil }

// rejection maps an error of jwt to the reason for the log, from the
// error and the claims as far as they were decoded. The jwt error itself
// is dropped: some quote parts of the token.
func (v *Verifier) rejection(err error, c *claims) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return errSignature
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// exp is always required; aud and iss where configured.
		switch {
		case c.ExpiresAt == nil:
			return errNoExp
		case v.audience != "" && (len(c.Audience) == 0 || len(c.Audience) == 1 && c.Audience[0] == ""):
			return errAudience
		default:
			return errIssuer
		}
	case errors.Is(err, jwt.ErrTokenExpired):
		return errExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errNotYetValid
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errIssuedLater
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errIssuer
	default:
		return errInvalid
	}
}

// bearerToken returns the token of an Authorization header value: what
// follows the scheme "Bearer" (in any case), or the whole value if it has no
// scheme.
func bearerToken(h string) string {
	h = strings.TrimSpace(h)
	const scheme = "bearer"
	if len(h) >= len(scheme) && strings.EqualFold(h[:len(scheme)], scheme) &&
		(len(h) == len(scheme) || h[len(scheme)] == ' ' || h[len(scheme)] == '\t') {
		return strings.TrimSpace(h[len(scheme):])
	}
	return h
}

// ValidUserID reports whether id may be a shopper's user id: 1 to
// MaxUserIDLen bytes of valid UTF-8 without control characters. The stock
// gate joins user ids with others using \x1f, which this excludes.
func ValidUserID(id string) bool {
	if id == "" || len(id) > MaxUserIDLen || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// maxUnixSeconds is the end of year 9999, beyond which acct_created is not a
// date.
const maxUnixSeconds = 253402300799

// unixSeconds parses acct_created: absent is the zero time; otherwise it
// must be a JSON number (not a string, not null) of seconds between 1970 and
// 9999, fractions allowed.
func unixSeconds(raw json.RawMessage) (time.Time, bool) {
	if len(raw) == 0 {
		return time.Time{}, true
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return time.Time{}, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxUnixSeconds {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}
