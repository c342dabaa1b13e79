package flashsale

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"time"
)

// An invite code admits one account ahead of a sale's line. An operator
// issues a batch for a sale; each code is shown once, to the operator, and
// the record keeps only its SHA-256 (InviteHash): a code has 120 random
// bits, so a plain hash is as good as a slow one, and a leaked record gives
// no code away. A shopper who redeems a code binds it to its account;
// another account is then refused it, and the same account redeeming it
// again gets its ticket again.

// MaxInvites is the most codes one request issues (contract: 1 to 10,000).
const MaxInvites = 10_000

// inviteEncoding is base32 without padding, lower case: letters and digits
// a person can read out or type.
var inviteEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewInviteCode returns a new invite code: 120 random bits as 24 lower-case
// letters and digits.
func NewInviteCode() string {
	var b [15]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return inviteEncoding.EncodeToString(b[:])
}

// InviteHash is what the record keeps of a code: the hex SHA-256 of the
// code as the shopper sent it.
func InviteHash(code string) string {
	h := sha256.Sum256([]byte(code))
	return hex.EncodeToString(h[:])
}

// ValidInviteCode reports whether code could be a code at all (printable
// ASCII, at most 64 bytes): anything else is refused without a lookup.
func ValidInviteCode(code string) bool {
	if code == "" || len(code) > 64 {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] <= ' ' || code[i] > '~' {
			return false
		}
	}
	return true
}

// Invite is a redeemed code as the record keeps it.
type Invite struct {
	SaleID     string
	CodeHash   string
	RedeemedBy string
	RedeemedAt time.Time
}

// InviteCounts counts a sale's codes: issued, redeemed, and won (redeemed
// by an account that holds or bought units of the sale: a pending or
// confirmed reservation).
type InviteCounts struct {
	Issued   int64
	Redeemed int64
	Won      int64
}

// InviteStore keeps a sale's invite codes in the record.
type InviteStore interface {
	// IssueInvites writes hashes as the sale's unredeemed codes, with one
	// invite.issued event naming by and the count, in one transaction.
	// Errors: ErrNotFound (no such sale), ErrDuplicate (a hash exists;
	// nothing is written).
	IssueInvites(ctx context.Context, sale *Sale, hashes []string, by string, at time.Time) error

	// RedeemInvite binds the code with the hash to userID with one
	// conditional UPDATE (only an unbound code, or one bound to userID,
	// is taken), and writes its invite.redeemed event in the same
	// transaction the first time. It returns the invite as bound. An
	// account that already redeemed another code of the sale gets that
	// one back, and the code sent stays unbound. Errors: ErrInviteInvalid
	// (no such code for the sale), ErrInviteUsed (bound to another
	// account).
	RedeemInvite(ctx context.Context, sale *Sale, hash, userID string, at time.Time) (*Invite, error)

	// InviteCounts counts the sale's codes.
	InviteCounts(ctx context.Context, saleID string) (InviteCounts, error)
}

// Errors of redeeming a code.
var (
	// ErrInviteInvalid: no such code, or one issued for another sale.
	ErrInviteInvalid = &Error{Code: CodeInviteInvalid, Message: "This invite code is not valid for this sale."}
	// ErrInviteUsed: another account redeemed the code.
	ErrInviteUsed = &Error{Code: CodeInviteUsed, Message: "This invite code was already redeemed by another account."}
)
