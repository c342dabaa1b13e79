package main

import (
	"fmt"
	"io"
	"time"

	"github.com/flashsale/flashsale/identity"
)

// tokenCmd prints a shopper JWT signed with the development key (or the
// configured --user-jwt-secret), so a new user can try every route by hand.
func tokenCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags(command{name: "token", args: "--user ID [--account-age 720h] [--ttl 24h]",
		about: "Prints a shopper JWT signed with the development key (or --user-jwt-secret), to try the routes by hand."}, stdout)
	user := fs.String("user", "", "the shopper's user id (the JWT's sub; required)")
	age := fs.Duration("account-age", 720*time.Hour, "how old the account is (acct_created = now - age)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	secret := fs.String("user-jwt-secret", "", "HS256 secret the server verifies with (default: the development key)")
	pmf := fs.String("pmf", "", "the payment instrument's fingerprint, as the store vouches for it (the instrument claim; default none)")
	claim := fs.String("instrument-claim", identity.DefaultInstrumentClaim, "the claim the server reads the instrument from (its --instrument-claim)")
	audience := fs.String("user-jwt-audience", "", "the aud the server requires (its --user-jwt-audience; default none)")
	issuer := fs.String("user-jwt-issuer", "", "the iss the server requires (its --user-jwt-issuer; default none)")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	if *user == "" {
		return usageError{"token: --user is required (flashsale token --help)"}
	}
	if *ttl <= 0 {
		return usageError{fmt.Sprintf("token: --ttl %s: must be positive", *ttl)}
	}
	key := []byte(*secret)
	if len(key) == 0 {
		key = []byte(identity.DevelopmentSecret)
	}
	opts := []identity.MintOption{identity.MintAudience(*audience), identity.MintIssuer(*issuer)}
	if *pmf != "" {
		opts = append(opts, identity.MintInstrument(*claim, *pmf))
	}
	tok, err := identity.MintHS256(key, *user, *age, time.Now(), *ttl, opts...)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}
