package client

import (
	"context"
	"net/http"

	"github.com/flashsale/flashsale"
)

// Shopper is the client speaking for one shopper, with the shopper's JWT
// as the store's identity service issued it. It is cheap: make one per
// shopper and request. Safe for concurrent use.
type Shopper struct {
	c   *Client
	jwt string
}

// Shopper returns the client speaking for the shopper whose JWT is jwt.
func (c *Client) Shopper(jwt string) *Shopper { return &Shopper{c: c, jwt: jwt} }

// Client returns the client the shopper speaks through.
func (s *Shopper) Client() *Client { return s.c }

// Ticket takes the shopper's place in the sale's queue: GET
// /sale/{sku}/ticket. Asking again returns the same place, never a better
// one. ErrUnauthenticated for a bad JWT; ErrSoldOut or ErrClosed once
// nothing can be sold; ErrNotRegistered for a lottery the shopper has not
// registered for; ErrNotEligible where the sale says so.
func (s *Shopper) Ticket(ctx context.Context, sku string) (*Ticket, error) {
	var t Ticket
	h, err := s.c.do(ctx, &call{method: http.MethodGet, path: "/sale/" + seg(sku) + "/ticket",
		header: bearerHeader(s.jwt), repeatable: true}, &t)
	if err != nil {
		return nil, err
	}
	t.RetryAfter = s.c.retryAfter(h)
	return &t, nil
}

// Status is Client.Status as the waiting-room page polls: the ticket in
// the X-Ticket header, out of the URL (which access logs, proxies and
// referrers keep), and the shopper's JWT, which binds the poll to the
// shopper. A poll signed in so counts as the shopper's own, so that a copy
// of the ticket polled by someone else cannot get the shopper held as
// automation; ErrInvalidToken for a ticket of another account,
// ErrUnauthenticated for a JWT that does not verify.
func (s *Shopper) Status(ctx context.Context, sku, ticket string) (*Status, error) {
	h := bearerHeader(s.jwt)
	h.Set("X-Ticket", ticket)
	return s.c.status(ctx, &call{method: http.MethodGet, path: "/sale/" + seg(sku) + "/status", header: h, repeatable: true})
}

// Admission is Client.Admission signed in as the shopper, as the page
// posts it: bound to the shopper, as Status is.
func (s *Shopper) Admission(ctx context.Context, sku string, r AdmissionRequest) (*Admission, error) {
	return s.c.admission(ctx, sku, r, bearerHeader(s.jwt))
}

// Register enters the shopper in a lottery sale's draw: POST
// /sale/{sku}/register, during the registration window (else
// ErrRegistrationClosed). Repeating it is harmless.
func (s *Shopper) Register(ctx context.Context, sku string) error {
	_, err := s.c.do(ctx, &call{method: http.MethodPost, path: "/sale/" + seg(sku) + "/register",
		header: bearerHeader(s.jwt), repeatable: true}, nil)
	return err
}

// Redeem redeems an invite code issued for the sale: POST
// /sale/{sku}/redeem. The answer is the shopper's ticket, placed ahead of
// the line; poll it as any other. Repeating it with the same code is
// harmless. ErrInviteInvalid for an unknown code or one of another sale;
// ErrInviteUsed for one redeemed by another account.
func (s *Shopper) Redeem(ctx context.Context, sku, code string) (*Ticket, error) {
	var t Ticket
	h, err := s.c.do(ctx, &call{method: http.MethodPost, path: "/sale/" + seg(sku) + "/redeem",
		header: bearerHeader(s.jwt), body: map[string]string{"code": code}, repeatable: true}, &t)
	if err != nil {
		return nil, err
	}
	t.RetryAfter = s.c.retryAfter(h)
	return &t, nil
}

// Reserve holds units for the shopper: POST /sale/{sku}/reserve with the
// admission the waiting room gave. A reserve the server asks to repeat
// (503 overloaded or unavailable), or that got no answer, is repeated with
// the same Idempotency-Key after Retry-After, so it reserves at most once
// and every repeat gets the first answer.
//
// The errors, in the order the funnel checks them: ErrBadRequest;
// ErrUnauthenticated; ErrAdmissionRequired, ErrAdmissionInvalid,
// ErrAdmissionExpired, ErrAdmissionUsed; ErrNotEligible; ErrRateLimited;
// ErrSalePaused; ErrSoldOut; ErrLimitReached; ErrIdempotencyKeyReused.
// After the client's repeats run out, ErrOverloaded or ErrUnavailable (or
// a network error): the outcome is then unknown, and sending the request
// again with the same key (r.IdempotencyKey) finds it out.
func (s *Shopper) Reserve(ctx context.Context, sku string, r ReserveRequest) (*Reservation, error) {
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = NewIdempotencyKey()
	}
	if r.Quantity == 0 {
		// Sent, rather than left to the default, so that every repeat and
		// every client of the same key asks the same thing.
		r.Quantity = 1
	}
	h := bearerHeader(s.jwt)
	h.Set("Idempotency-Key", r.IdempotencyKey)
	if r.AdmissionToken != "" {
		h.Set("X-Admission-Token", r.AdmissionToken)
	}
	var res Reservation
	if _, err := s.c.do(ctx, &call{method: http.MethodPost, path: "/sale/" + seg(sku) + "/reserve",
		header: h, body: r, repeatable: true}, &res); err != nil {
		return nil, err
	}
	res.IdempotencyKey = r.IdempotencyKey
	return &res, nil
}

// Reservation returns one of the shopper's reservations: GET
// /reservations/{id}. ErrNotFound for another shopper's or none.
func (s *Shopper) Reservation(ctx context.Context, id string) (*Reservation, error) {
	var r Reservation
	if _, err := s.c.do(ctx, &call{method: http.MethodGet, path: "/reservations/" + seg(id),
		header: bearerHeader(s.jwt), repeatable: true}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Confirm turns the reservation into an order after payment: POST
// /reservations/{id}/confirm. It returns the order's id; repeating it
// returns the same one. ErrReservationExpired or ErrReservationCancelled
// where the hold is gone; ErrNotFound for another shopper's.
func (s *Shopper) Confirm(ctx context.Context, id, paymentRef string) (orderID string, err error) {
	var out struct {
		OrderID string `json:"orderId"`
	}
	if _, err := s.c.do(ctx, &call{method: http.MethodPost, path: "/reservations/" + seg(id) + "/confirm",
		header: bearerHeader(s.jwt), body: map[string]string{"paymentRef": paymentRef}, repeatable: true}, &out); err != nil {
		return "", err
	}
	return out.OrderID, nil
}

// Cancel gives the reservation's units back: DELETE /reservations/{id}.
// It returns the reservation's state, cancelled, also when repeated; the
// units go back to stock exactly once. ErrReservationConfirmed for one
// that became an order.
func (s *Shopper) Cancel(ctx context.Context, id string) (flashsale.ReservationState, error) {
	var out struct {
		State flashsale.ReservationState `json:"state"`
	}
	if _, err := s.c.do(ctx, &call{method: http.MethodDelete, path: "/reservations/" + seg(id),
		header: bearerHeader(s.jwt), repeatable: true}, &out); err != nil {
		return "", err
	}
	return out.State, nil
}
