package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/flashsale/flashsale"
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

// publishedState is the sale's state with the live counter taken into
// account: an open sale with no units left is sold out.
func (s *Server) publishedState(r *http.Request, sale *flashsale.Sale) flashsale.SaleState {
	state := sale.StateAt(s.cfg.Now())
	if state != flashsale.SaleOpen {
		return state
	}
	live, err := s.cfg.Room.Live(r.Context(), sale)
	if err == nil && live.Loaded && live.Counter <= 0 {
		return flashsale.SaleSoldOut
	}
	return state
}

func (s *Server) getSale(w http.ResponseWriter, r *http.Request) {
	sale, ok := s.sale(w, r)
	if !ok {
		return
	}
	out := publicSaleJSON{
		SKU:      sale.SKU,
		Name:     sale.Name,
		State:    s.publishedState(r, sale),
		OpensAt:  sale.OpensAt.UTC(),
		ClosesAt: timePtr(sale.ClosesAt),
		Policy: policyJSON{
			Fairness:             sale.Fairness,
			PerUserLimit:         sale.PerUserLimit,
			HoldSeconds:          sale.HoldSeconds,
			MinAccountAgeSeconds: sale.MinAccountAgeSeconds,
			Challenge:            sale.ChallengeBits > 0,
		},
	}
	if sale.Fairness != flashsale.FairnessFIFO {
		out.SeedCommitment = sale.SeedCommitment
	}
	if sale.Fairness == flashsale.FairnessLottery {
		out.RegistrationClosesAt = timePtr(sale.RegistrationClosesAt)
	}
	writeJSON(w, http.StatusOK, out)
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
	sale, ok := s.sale(w, r)
	if !ok {
		return
	}
	sh, ok := s.shopper(w, r, sale.SKU)
	if !ok {
		return
	}
	t, err := s.cfg.Room.Ticket(r.Context(), sale, sh.UserID, sh.AccountCreated)
	if err != nil {
		s.reject(w, r, sale.SKU, err)
		return
	}
	if t.RetryAfter > 0 {
		setRetryAfter(w, t.RetryAfter)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"token":                t.Token,
		"position":             t.Position,
		"estimatedWaitSeconds": seconds(t.EstimatedWait),
	})
}

type statusJSON struct {
	State                waitroom.State `json:"state"`
	OpensAt              *time.Time     `json:"opensAt,omitempty"`
	Position             *int64         `json:"position,omitempty"`
	EstimatedWaitSeconds *int64         `json:"estimatedWaitSeconds,omitempty"`
	AdmissionToken       string         `json:"admissionToken,omitempty"`
	ExpiresIn            *int64         `json:"expiresIn,omitempty"`
	Final                *bool          `json:"final,omitempty"`
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	sale, ok := s.sale(w, r)
	if !ok {
		return
	}
	tok := r.URL.Query().Get("token")
	if tok == "" {
		s.reject(w, r, sale.SKU, flashsale.Errorf(flashsale.CodeInvalidToken, "The token query parameter is required."))
		return
	}
	st, err := s.cfg.Room.Status(r.Context(), sale, tok)
	if err != nil {
		s.reject(w, r, sale.SKU, err)
		return
	}
	out := statusJSON{State: st.State}
	switch st.State {
	case waitroom.StateScheduled:
		out.OpensAt = timePtr(st.OpensAt)
	case waitroom.StateWaiting:
		wait := seconds(st.EstimatedWait)
		out.Position, out.EstimatedWaitSeconds = &st.Position, &wait
	case waitroom.StateAdmitted:
		exp := seconds(st.ExpiresIn)
		out.AdmissionToken, out.ExpiresIn = st.AdmissionToken, &exp
	case waitroom.StateSoldOut:
		out.Final = &st.Final
	}
	if st.RetryAfter > 0 {
		setRetryAfter(w, st.RetryAfter)
	}
	writeJSON(w, http.StatusOK, out)
}

type reserveBody struct {
	Quantity           *int    `json:"quantity"`
	PaymentFingerprint *string `json:"paymentFingerprint"`
}

type reservedJSON struct {
	ReservationID string    `json:"reservationId"`
	ExpiresAt     time.Time `json:"expiresAt"`
	Quantity      int       `json:"quantity"`
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
	res, err := s.cfg.Purchase.Reserve(r.Context(), purchase.ReserveRequest{
		Sale:               sale,
		UserID:             sh.UserID,
		AccountCreated:     sh.AccountCreated,
		AdmissionToken:     r.Header.Get("X-Admission-Token"),
		IdempotencyKey:     key,
		Quantity:           quantity,
		PaymentFingerprint: fingerprint,
	})
	if err != nil {
		s.reject(w, r, sku, err)
		return
	}
	writeJSON(w, http.StatusCreated, reservedJSON{ReservationID: res.ID, ExpiresAt: res.ExpiresAt.UTC(), Quantity: res.Quantity})
}

type reservationJSON struct {
	ReservationID string                     `json:"reservationId"`
	SKU           string                     `json:"sku"`
	State         flashsale.ReservationState `json:"state"`
	Quantity      int                        `json:"quantity"`
	ExpiresAt     time.Time                  `json:"expiresAt"`
	OrderID       string                     `json:"orderId,omitempty"`
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) {
	sh, ok := s.shopper(w, r, "")
	if !ok {
		return
	}
	res, err := s.cfg.Purchase.Reservation(r.Context(), sh.UserID, r.PathValue("id"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, reservationJSON{
		ReservationID: res.ID, SKU: res.SKU, State: res.State, Quantity: res.Quantity,
		ExpiresAt: res.ExpiresAt.UTC(), OrderID: res.OrderID,
	})
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
	order, err := s.cfg.Purchase.Confirm(r.Context(), sh.UserID, r.PathValue("id"), body.PaymentRef)
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"orderId": order.ID})
}

func (s *Server) deleteReservation(w http.ResponseWriter, r *http.Request) {
	sh, ok := s.shopper(w, r, "")
	if !ok {
		return
	}
	res, err := s.cfg.Purchase.Cancel(r.Context(), sh.UserID, r.PathValue("id"))
	if err != nil {
		writeError(w, s.cfg.Logger, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"state": string(res.State)})
}
