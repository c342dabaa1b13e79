package identity

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// DevelopmentSecret is the well-known HS256 key the server verifies shopper
// tokens with when no --user-jwt-secret is configured, and which
// `flashsale token` signs with. It is published in this source, so anyone can
// mint a token for any user id with it: a server that uses it must log a
// warning, and no real sale may run on it.
const DevelopmentSecret = "flashsale-development-key-not-for-production-use"

// NoAccountAge, given to MintHS256 as the account age, leaves acct_created
// out of the token, as an identity service that does not know the account's
// age would; a sale with a minimum account age then refuses the shopper.
const NoAccountAge time.Duration = -1

// mintClaims are the claims MintHS256 signs.
type mintClaims struct {
	jwt.RegisteredClaims
	AcctCreated *int64 `json:"acct_created,omitempty"`
	// instrumentClaim and instrument, when set (MintInstrument), add the
	// payment instrument's claim.
	instrumentClaim, instrument string
}

// MintHS256 returns an HS256 shopper token for userID signed with secret:
// sub userID, iat now, exp now+ttl and acct_created now−accountAge, in whole
// seconds. A negative accountAge (NoAccountAge) leaves acct_created out;
// MintInstrument adds the payment instrument's claim. It
// is what `flashsale token --user ID [--account-age 720h]` prints, with
// DevelopmentSecret unless the operator gives another.
//
// It returns an error if secret is empty, userID is
// not a valid user id (see ValidUserID), ttl is not positive or the account
// would predate 1970: a token that Verify would refuse is not minted. It is safe for concurrent use.
func MintHS256(secret []byte, userID string, accountAge time.Duration, now time.Time, ttl time.Duration, opts ...MintOption) (string, error) {
	switch {
	case len(secret) == 0:
		return "", errors.New("identity: the HS256 secret is empty")
	case !ValidUserID(userID):
		return "", fmt.Errorf("identity: a user id must be 1 to %d bytes of UTF-8 without control characters", MaxUserIDLen)
	case ttl <= 0:
		return "", errors.New("identity: the token's lifetime must be positive")
	}
	c := mintClaims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   userID,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if accountAge >= 0 {
		created := now.Add(-accountAge).Unix()
		if created < 0 {
			return "", errors.New("identity: the account would have been created before 1970")
		}
		c.AcctCreated = &created
	}
	for _, o := range opts {
		o(&c)
	}
	if c.instrumentClaim != "" {
		if err := checkInstrumentClaim(c.instrumentClaim); err != nil {
			return "", err
		}
		if !flashsale.ValidInstrument(c.instrument) {
			return "", fmt.Errorf("identity: a payment instrument's fingerprint must be 1 to %d visible ASCII characters", flashsale.MaxInstrumentLen)
		}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// MintAudience has the token name audience as its aud, as a server started
// with --user-jwt-audience requires. An empty audience adds nothing.
func MintAudience(audience string) MintOption {
	return func(c *mintClaims) {
		if audience != "" {
			c.Audience = jwt.ClaimStrings{audience}
		}
	}
}

// MintIssuer has the token carry issuer as its iss, as a server started
// with --user-jwt-issuer requires. An empty issuer adds nothing.
func MintIssuer(issuer string) MintOption {
	return func(c *mintClaims) { c.Issuer = issuer }
}
