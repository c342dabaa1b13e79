package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flashsale/flashsale"
)

// Code is an error code of the public contract: a client decides on the
// code, never on the message. It is the root package's type, so the
// constants of either package compare with it.
type Code = flashsale.Code

// Error codes a server may answer. Those of the contract and the project's
// documented additions, by the status they come with.
const (
	// 400, 413, 415: the request's own shape.
	CodeBadRequest           Code = flashsale.CodeBadRequest
	CodeTooLarge             Code = flashsale.CodeTooLarge
	CodeUnsupportedMediaType Code = "unsupported_media_type"

	// 401: who is asking.
	CodeUnauthenticated Code = flashsale.CodeUnauthenticated
	CodeInvalidToken    Code = flashsale.CodeInvalidToken

	// 403: the funnel's checks, and the operator routes off loopback.
	CodeAdmissionRequired Code = flashsale.CodeAdmissionRequired
	CodeAdmissionInvalid  Code = flashsale.CodeAdmissionInvalid
	CodeAdmissionExpired  Code = flashsale.CodeAdmissionExpired
	CodeAdmissionUsed     Code = flashsale.CodeAdmissionUsed
	CodeNotEligible       Code = flashsale.CodeNotEligible
	CodeChallengeFailed   Code = flashsale.CodeChallengeFailed
	CodeInviteInvalid     Code = "invite_invalid"
	CodeForbidden         Code = flashsale.CodeForbidden

	// 404, 405.
	CodeNotFound         Code = flashsale.CodeNotFound
	CodeMethodNotAllowed Code = flashsale.CodeMethodNotAllowed

	// 409: the state of the sale, the reservation or the order forbids it.
	CodeSoldOut              Code = flashsale.CodeSoldOut
	CodeLimitReached         Code = flashsale.CodeLimitReached
	CodeReservationExpired   Code = flashsale.CodeReservationExpired
	CodeReservationCancelled Code = flashsale.CodeReservationCancelled
	CodeReservationConfirmed Code = flashsale.CodeReservationConfirmed
	CodeNotPaused            Code = flashsale.CodeNotPaused
	CodeRegistrationClosed   Code = flashsale.CodeRegistrationClosed
	CodeNotRegistered        Code = flashsale.CodeNotRegistered
	CodeNotAdmitted          Code = "not_admitted"
	CodeClosed               Code = flashsale.CodeClosed
	CodeNotSelected          Code = flashsale.CodeNotSelected
	CodeSaleExists           Code = flashsale.CodeSaleExists
	CodeNotOpen              Code = flashsale.CodeNotOpen
	CodeInvalidState         Code = flashsale.CodeInvalidState
	CodeRebuildRequired      Code = "rebuild_required"
	CodeInviteUsed           Code = "invite_used"

	// 412, 422, 428: conditional and idempotent requests.
	CodeVersionConflict      Code = flashsale.CodeVersionConflict
	CodeIdempotencyKeyReused Code = flashsale.CodeIdempotencyKeyReused
	CodePreconditionRequired Code = flashsale.CodePreconditionRequired

	// 429 and 503: come back after Retry-After.
	CodeRateLimited Code = flashsale.CodeRateLimited
	CodeSalePaused  Code = flashsale.CodeSalePaused
	CodeUnavailable Code = flashsale.CodeUnavailable
	CodeOverloaded  Code = flashsale.CodeOverloaded

	// 500: a bug on the server; the detail is in its log.
	CodeInternal Code = flashsale.CodeInternal
)

// Error is an error answer of the server: its HTTP status, its contract
// code, the message written for a person, and, where the server asks the
// client to come back, how long to wait first.
//
// errors.Is matches an *Error against the sentinel of its code
// (errors.Is(err, client.ErrSoldOut)) and against the root package's
// *flashsale.Error values of the same code (flashsale.ErrVersionConflict).
// An answer that is not in the contract's error shape (a proxy's 502, say)
// has an empty Code and the status's text as its Message.
type Error struct {
	// Status is the HTTP status; zero in the sentinels, which match any.
	Status int
	// Code is the contract's code; decide on it, never on Message.
	Code Code
	// Message is for a person, and may change between versions.
	Message string
	// RetryAfter is the answer's Retry-After, zero when it has none.
	RetryAfter time.Duration
}

// Error returns the code, status and message.
func (e *Error) Error() string {
	code := string(e.Code)
	if code == "" {
		code = "no code"
	}
	if e.Status == 0 {
		return fmt.Sprintf("flashsale: %s: %s", code, e.Message)
	}
	return fmt.Sprintf("flashsale: %s (HTTP %d): %s", code, e.Status, e.Message)
}

// Is reports whether target is an *Error or a *flashsale.Error with e's
// code, and, if target has a status, e's status: the sentinels have none,
// so they match on the code alone.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		return t.Code != "" && t.Code == e.Code && (t.Status == 0 || t.Status == e.Status)
	case *flashsale.Error:
		return t.Code != "" && t.Code == e.Code
	}
	return false
}

// comeBack reports whether the answer asks the client to repeat the
// request later: the server (or a proxy before it) could not serve it now.
// overloaded promises that nothing was done; the others do not.
func (e *Error) comeBack() bool {
	switch e.Code {
	case CodeOverloaded, CodeUnavailable:
		return true
	case "":
		return e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable ||
			e.Status == http.StatusGatewayTimeout
	}
	return false
}

// Sentinel errors, one per code: errors.Is(err, client.ErrSoldOut) is true
// for any *Error answered with sold_out. They are for comparison only;
// do not change them.
var (
	ErrBadRequest           = &Error{Code: CodeBadRequest, Message: "the request is malformed"}
	ErrTooLarge             = &Error{Code: CodeTooLarge, Message: "the request body is too large"}
	ErrUnsupportedMediaType = &Error{Code: CodeUnsupportedMediaType, Message: "the request body is not JSON"}
	ErrUnauthenticated      = &Error{Code: CodeUnauthenticated, Message: "no or an invalid bearer token"}
	ErrInvalidToken         = &Error{Code: CodeInvalidToken, Message: "the waiting-room ticket is not valid"}
	ErrAdmissionRequired    = &Error{Code: CodeAdmissionRequired, Message: "no admission token"}
	ErrAdmissionInvalid     = &Error{Code: CodeAdmissionInvalid, Message: "the admission token is not valid"}
	ErrAdmissionExpired     = &Error{Code: CodeAdmissionExpired, Message: "the admission token has expired"}
	ErrAdmissionUsed        = &Error{Code: CodeAdmissionUsed, Message: "the admission token was already used"}
	ErrNotEligible          = &Error{Code: CodeNotEligible, Message: "the account may not buy in this sale"}
	ErrChallengeFailed      = &Error{Code: CodeChallengeFailed, Message: "the proof of work was not accepted"}
	ErrInviteInvalid        = &Error{Code: CodeInviteInvalid, Message: "the invite code is not valid for this sale"}
	ErrForbidden            = &Error{Code: CodeForbidden, Message: "the operator routes refused the request"}
	ErrNotFound             = &Error{Code: CodeNotFound, Message: "not found"}
	ErrMethodNotAllowed     = &Error{Code: CodeMethodNotAllowed, Message: "the route does not take this method"}
	ErrSoldOut              = &Error{Code: CodeSoldOut, Message: "sold out"}
	ErrLimitReached         = &Error{Code: CodeLimitReached, Message: "the per-user limit is reached"}
	ErrReservationExpired   = &Error{Code: CodeReservationExpired, Message: "the reservation has expired"}
	ErrReservationCancelled = &Error{Code: CodeReservationCancelled, Message: "the reservation was cancelled"}
	ErrReservationConfirmed = &Error{Code: CodeReservationConfirmed, Message: "the reservation is already an order"}
	ErrNotPaused            = &Error{Code: CodeNotPaused, Message: "the sale is not paused"}
	ErrRegistrationClosed   = &Error{Code: CodeRegistrationClosed, Message: "the registration window is closed"}
	ErrNotRegistered        = &Error{Code: CodeNotRegistered, Message: "register for the lottery first"}
	ErrNotAdmitted          = &Error{Code: CodeNotAdmitted, Message: "the place has not come up"}
	ErrClosed               = &Error{Code: CodeClosed, Message: "the sale has closed"}
	ErrNotSelected          = &Error{Code: CodeNotSelected, Message: "the draw did not select this shopper"}
	ErrSaleExists           = &Error{Code: CodeSaleExists, Message: "another sale for the SKU is scheduled or open"}
	ErrNotOpen              = &Error{Code: CodeNotOpen, Message: "the sale has not opened"}
	ErrInvalidState         = &Error{Code: CodeInvalidState, Message: "the state forbids the action"}
	ErrRebuildRequired      = &Error{Code: CodeRebuildRequired, Message: "the gate lost the counter; rebuild first"}
	ErrInviteUsed           = &Error{Code: CodeInviteUsed, Message: "the invite code was redeemed by another account"}
	ErrVersionConflict      = &Error{Code: CodeVersionConflict, Message: "it changed since it was read"}
	ErrIdempotencyKeyReused = &Error{Code: CodeIdempotencyKeyReused, Message: "the key was used with a different request"}
	ErrPreconditionRequired = &Error{Code: CodePreconditionRequired, Message: "If-Match is required"}
	ErrRateLimited          = &Error{Code: CodeRateLimited, Message: "the budget is spent; come back later"}
	ErrSalePaused           = &Error{Code: CodeSalePaused, Message: "the sale is paused"}
	ErrUnavailable          = &Error{Code: CodeUnavailable, Message: "a store did not answer; repeat the request"}
	ErrOverloaded           = &Error{Code: CodeOverloaded, Message: "no capacity now, nothing was done; repeat the request"}
	ErrInternal             = &Error{Code: CodeInternal, Message: "the server failed"}
)

// sentinels lists every sentinel by its code, for Sentinel.
var sentinels = func() map[Code]*Error {
	m := map[Code]*Error{}
	for _, e := range []*Error{
		ErrBadRequest, ErrTooLarge, ErrUnsupportedMediaType, ErrUnauthenticated, ErrInvalidToken,
		ErrAdmissionRequired, ErrAdmissionInvalid, ErrAdmissionExpired, ErrAdmissionUsed, ErrNotEligible,
		ErrChallengeFailed, ErrInviteInvalid, ErrForbidden, ErrNotFound, ErrMethodNotAllowed, ErrSoldOut,
		ErrLimitReached, ErrReservationExpired, ErrReservationCancelled, ErrReservationConfirmed, ErrNotPaused,
		ErrRegistrationClosed, ErrNotRegistered, ErrNotAdmitted, ErrClosed, ErrNotSelected, ErrSaleExists,
		ErrNotOpen, ErrInvalidState, ErrRebuildRequired, ErrInviteUsed, ErrVersionConflict,
		ErrIdempotencyKeyReused, ErrPreconditionRequired, ErrRateLimited, ErrSalePaused, ErrUnavailable,
		ErrOverloaded, ErrInternal,
	} {
		m[e.Code] = e
	}
	return m
}()

// Sentinel returns the sentinel error of code, or nil for a code this
// client does not know (a newer server's: compare Error.Code then).
func Sentinel(code Code) error {
	if e, ok := sentinels[code]; ok {
		return e
	}
	return nil
}

// ErrorCode returns the code of the first *Error in err's chain, or "" if
// there is none (a network error, a cancelled context).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
