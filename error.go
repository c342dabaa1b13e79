package flashsale

import (
	"errors"
	"fmt"
	"time"
)

// Code is an error code of the public contract. Clients decide on the code,
// never on the message. The HTTP status of each code is decided in one table
// in package httpapi.
type Code string

// Error codes of the public contract (shared/contract.md), and the few this
// project adds to it.
const (
	CodeBadRequest           Code = "bad_request"
	CodeTooLarge             Code = "too_large"
	CodeUnauthenticated      Code = "unauthenticated"
	CodeInvalidToken         Code = "invalid_token"
	CodeAdmissionRequired    Code = "admission_required"
	CodeAdmissionInvalid     Code = "admission_invalid"
	CodeAdmissionExpired     Code = "admission_expired"
	CodeAdmissionUsed        Code = "admission_used"
	CodeNotEligible          Code = "not_eligible"
	CodeRateLimited          Code = "rate_limited"
	CodeSalePaused           Code = "sale_paused"
	CodeSoldOut              Code = "sold_out"
	CodeLimitReached         Code = "limit_reached"
	CodeIdempotencyKeyReused Code = "idempotency_key_reused"
	CodeNotFound             Code = "not_found"
	CodeReservationExpired   Code = "reservation_expired"
	CodeReservationCancelled Code = "reservation_cancelled"
	CodeVersionConflict      Code = "version_conflict"
	CodePreconditionRequired Code = "precondition_required"
	CodeNotPaused            Code = "not_paused"
	CodeChallengeFailed      Code = "challenge_failed"
	CodeRegistrationClosed   Code = "registration_closed"
	CodeClosed               Code = "closed"
	CodeNotSelected          Code = "not_selected"
	CodeInviteInvalid        Code = "invite_invalid"
	CodeInviteUsed           Code = "invite_used"

	// Added by this project; the contract allows additions.

	// CodeForbidden: an operator route refused to a request that a web
	// page could have sent, or from off this host, on a server with no
	// admin token.
	CodeForbidden Code = "forbidden"
	// CodeSaleExists: another sale for the SKU is still scheduled or open.
	CodeSaleExists Code = "sale_exists"
	// CodeNotOpen: the sale has not opened yet.
	CodeNotOpen Code = "not_open"
	// CodeReservationConfirmed: the reservation became an order, so it can
	// no longer be cancelled by the shopper.
	CodeReservationConfirmed Code = "reservation_confirmed"
	// CodeMethodNotAllowed: the route exists but not for this method.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeUnavailable: a store behind the request did not answer in time;
	// the request may be repeated (with the same Idempotency-Key).
	CodeUnavailable Code = "unavailable"
	// CodeOverloaded: the purchase path had no slot free for the request
	// (in total, or for its sale), or the waiting room none for its sale
	// in time, so it was shed before it did anything; repeat it after
	// Retry-After (a purchase with the same Idempotency-Key).
	CodeOverloaded Code = "overloaded"
	// CodeNotRegistered: a lottery sale's ticket asked for before
	// registering; register during the window first.
	CodeNotRegistered Code = "not_registered"
	// CodeUnsupportedMediaType: an operator request, on a server with no
	// admin token, whose body is not Content-Type: application/json.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeInternal: a bug. The detail is in the server's log, never in the
	// response.
	CodeInternal Code = "internal"
)

// Error is an error a client may see: a contract code and a message written
// for a person. The wrapped Err is for the log only and never reaches a
// response.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header: the
	// client is asked to come back.
	RetryAfter time.Duration
	// Err is the underlying cause, for the log.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the code and message that keeps err as its
// cause for the log.
func Wrap(err error, code Code, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal if there is none. It returns "" for a nil error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the message a person may read for err: the message of
// the first *Error in its chain, or a generic one that reveals nothing.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "An internal error occurred; it has been logged."
}

// Errors the stores return, wrapped or as they are. They carry contract
// codes so that the HTTP layer can answer them without knowing the store.
var (
	// ErrNotFound: no such sale, reservation or order.
	ErrNotFound = &Error{Code: CodeNotFound, Message: "Not found."}
	// ErrVersionConflict: the row moved since it was read (zero rows
	// affected by a conditional UPDATE on id and version).
	ErrVersionConflict = &Error{Code: CodeVersionConflict, Message: "It changed since you read it; read it again."}
	// ErrSaleExists: another sale for the SKU is scheduled or open.
	ErrSaleExists = &Error{Code: CodeSaleExists, Message: "Another sale for this SKU is scheduled or open."}
	// ErrStaleEpoch: the gate was rebuilt after this hold was taken, so the
	// record refuses it. The hold's units were already accounted for by the
	// rebuild.
	ErrStaleEpoch = errors.New("flashsale: gate epoch is stale")
	// ErrNotLoaded: the gate has no counter for the sale (never loaded, or
	// lost with its store). The sale must fail closed until it is rebuilt
	// from the record.
	ErrNotLoaded = errors.New("flashsale: the gate has no counter for this sale")
	// ErrSealed: the draw has closed a sale's entrants; no one can enter
	// the pre-queue or register any more.
	ErrSealed = errors.New("flashsale: the draw has closed this sale's entrants")
	// ErrDuplicate: a reservation with this id, idempotency key, live user
	// or live payment instrument already exists.
	ErrDuplicate = errors.New("flashsale: duplicate reservation")
)

// CodeInvalidState: the thing exists but its state forbids the action (an
// order that is not confirmed cannot ship).
const CodeInvalidState Code = "invalid_state"
