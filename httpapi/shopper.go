package httpapi

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/bulkhead"
	"github.com/flashsale/flashsale/identity"
	"github.com/flashsale/flashsale/purchase"
	"github.com/flashsale/flashsale/waitroom"
)

type policyJSON struct {
	Fairness             flashsale.Fairness `json:"fairness"`
	PerUserLimit         int                `json:"perUserLimit"`
	HoldSeconds          int                `json:"holdSeconds"`
	MinAccountAgeSeconds int                `json:"minAccountAgeSeconds"`
	Challenge            bool               `json:"challenge"`
	// RequireInstrument says a reserve needs the payment instrument the
	// shopper's sign-in vouches for (403 not_eligible without).
	RequireInstrument bool `json:"requireInstrument"`
	// Added to the contract: the pace ceiling, the draw's algorithm and,
	// for a lottery, how many the draw selects.
	AdmissionPerSecond int    `json:"admissionPerSecond,omitempty"`
	DrawAlgorithm      string `json:"drawAlgorithm,omitempty"`
	LotteryWinners     *int   `json:"lotteryWinners,omitempty"`
}

type publicSaleJSON struct {
	SKU                  string              `json:"sku"`
	Name                 string              `json:"name"`
	State                flashsale.SaleState `json:"state"`
	OpensAt              time.Time           `json:"opensAt"`
	ClosesAt             *time.Time          `json:"closesAt,omitempty"`
	RegistrationClosesAt *time.Time          `json:"registrationClosesAt,omitempty"`
	Policy               policyJSON          `json:"policy"`
	SeedCommitment       string              `json:"seedCommitment,omitempty"`
	// Drawn says the draw has run: GET /sale/{sku}/draw publishes it.
	Drawn bool `json:"drawn,omitempty"`
	// AutomationPolicy is the published policy on suspected automation.
	AutomationPolicy string `json:"automationPolicy"`
	// OpensInSeconds, while scheduled, is the time to the open by the
	// server's clock: a page counts down from it rather than trust the
	// device's clock.
	OpensInSeconds *int64 `json:"opensInSeconds,omitempty"`
	// Display is how the shop wants the sale shown (contract: display).
	Display *flashsale.Display `json:"display,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// sale returns the SKU's sale from the catalog, answering 404 itself.
func (s *Server) sale(w http.ResponseWriter, r *http.Request) (*flashsale.Sale, bool) {
	sale, err := s.cfg.Catalog.BySKU(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return nil, false
	}
	return sale, true
}

func (s *Server) getSale(w http.ResponseWriter, r *http.Request) {
	// One address for people and programs: a browser (HTML in Accept) is
	// sent to the sale's waiting room, a client gets the JSON, and a
	// cache keeps the two apart.
	w.Header().Add("Vary", "Accept")
	if s.cfg.Page != nil && strings.Contains(r.Header.Get("Accept"), "text/html") && flashsale.ValidSKU(r.PathValue("sku")) {
		http.Redirect(w, r, "/sale/"+url.PathEscape(r.PathValue("sku"))+"/", http.StatusSeeOther)
		return
	}
	snap, err := s.cfg.Room.Sale(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	sale := snap.Sale
	out := publicSaleJSON{
		SKU:      sale.SKU,
		Name:     sale.Name,
		State:    s.cfg.Room.PublishedState(snap),
		OpensAt:  sale.OpensAt.UTC(),
		ClosesAt: timePtr(sale.ClosesAt),
		Policy: policyJSON{
			Fairness:             sale.Fairness,
			PerUserLimit:         sale.PerUserLimit,
			HoldSeconds:          sale.HoldSeconds,
			MinAccountAgeSeconds: sale.MinAccountAgeSeconds,
			Challenge:            sale.ChallengeBits > 0,
			RequireInstrument:    sale.RequireInstrument,
		},
	}
	out.AutomationPolicy = waitroom.AutomationPolicy
	if !sale.Display.IsZero() {
		d := sale.Display
		out.Display = &d
	}
	if sale.Fairness != flashsale.FairnessFIFO {
		out.SeedCommitment = sale.SeedCommitment
		out.Policy.DrawAlgorithm = waitroom.DrawAlgorithm
		out.Drawn = snap.Drawn
	}
	if sale.Fairness == flashsale.FairnessLottery {
		out.RegistrationClosesAt = timePtr(sale.RegistrationClosesAt)
		winners := 2 * sale.InitialStock
		if snap.Drawn {
			winners = int(snap.Winners)
		}
		out.Policy.LotteryWinners = &winners
	}
	if sale.AdmissionPerSecond > 0 {
		out.Policy.AdmissionPerSecond = sale.AdmissionPerSecond
	}
	if out.State == flashsale.SaleScheduled {
		in := seconds(sale.OpensAt.Sub(s.cfg.Now()))
		out.OpensInSeconds = &in
	}
	writeJSON(w, http.StatusOK, out)
}

// poller returns the user of the shopper JWT a waiting-room request
// carries, or "" for one that carries none (the contract's poll needs only
// the ticket), answering 401 itself for a JWT that does not verify. Only
// what carries the JWT counts towards the automation hold: see
// waitroom.Room.StatusFor.
func (s *Server) poller(w http.ResponseWriter, r *http.Request, sku string) (string, bool) {
	if r.Header.Get("Authorization") == "" {
		return "", true
	}
	sh, ok := s.shopper(w, r, sku)
	return sh.UserID, ok
}

// shopper authenticates the shopper's JWT, answering 401 itself.
func (s *Server) shopper(w http.ResponseWriter, r *http.Request, sku string) (identity.Shopper, bool) {
	sh, err := s.cfg.Shoppers.Verify(r.Header.Get("Authorization"), s.cfg.Now())
	if err != nil {
		s.reject(w, r, sku, &flashsale.Error{Code: flashsale.CodeUnauthenticated,
			Message: "Sign in first: a valid shopper token is required (Authorization: Bearer).", Err: err})
		return identity.Shopper{}, false
	}
	return sh, true
}

func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

func (s *Server) getTicket(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	sh, release, ok := s.roomShopper(w, r, sku)
	if !ok {
		return
	}
	defer release()
	t, err := s.cfg.Room.Ticket(r.Context(), sku, sh.UserID, sh.AccountCreated)
	if err != nil {
		s.reject(w, r, sku, err)
		return
	}
	if t.RetryAfter > 0 {
		setRetryAfter(w, t.RetryAfter)
	}
	out := ticketJSON{Token: t.Token, Position: t.Position, EstimatedWaitSeconds: seconds(t.EstimatedWait)}
	writeAnswer(w, http.StatusOK, out.appendJSON)
}

type ticketJSON struct {
	Token                string `json:"token"`
	Position             int64  `json:"position"`
	EstimatedWaitSeconds int64  `json:"estimatedWaitSeconds"`
}

func (s *Server) postRegister(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	if err := decode(w, r, &struct{}{}, true); err != nil {
		s.reject(w, r, sku, err)
		return
	}
	sh, release, ok := s.roomShopper(w, r, sku)
	if !ok {
		return
	}
	defer release()
	if err := s.cfg.Room.Register(r.Context(), sku, sh.UserID, sh.AccountCreated); err != nil {
		s.reject(w, r, sku, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"registered": true})
}

type redeemBody struct {
	Code string `json:"code"`
}

type redeemJSON struct {
	Token    string `json:"token"`
	Position int64  `json:"position"`
}

// postRedeem redeems an invite code for a ticket ahead of the line
// (contract: POST /sale/{sku}/redeem).
func (s *Server) postRedeem(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	var b redeemBody
	if err := decode(w, r, &b, false); err != nil {
		s.reject(w, r, sku, err)
		return
	}
	sh, release, ok := s.roomShopper(w, r, sku)
	if !ok {
		return
	}
	defer release()
	t, err := s.cfg.Room.Redeem(r.Context(), sku, sh.UserID, sh.AccountCreated, b.Code)
	if err != nil {
		s.reject(w, r, sku, err)
		return
	}
	if t.RetryAfter > 0 {
		setRetryAfter(w, t.RetryAfter)
	}
	writeJSON(w, http.StatusOK, redeemJSON{Token: t.Token, Position: t.Position})
}

// getDraw publishes a random or lottery sale's draw once it has run: the
// seed, and the order of the entrants' pseudonyms, for anyone to recompute
// (flashsale verify).
func (s *Server) getDraw(w http.ResponseWriter, r *http.Request) {
	snap, err := s.cfg.Room.Sale(r.Context(), r.PathValue("sku"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	if snap.Sale.Fairness == flashsale.FairnessFIFO {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeNotFound, "A fifo sale has no draw."))
		return
	}
	if !snap.Drawn {
		writeError(w, s.cfg.Logger, r, &flashsale.Error{Code: flashsale.CodeNotFound,
			Message:    "The draw has not run yet; its seed's commitment is published with the sale.",
			RetryAfter: max(time.Second, waitroom.DrawAt(snap.Sale.Sale()).Sub(s.cfg.Now()))})
		return
	}
	doc, err := s.cfg.Room.DrawDocument(r.Context(), snap)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=60")
	writeJSON(w, http.StatusOK, doc)
}

type statusJSON struct {
	State                waitroom.State `json:"state"`
	OpensAt              *time.Time     `json:"opensAt,omitempty"`
	Position             *int64         `json:"position,omitempty"`
	EstimatedWaitSeconds *int64         `json:"estimatedWaitSeconds,omitempty"`
	AdmissionToken       string         `json:"admissionToken,omitempty"`
	ExpiresIn            *int64         `json:"expiresIn,omitempty"`
	Final                *bool          `json:"final,omitempty"`
	// Added to the contract: the odds of a waiting shopper, and a new
	// ticket once the draw has placed a pre-queue ticket.
	UnitsLeft *int64 `json:"unitsLeft,omitempty"`
	Chance    string `json:"chance,omitempty"`
	Token     string `json:"token,omitempty"`
	// Added to the contract: the time to the open by the server's clock,
	// for the page's countdown.
	OpensInSeconds *int64 `json:"opensInSeconds,omitempty"`

	Challenge *challengeJSON `json:"challenge,omitempty"`
}

type challengeJSON struct {
	Algorithm      string `json:"algorithm"`
	Salt           string `json:"salt"`
	DifficultyBits int    `json:"difficultyBits"`
	ExpiresIn      int64  `json:"expiresIn"`
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	// The ticket in a header keeps it out of the URL, which access logs
	// and referrers keep; the query parameter still works.
	tok := r.Header.Get("X-Ticket")
	if tok == "" {
		tok = queryValue(r.URL.RawQuery, "token")
	}
	if tok == "" {
		s.reject(w, r, sku, flashsale.Errorf(flashsale.CodeInvalidToken, "The ticket is required: the X-Ticket header or the token query parameter."))
		return
	}
	release, ok := s.roomSlot(w, r, sku)
	if !ok {
		return
	}
	defer release()
	by, ok := s.poller(w, r, sku)
	if !ok {
		return
	}
	st, err := s.cfg.Room.StatusFor(r.Context(), sku, tok, by)
	if err != nil {
		s.reject(w, r, sku, err)
		return
	}
	out := statusJSON{State: st.State, Token: st.Ticket}
	switch st.State {
	case waitroom.StateScheduled:
		out.OpensAt = timePtr(st.OpensAt)
		in := seconds(st.OpensAt.Sub(s.cfg.Now()))
		out.OpensInSeconds = &in
		if st.Position > 0 {
			// Added to the contract: the place before the open.
			out.Position = &st.Position
		}
	case waitroom.StateWaiting:
		wait := seconds(st.EstimatedWait)
		out.Position, out.EstimatedWaitSeconds = &st.Position, &wait
		out.UnitsLeft, out.Chance = &st.UnitsLeft, st.Chance
	case waitroom.StateAdmitted:
		exp := seconds(st.ExpiresIn)
		out.AdmissionToken, out.ExpiresIn = st.AdmissionToken, &exp
	case waitroom.StateSoldOut:
		out.Final = &st.Final
	case waitroom.StateChallenge:
		c := st.Challenge
		out.Challenge = &challengeJSON{Algorithm: c.Algorithm, Salt: c.Salt, DifficultyBits: c.DifficultyBits,
			ExpiresIn: seconds(c.Expires.Sub(s.cfg.Now()))}
	}
	if st.RetryAfter > 0 {
		setRetryAfter(w, st.RetryAfter)
	}
	writeAnswer(w, http.StatusOK, out.appendJSON)
}

type admissionBody struct {
	Token string `json:"token"`
	Salt  string `json:"salt"`
	Nonce string `json:"nonce"`
}

// postAdmission takes a solved proof of work for the admission step.
func (s *Server) postAdmission(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	var b admissionBody
	if err := decode(w, r, &b, false); err != nil {
		s.reject(w, r, sku, err)
		return
	}
	if b.Token == "" || b.Salt == "" || b.Nonce == "" {
		s.reject(w, r, sku, flashsale.Errorf(flashsale.CodeBadRequest, "token, salt and nonce are required."))
		return
	}
	release, ok := s.roomSlot(w, r, sku)
	if !ok {
		return
	}
	defer release()
	by, ok := s.poller(w, r, sku)
	if !ok {
		return
	}
	st, err := s.cfg.Room.AdmissionFor(r.Context(), sku, b.Token, b.Salt, b.Nonce, by)
	if err != nil {
		s.reject(w, r, sku, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"admissionToken": st.AdmissionToken, "expiresIn": seconds(st.ExpiresIn)})
}

type reserveBody struct {
	Quantity           *int    `json:"quantity"`
	PaymentFingerprint *string `json:"paymentFingerprint"`
}

func (s *Server) postReserve(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	// The request's own shape first, then the shopper, then the funnel.
	var body reserveBody
	if err := decode(w, r, &body, true); err != nil {
		s.reject(w, r, sku, err)
		return
	}
	sale, ok := s.sale(w, r)
	if !ok {
		return
	}
	quantity := 1
	if body.Quantity != nil {
		quantity = *body.Quantity
	}
	var fingerprint string
	if body.PaymentFingerprint != nil {
		fingerprint = *body.PaymentFingerprint
		if fingerprint == "" {
			s.reject(w, r, sku, flashsale.Errorf(flashsale.CodeBadRequest, "paymentFingerprint must not be empty."))
			return
		}
	}
	key := r.Header.Get("Idempotency-Key")
	if err := purchase.Check(sale, key, quantity, fingerprint); err != nil {
		s.reject(w, r, sku, err)
		return
	}
	sh, ok := s.shopper(w, r, sku)
	if !ok {
		return
	}
	req := purchase.ReserveRequest{
		Sale:           sale,
		UserID:         sh.UserID,
		AccountCreated: sh.AccountCreated,
		AdmissionToken: r.Header.Get("X-Admission-Token"),
		IdempotencyKey: key,
		Quantity:       quantity,
	}
	if err := s.instrument(&req, sh, fingerprint); err != nil {
		s.reject(w, r, sku, err)
		return
	}
	// Concurrent copies of one request (same shopper, key and body) share
	// one answer, and so one turn and one slot: a client that repeats
	// itself is not an account taking the sale's slots.
	v, err, _ := s.flight.Do("reserve\x1f"+sale.ID+"\x1f"+sh.UserID+"\x1f"+key+"\x1f"+req.Hash(), func() (any, error) {
		ctx := context.WithoutCancel(r.Context())
		releaseTurn, err := s.accountTurn(ctx, sale.ID, sh.UserID)
		if err != nil {
			return nil, err
		}
		defer releaseTurn()
		releaseSlot, err := s.take(ctx, s.cfg.InFlight, sale.ID, errOverloaded)
		if err != nil {
			return nil, err
		}
		defer releaseSlot()
		return s.cfg.Purchase.Reserve(ctx, req)
	})
	if err != nil {
		s.reject(w, r, sku, err)
		return
	}
	res := v.(*flashsale.Reservation)
	writeJSON(w, http.StatusCreated, reservedJSON{ReservationID: res.ID, ExpiresAt: res.ExpiresAt.UTC(), Quantity: res.Quantity})
}

// instrument decides which payment instrument the reserve's limits count:
// the one the shopper's JWT vouches for, where it carries one (a body
// paymentFingerprint that differs is refused 400); else the body's, only
// where the server trusts the client's (Config.TrustClientInstrument);
// else none, and the body's value is kept for the request's hash alone.
// The instrument decides who is blocked and whose budget is spent: taken
// from the body alone, it let a shopper leave the limit behind by leaving
// the field out, or block a victim by sending the victim's.
func (s *Server) instrument(req *purchase.ReserveRequest, sh identity.Shopper, fingerprint string) error {
	switch {
	case sh.Instrument != "":
		if fingerprint != "" && fingerprint != sh.Instrument {
			return flashsale.Errorf(flashsale.CodeBadRequest,
				"paymentFingerprint differs from the payment instrument your sign-in vouches for; leave it out.")
		}
		req.PaymentFingerprint = sh.Instrument
	case s.cfg.TrustClientInstrument:
		req.PaymentFingerprint = fingerprint
	default:
		req.IgnoredFingerprint = fingerprint
	}
	return nil
}

type reservedJSON struct {
	ReservationID string    `json:"reservationId"`
	ExpiresAt     time.Time `json:"expiresAt"`
	Quantity      int       `json:"quantity"`
}

type reservationJSON struct {
	ReservationID string                     `json:"reservationId"`
	SKU           string                     `json:"sku"`
	State         flashsale.ReservationState `json:"state"`
	Quantity      int                        `json:"quantity"`
	ExpiresAt     time.Time                  `json:"expiresAt"`
	OrderID       string                     `json:"orderId,omitempty"`
	// Added to the contract: a pending hold's seconds left by the server's
	// clock (0 once past), so a page counts down without trusting the
	// device's clock. Not in the reserve answer, which a replay repeats
	// byte for byte.
	ExpiresIn *int64 `json:"expiresIn,omitempty"`
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) {
	sh, ok := s.shopper(w, r, "")
	if !ok {
		return
	}
	id := r.PathValue("id")
	v, err := s.reservationWork(r, "get", sh.UserID, id, func(ctx context.Context) (any, error) {
		return s.cfg.Purchase.Reservation(ctx, sh.UserID, id)
	})
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	res := v.(*flashsale.Reservation)
	out := reservationJSON{
		ReservationID: res.ID, SKU: res.SKU, State: res.State, Quantity: res.Quantity,
		ExpiresAt: res.ExpiresAt.UTC(), OrderID: res.OrderID,
	}
	if res.State == flashsale.ReservationPending {
		left := seconds(res.ExpiresAt.Sub(s.cfg.Now()))
		out.ExpiresIn = &left
	}
	writeJSON(w, http.StatusOK, out)
}

type confirmBody struct {
	PaymentRef string `json:"paymentRef"`
}

func (s *Server) postConfirm(w http.ResponseWriter, r *http.Request) {
	var body confirmBody
	if err := decode(w, r, &body, true); err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	if len(body.PaymentRef) > 256 {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest, "paymentRef must be at most 256 characters."))
		return
	}
	sh, ok := s.shopper(w, r, "")
	if !ok {
		return
	}
	id := r.PathValue("id")
	// Concurrent confirms of one reservation share the first one's
	// answer: repeating a confirm returns the same order anyway.
	v, err := s.reservationWork(r, "confirm", sh.UserID, id, func(ctx context.Context) (any, error) {
		return s.cfg.Purchase.Confirm(ctx, sh.UserID, id, body.PaymentRef)
	})
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"orderId": v.(*flashsale.Order).ID})
}

func (s *Server) deleteReservation(w http.ResponseWriter, r *http.Request) {
	sh, ok := s.shopper(w, r, "")
	if !ok {
		return
	}
	id := r.PathValue("id")
	v, err := s.reservationWork(r, "cancel", sh.UserID, id, func(ctx context.Context) (any, error) {
		return s.cfg.Purchase.Cancel(ctx, sh.UserID, id)
	})
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"state": string(v.(*flashsale.Reservation).State)})
}

// reservationWork runs a reservation route's work (op on the shopper's
// reservation id) in the account's turn and a slot of ReservationRoutes;
// concurrent copies of it (same op, shopper and id) share one run and its
// answer.
func (s *Server) reservationWork(r *http.Request, op, userID, id string, work func(context.Context) (any, error)) (any, error) {
	v, err, _ := s.flight.Do(op+"\x1f"+userID+"\x1f"+id, func() (any, error) {
		ctx := context.WithoutCancel(r.Context())
		releaseTurn, err := s.accountTurn(ctx, ReservationRoutes, userID)
		if err != nil {
			return nil, err
		}
		defer releaseTurn()
		releaseSlot, err := s.take(ctx, s.cfg.InFlight, ReservationRoutes, errOverloaded)
		if err != nil {
			return nil, err
		}
		defer releaseSlot()
		return work(ctx)
	})
	return v, err
}

// ReservationRoutes is the purchase bulkhead's key for the routes that
// name a reservation, not a sale (get, confirm, cancel): learning the sale
// would take a record read before the slot, the very cost the slot bounds,
// so they share one budget instead (the engine makes it half a sale's), and
// cannot take every slot from the reserves either. Nor can one sale's
// reserves and its shoppers' confirms together take every slot from
// another sale's reserves.
const ReservationRoutes = "\x00reservations"

// errOverloaded sheds a purchase request that found no slot.
var errOverloaded = &flashsale.Error{Code: flashsale.CodeOverloaded,
	Message:    "Too many purchases are in flight right now and nothing was done; repeat the request (with the same Idempotency-Key) after Retry-After.",
	RetryAfter: time.Second}

// take takes a slot of b for key, or returns shed. A nil b bounds nothing.
// The request's own shape and the shopper are checked before (bad input
// gets its 4xx, never a 503), and nothing else is done before the slot is
// held: a shed request has stored no key and asked no gate, so its repeat
// starts afresh.
func (s *Server) take(ctx context.Context, b *bulkhead.Bulkhead, key string, shed error) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	release, ok := b.Acquire(ctx, key)
	if !ok {
		return nil, shed
	}
	return release, nil
}

// errAccountBusy answers a purchase request of an account that already
// has one in flight for the sale (or its reservations), and whose turn did
// not come within a short wait.
var errAccountBusy = &flashsale.Error{Code: flashsale.CodeRateLimited,
	Message:    "This account already has a purchase request in flight here; wait for its answer, then try again.",
	RetryAfter: time.Second}

// accountTurn takes the account's one turn on the purchase path for a sale
// (or for ReservationRoutes), before the request may take one of the slots
// every shopper shares (Config.AccountInFlight): one account's burst
// waits its turn briefly or is told 429, and never holds more than one of
// the sale's slots, so it cannot shed other shoppers' requests with 503.
// The turn is this process's: behind a load balancer, an account has at
// most one request in flight per server; the gate's per-user check and
// the budgets stay global.
func (s *Server) accountTurn(ctx context.Context, saleKey, userID string) (release func(), err error) {
	return s.take(ctx, s.cfg.AccountInFlight, saleKey+"\x1f"+userID, errAccountBusy)
}

// errRoomOverloaded sheds a waiting-room request that found none of its
// sale's slots free in time.
var errRoomOverloaded = &flashsale.Error{Code: flashsale.CodeOverloaded,
	Message:    "Too many shoppers are asking about this sale at once; nothing is lost and your place is kept. Ask again after Retry-After.",
	RetryAfter: time.Second}

// roomSlot takes one of the sale's waiting-room slots, or answers 503
// overloaded itself. A request missing what the route needs (a JWT, a
// token, a body's fields) is told so before, never shed; checking that the
// credentials are good comes after, as it is most of the request's work.
// The slot is the SKU's, whether or not a sale has it, and is forgotten
// once free.
func (s *Server) roomSlot(w http.ResponseWriter, r *http.Request, sku string) (release func(), ok bool) {
	return s.acquire(w, r, s.cfg.RoomInFlight, sku, sku, errRoomOverloaded)
}

// roomShopper takes the sale's waiting-room slot and authenticates the
// shopper inside it, answering 401 or 503 itself; on success the caller
// gives the slot back with release. A request with no Authorization header
// at all is told 401 at once, never shed.
func (s *Server) roomShopper(w http.ResponseWriter, r *http.Request, sku string) (sh identity.Shopper, release func(), ok bool) {
	if r.Header.Get("Authorization") == "" {
		s.shopper(w, r, sku) // answers 401
		return identity.Shopper{}, nil, false
	}
	if release, ok = s.roomSlot(w, r, sku); !ok {
		return identity.Shopper{}, nil, false
	}
	if sh, ok = s.shopper(w, r, sku); !ok {
		release()
		return identity.Shopper{}, nil, false
	}
	return sh, release, true
}

// acquire takes a slot of b for key, or answers shed itself, counted as a
// rejection of sku. A nil b bounds nothing.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request, b *bulkhead.Bulkhead, sku, key string, shed error) (release func(), ok bool) {
	if b == nil {
		return func() {}, true
	}
	release, ok = b.Acquire(r.Context(), key)
	if !ok {
		s.reject(w, r, sku, shed)
		return nil, false
	}
	return release, true
}

// demoUser is what a demo shopper may be called: short, and safe to show.
var demoUser = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// getDemoToken mints a development shopper JWT for ?user=NAME (an addition
// to the contract, registered only for a --demo server with the development
// key), so the demo's page can offer "Sign in as a demo shopper".
func (s *Server) getDemoToken(w http.ResponseWriter, r *http.Request) {
	user := r.URL.Query().Get("user")
	if !demoUser.MatchString(user) {
		writeError(w, s.cfg.Logger, r, flashsale.Errorf(flashsale.CodeBadRequest,
			"user is required: 1 to 64 letters, digits or ._@-"))
		return
	}
	tok, ttl, err := s.cfg.MintDemoToken(user)
	if err != nil {
		writeError(w, s.cfg.Logger, r, &flashsale.Error{Code: flashsale.CodeInternal, Message: "internal error", Err: err})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": tok, "user": user, "expiresIn": seconds(ttl)})
}

// queryValue returns the first value of the query parameter, unescaped,
// or "" — what r.URL.Query().Get does, without building a map for the one
// parameter a poll carries.
func queryValue(rawQuery, name string) string {
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if strings.Contains(pair, ";") {
			continue // as url.ParseQuery: a semicolon is no separator
		}
		key, value, _ := strings.Cut(pair, "=")
		if k, err := url.QueryUnescape(key); err != nil || k != name {
			continue
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			continue // as url.ParseQuery: a malformed pair is skipped
		}
		return v
	}
	return ""
}
