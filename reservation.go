package flashsale

import "time"

// ReservationState is the state of a hold in the record.
type ReservationState string

// The states of a reservation. Pending and confirmed are live: they hold
// units. The others have given their units back (RestockedAt is set).
const (
	ReservationPending   ReservationState = "pending"
	ReservationConfirmed ReservationState = "confirmed"
	ReservationExpired   ReservationState = "expired"
	ReservationCancelled ReservationState = "cancelled"
	// ReservationVoided marks a hold whose record write failed after the
	// gate said yes: the shopper was never told it exists, its units went
	// back to stock, and the API answers 404 for it.
	ReservationVoided ReservationState = "voided"
)

// Live reports whether a reservation in this state holds units.
func (s ReservationState) Live() bool {
	return s == ReservationPending || s == ReservationConfirmed
}

// Reservation is a hold on Quantity units of a sale, for one shopper, until
// ExpiresAt or until it is confirmed into an order.
type Reservation struct {
	ID       string
	SaleID   string
	SKU      string
	UserID   string
	Quantity int
	State    ReservationState
	// PaymentFingerprint identifies the payment instrument, when the
	// shopper gave one; one live reservation per instrument per sale.
	PaymentFingerprint string
	// IdempotencyKey and RequestHash make a repeated reserve replay this
	// reservation; a different request under the same key is refused.
	IdempotencyKey string
	RequestHash    string
	// AdmissionID is the admission the hold spent (token.AdmissionID):
	// the record keeps it so that a gate rebuilt from the record still
	// knows the turn was taken (SaleStore.SpentAdmissions). Empty for a
	// reservation made without one, or before the record kept them.
	AdmissionID string
	// AccountCreated is the shopper's account creation time as the
	// sign-in said (zero if it did not), kept for the post-sale audit of
	// automation patterns.
	AccountCreated time.Time
	// Epoch is the gate epoch the hold was taken under.
	Epoch     int64
	CreatedAt time.Time
	ExpiresAt time.Time
	// RestockedAt is set, once, when the units go back to stock. It is the
	// field that makes the restock happen exactly once.
	RestockedAt time.Time
	ConfirmedAt time.Time
	OrderID     string
	Version     int64
}

// OrderState is the state of an order.
type OrderState string

// The states of an order.
const (
	OrderConfirmed OrderState = "confirmed"
	OrderShipped   OrderState = "shipped"
	OrderCancelled OrderState = "cancelled"
	OrderRefunded  OrderState = "refunded"
)

// Order is a paid reservation.
type Order struct {
	ID            string
	ReservationID string
	SaleID        string
	SKU           string
	UserID        string
	Quantity      int
	State         OrderState
	PaymentRef    string
	Version       int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// OrderChange is an operator's (or a service's) move of an order to a new
// state, conditional on the version they read.
type OrderChange struct {
	OrderID string
	// Version is the order's version as the actor read it; the change
	// applies only if the order is still at it.
	Version int64
	// To is OrderShipped, OrderCancelled or OrderRefunded.
	To OrderState
	// Actor names who made the change, for the audit trail; the record
	// refuses an empty one.
	Actor  string
	Reason string
	At     time.Time
}

// OrderTransition is one row of an order's audit trail: a move from one
// state to another, by whom and when, with the event written with it.
type OrderTransition struct {
	OrderID string
	// From is "" for the order's creation (confirmed).
	From    OrderState
	To      OrderState
	Actor   string
	Reason  string
	Version int64
	At      time.Time
	EventID string
}

// OrderFrom lists the states an order may leave for to: shipped and
// cancelled only from confirmed, refunded from confirmed or shipped.
func OrderFrom(to OrderState) []OrderState {
	switch to {
	case OrderShipped, OrderCancelled:
		return []OrderState{OrderConfirmed}
	case OrderRefunded:
		return []OrderState{OrderConfirmed, OrderShipped}
	}
	return nil
}

// Restocks reports whether moving an order to the state gives its units
// back to the sale's stock.
func (s OrderState) Restocks() bool { return s == OrderCancelled || s == OrderRefunded }

// Attempt is one reservation of a sale, with the order it became, as the
// post-sale audit of automation patterns reads it.
type Attempt struct {
	ReservationID  string
	UserID         string
	Instrument     string
	Quantity       int
	State          ReservationState
	CreatedAt      time.Time
	AccountCreated time.Time
	// OrderID, OrderState and OrderVersion are set when the reservation
	// became an order.
	OrderID      string
	OrderState   OrderState
	OrderVersion int64
}
