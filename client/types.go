package client

import (
	"encoding/json"
	"time"

	"github.com/flashsale/flashsale"
)

// The answers and bodies of the API, field for field as the contract
// (shared/contract.md) and the project's documented additions spell them.
// Where the root package has the wire type (a sale's state, its fairness, a
// reservation's or an order's state, an event's type) it is used as is.
// Fields a server may leave out are omitempty, so a value decoded from an
// answer encodes back to the same JSON, except that an empty optional
// object or zero number is left out rather than sent.
//
// Decoding ignores fields this client does not know, so a newer server's
// additions do not break it.

// Sale is a sale as shoppers see it: GET /sale/{sku}.
type Sale struct {
	SKU   string              `json:"sku"`
	Name  string              `json:"name"`
	State flashsale.SaleState `json:"state"`
	// OpensAt is when the sale opens; OpensInSeconds, while it is
	// scheduled, the time to it by the server's clock (count down from
	// it rather than trust the device's clock).
	OpensAt              time.Time  `json:"opensAt"`
	OpensInSeconds       *int64     `json:"opensInSeconds,omitempty"`
	ClosesAt             *time.Time `json:"closesAt,omitempty"`
	RegistrationClosesAt *time.Time `json:"registrationClosesAt,omitempty"`
	Policy               Policy     `json:"policy"`
	// SeedCommitment, for random and lottery sales, is the hex SHA-256 of
	// the draw's secret seed; Drawn says the draw has run (Client.Draw).
	SeedCommitment string `json:"seedCommitment,omitempty"`
	Drawn          bool   `json:"drawn,omitempty"`
	// AutomationPolicy is the published policy on suspected automation.
	AutomationPolicy string `json:"automationPolicy,omitempty"`
	// Display is how the sale presents itself, where the operator set it.
	Display *Display `json:"display,omitempty"`
}

// Policy is a sale's published rules.
type Policy struct {
	Fairness             flashsale.Fairness `json:"fairness"`
	PerUserLimit         int                `json:"perUserLimit"`
	HoldSeconds          int                `json:"holdSeconds"`
	MinAccountAgeSeconds int                `json:"minAccountAgeSeconds"`
	// Challenge says a proof of work is asked at admission.
	Challenge bool `json:"challenge"`
	// AdmissionPerSecond is the pace ceiling (zero: everyone at the open);
	// DrawAlgorithm the draw's, for random and lottery sales;
	// LotteryWinners how many a lottery's draw selects.
	AdmissionPerSecond int    `json:"admissionPerSecond,omitempty"`
	DrawAlgorithm      string `json:"drawAlgorithm,omitempty"`
	LotteryWinners     *int   `json:"lotteryWinners,omitempty"`
	// RequireInstrument says a reserve must name a payment instrument.
	RequireInstrument bool `json:"requireInstrument,omitempty"`
}

// Display is a sale's presentation: every field optional, text fields
// plain text (no markup). BrandColor is "#rrggbb".
type Display struct {
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	ImageURL    string `json:"imageUrl,omitempty"`
	PriceText   string `json:"priceText,omitempty"`
	ShopURL     string `json:"shopUrl,omitempty"`
	BrandColor  string `json:"brandColor,omitempty"`
	LogoURL     string `json:"logoUrl,omitempty"`
}

// Ticket is a place in a sale's queue: GET /sale/{sku}/ticket, and
// POST /sale/{sku}/redeem (which answers no estimate).
type Ticket struct {
	// Token is what the shopper polls its status with.
	Token                string `json:"token"`
	Position             int64  `json:"position"`
	EstimatedWaitSeconds int64  `json:"estimatedWaitSeconds,omitempty"`
	// RetryAfter is the answer's Retry-After header: poll no sooner.
	RetryAfter time.Duration `json:"-"`
}

// State is a shopper's state in the waiting room, as a status tells it.
type State string

// The states of GET /sale/{sku}/status.
const (
	// StateScheduled: the sale has not opened (OpensAt).
	StateScheduled State = "scheduled"
	// StateWaiting: in the queue (Position, EstimatedWaitSeconds).
	StateWaiting State = "waiting"
	// StateAdmitted: the place came up (AdmissionToken, ExpiresIn).
	StateAdmitted State = "admitted"
	// StateChallenge: solve the proof of work first (Challenge).
	StateChallenge State = "challenge"
	// StateSoldOut: no stock now; Final once none can come back.
	StateSoldOut State = "sold_out"
	// StatePaused: the operator (or a failing gate) paused the sale.
	StatePaused State = "paused"
	// StateNotSelected: a lottery's draw did not select the shopper.
	StateNotSelected State = "not_selected"
	// StateClosed: the sale is over.
	StateClosed State = "closed"
)

// Status is a shopper's place in the waiting room: GET
// /sale/{sku}/status. Which fields are set depends on State.
type Status struct {
	State State `json:"state"`
	// scheduled
	OpensAt        *time.Time `json:"opensAt,omitempty"`
	OpensInSeconds *int64     `json:"opensInSeconds,omitempty"`
	// waiting: the place, an estimate, and honest odds (UnitsLeft and
	// Chance: likely, possible or unlikely).
	Position             int64  `json:"position,omitempty"`
	EstimatedWaitSeconds int64  `json:"estimatedWaitSeconds,omitempty"`
	UnitsLeft            *int64 `json:"unitsLeft,omitempty"`
	Chance               string `json:"chance,omitempty"`
	// admitted: the token for X-Admission-Token, and its life in seconds.
	AdmissionToken string `json:"admissionToken,omitempty"`
	ExpiresIn      int64  `json:"expiresIn,omitempty"`
	// challenge
	Challenge *Challenge `json:"challenge,omitempty"`
	// sold_out: false while pending holds may still return units (keep
	// polling: the place is kept), true once nothing can come back.
	Final bool `json:"final,omitempty"`
	// Token, when set, is a new ticket that replaces the shopper's (the
	// draw has placed a pre-queue ticket): poll with it from now on.
	Token string `json:"token,omitempty"`
	// RetryAfter is the answer's Retry-After header: poll no sooner.
	RetryAfter time.Duration `json:"-"`
}

// Challenge is a proof of work: find a decimal nonce such that
// SHA-256(Salt + Nonce) begins with DifficultyBits zero bits
// (SolveChallenge does).
type Challenge struct {
	Algorithm      string `json:"algorithm"`
	Salt           string `json:"salt"`
	DifficultyBits int    `json:"difficultyBits"`
	ExpiresIn      int64  `json:"expiresIn"`
}

// AdmissionRequest is the body of POST /sale/{sku}/admission: the ticket
// token with the solved proof of work.
type AdmissionRequest struct {
	Token string `json:"token"`
	Salt  string `json:"salt"`
	Nonce string `json:"nonce"`
}

// Admission is the answer to a solved proof of work.
type Admission struct {
	AdmissionToken string `json:"admissionToken"`
	ExpiresIn      int64  `json:"expiresIn"`
}

// ReserveRequest is a reserve: the admission the waiting room gave, the
// idempotency key, and the optional body.
type ReserveRequest struct {
	// AdmissionToken goes in X-Admission-Token.
	AdmissionToken string `json:"-"`
	// IdempotencyKey goes in Idempotency-Key. Keep it with the shopper's
	// cart: the same key repeats the first answer, so a reserve whose
	// outcome is unknown (its retries ran out) may be sent again later,
	// safely. Empty: the client makes one (NewIdempotencyKey) and
	// returns it in Reservation.IdempotencyKey.
	IdempotencyKey string `json:"-"`
	// Quantity is from 1 to the sale's perUserLimit; zero means 1.
	Quantity int `json:"quantity,omitempty"`
	// PaymentFingerprint is the instrument the limits count, where the
	// JWT has no pmf claim and the server trusts the body's.
	PaymentFingerprint string `json:"paymentFingerprint,omitempty"`
}

// Reservation is a hold on units: the answer to a reserve (ReservationID,
// ExpiresAt, Quantity) and GET /reservations/{id} (all of it).
type Reservation struct {
	ReservationID string                     `json:"reservationId"`
	SKU           string                     `json:"sku,omitempty"`
	State         flashsale.ReservationState `json:"state,omitempty"`
	Quantity      int                        `json:"quantity"`
	ExpiresAt     time.Time                  `json:"expiresAt"`
	// OrderID, once confirmed.
	OrderID string `json:"orderId,omitempty"`
	// ExpiresIn, for a pending hold read with GET, is its seconds left
	// by the server's clock.
	ExpiresIn *int64 `json:"expiresIn,omitempty"`
	// IdempotencyKey is the key the reserve was sent with (not part of
	// the answer).
	IdempotencyKey string `json:"-"`
}

// DrawDocument is a random or lottery sale's published draw: GET
// /sale/{sku}/draw. Recompute the order from Seed and the entrants and
// check SHA-256(Seed) against SeedCommitment (flashsale verify does).
type DrawDocument struct {
	SKU            string    `json:"sku"`
	SaleID         string    `json:"saleId"`
	Fairness       string    `json:"fairness"`
	Algorithm      string    `json:"algorithm"`
	SeedCommitment string    `json:"seedCommitment"`
	Seed           string    `json:"seed"`
	DrawnAt        time.Time `json:"drawnAt"`
	// Winners is, for a lottery, how many of Order are selected.
	Winners int `json:"winners,omitempty"`
	// Order is every entrant's pseudonym in drawn order, place 1 first.
	Order []string `json:"order"`
}

// DemoToken is a development shopper JWT from a --demo server.
type DemoToken struct {
	Token     string `json:"token"`
	User      string `json:"user"`
	ExpiresIn int64  `json:"expiresIn"`
}

// NewSale is the body of POST /admin/sales. SKU, InitialStock and OpensAt
// are required; a zero field is left out, so the server's default applies.
type NewSale struct {
	SKU          string `json:"sku"`
	Name         string `json:"name,omitempty"`
	InitialStock int    `json:"initialStock"`
	// OpensAt may be in the past: the sale opens at once.
	OpensAt              time.Time          `json:"opensAt"`
	ClosesAt             time.Time          `json:"closesAt,omitzero"`
	HoldSeconds          int                `json:"holdSeconds,omitempty"`
	PerUserLimit         int                `json:"perUserLimit,omitempty"`
	Fairness             flashsale.Fairness `json:"fairness,omitempty"`
	RegistrationClosesAt time.Time          `json:"registrationClosesAt,omitzero"`
	AdmissionPerSecond   int                `json:"admissionPerSecond,omitempty"`
	MinAccountAgeSeconds int                `json:"minAccountAgeSeconds,omitempty"`
	ChallengeBits        int                `json:"challengeBits,omitempty"`
	Shards               int                `json:"shards,omitempty"`
	// NotifiedAdmissionSeconds, when set, sends shopper.turn through the
	// outbox as a shopper's turn comes, and makes the admission last that
	// long.
	NotifiedAdmissionSeconds int      `json:"notifiedAdmissionSeconds,omitempty"`
	RequireInstrument        bool     `json:"requireInstrument,omitempty"`
	Display                  *Display `json:"display,omitempty"`
}

// SalePatch is the body of PATCH /admin/sales/{sku}: the fields to change,
// nil for those to keep. InitialStock only before the open.
type SalePatch struct {
	Name                     *string    `json:"name,omitempty"`
	ClosesAt                 *time.Time `json:"closesAt,omitempty"`
	AdmissionPerSecond       *int       `json:"admissionPerSecond,omitempty"`
	HoldSeconds              *int       `json:"holdSeconds,omitempty"`
	PerUserLimit             *int       `json:"perUserLimit,omitempty"`
	MinAccountAgeSeconds     *int       `json:"minAccountAgeSeconds,omitempty"`
	ChallengeBits            *int       `json:"challengeBits,omitempty"`
	InitialStock             *int       `json:"initialStock,omitempty"`
	NotifiedAdmissionSeconds *int       `json:"notifiedAdmissionSeconds,omitempty"`
	RequireInstrument        *bool      `json:"requireInstrument,omitempty"`
	Display                  *Display   `json:"display,omitempty"`
}

// SaleView is the operator's view of a sale, with its live figures: the
// answer of POST, GET and PATCH /admin/sales[/{sku}] and of pause, resume
// and rebuild.
type SaleView struct {
	SaleID               string              `json:"saleId"`
	SKU                  string              `json:"sku"`
	Name                 string              `json:"name"`
	State                flashsale.SaleState `json:"state"`
	PauseReason          string              `json:"pauseReason,omitempty"`
	PausedAt             *time.Time          `json:"pausedAt,omitempty"`
	InitialStock         int                 `json:"initialStock"`
	OpensAt              time.Time           `json:"opensAt"`
	ClosesAt             *time.Time          `json:"closesAt"`
	HoldSeconds          int                 `json:"holdSeconds"`
	PerUserLimit         int                 `json:"perUserLimit"`
	Fairness             flashsale.Fairness  `json:"fairness"`
	RegistrationClosesAt *time.Time          `json:"registrationClosesAt,omitempty"`
	AdmissionPerSecond   int                 `json:"admissionPerSecond"`
	MinAccountAgeSeconds int                 `json:"minAccountAgeSeconds"`
	ChallengeBits        int                 `json:"challengeBits"`
	Shards               int                 `json:"shards"`
	SeedCommitment       string              `json:"seedCommitment,omitempty"`
	// NotifiedAdmissionSeconds, RequireInstrument and Display as set.
	NotifiedAdmissionSeconds int      `json:"notifiedAdmissionSeconds,omitempty"`
	RequireInstrument        bool     `json:"requireInstrument,omitempty"`
	Display                  *Display `json:"display,omitempty"`
	Epoch                    int64    `json:"epoch"`
	// Version is what If-Match names in UpdateSale.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`

	// Counter is the gate's units left; nil when the gate does not hold
	// the sale or did not answer (see Gate).
	Counter      *int64 `json:"counter"`
	Pending      int64  `json:"pending"`
	Confirmed    int64  `json:"confirmed"`
	Expired      int64  `json:"expired"`
	Cancelled    int64  `json:"cancelled"`
	Voided       int64  `json:"voided"`
	AdmittedUpTo int64  `json:"admittedUpTo"`
	Waiting      int64  `json:"waiting"`
	// Rejections counts the requests told no, by code.
	Rejections map[string]int64 `json:"rejections"`
	Invariant  Invariant        `json:"invariant"`
	// Gate is "loaded", "not_loaded", "retired" or "unreachable".
	Gate string `json:"gate"`
	// Warm says the counter is loaded and every edge holds the sale.
	Warm             bool          `json:"warm"`
	Edges            []Edge        `json:"edges"`
	HeldAsAutomation int           `json:"heldAsAutomation"`
	Pacing           *Pacing       `json:"pacing,omitempty"`
	Draw             *DrawSummary  `json:"draw,omitempty"`
	Outbox           *OutboxStats  `json:"outbox,omitempty"`
	Invites          *InviteCounts `json:"invites,omitempty"`
	// Errors names the live figures that could not be read.
	Errors []string `json:"errors,omitempty"`
}

// Invariant is the last check that counter + confirmed + pending equals
// the initial stock.
type Invariant struct {
	OK         bool       `json:"ok"`
	CheckedAt  *time.Time `json:"checkedAt"`
	Difference int64      `json:"difference"`
	Reason     string     `json:"reason,omitempty"`
}

// Edge is an edge server that fetched the sale's snapshots lately.
type Edge struct {
	ID       string    `json:"id"`
	LastSeen time.Time `json:"lastSeen"`
	HasSale  bool      `json:"hasSale"`
}

// Pacing is what the pacer last decided for the sale.
type Pacing struct {
	Rate        float64 `json:"rate"`
	Outstanding int64   `json:"outstanding"`
	Capacity    int64   `json:"capacity"`
	Healthy     bool    `json:"healthy"`
}

// DrawSummary is the operator's view of a random or lottery sale's draw.
type DrawSummary struct {
	DrawnAt  *time.Time `json:"drawnAt"`
	Entrants int        `json:"entrants"`
	Winners  int        `json:"winners,omitempty"`
}

// InviteCounts counts a sale's invite codes.
type InviteCounts struct {
	Issued   int64 `json:"issued"`
	Redeemed int64 `json:"redeemed"`
	Won      int64 `json:"won"`
}

// OutboxStats is the outbox's figures, of one sale or of all: events not
// yet published, when the oldest was written and its age (the relay's
// lag), and the dead letters.
type OutboxStats struct {
	Pending         int64      `json:"pending"`
	OldestPendingAt *time.Time `json:"oldestPendingAt"`
	LagSeconds      float64    `json:"lagSeconds"`
	Dead            int64      `json:"dead"`
}

// Order is a confirmed reservation as the operator sees it.
type Order struct {
	OrderID       string               `json:"orderId"`
	ReservationID string               `json:"reservationId"`
	SKU           string               `json:"sku"`
	UserID        string               `json:"userId"`
	Quantity      int                  `json:"quantity"`
	State         flashsale.OrderState `json:"state"`
	// Version is what If-Match names in Ship, CancelOrder and Refund.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
}

// OrderHistory is an order and its audit trail, oldest move first.
type OrderHistory struct {
	Order   Order             `json:"order"`
	History []OrderTransition `json:"history"`
}

// OrderTransition is one move of an order.
type OrderTransition struct {
	From    flashsale.OrderState `json:"from,omitempty"`
	To      flashsale.OrderState `json:"to"`
	Actor   string               `json:"actor"`
	Reason  string               `json:"reason,omitempty"`
	Version int64                `json:"version"`
	At      time.Time            `json:"at"`
	EventID string               `json:"eventId"`
}

// Event is an event of the outbox with its delivery state.
type Event struct {
	EventID       string              `json:"eventId"`
	Type          flashsale.EventType `json:"type"`
	SaleID        string              `json:"saleId"`
	CreatedAt     time.Time           `json:"createdAt"`
	Attempts      int                 `json:"attempts"`
	NextAttemptAt *time.Time          `json:"nextAttemptAt,omitempty"`
	PublishedAt   *time.Time          `json:"publishedAt,omitempty"`
	DeadAt        *time.Time          `json:"deadAt,omitempty"`
	// LastError is the sink's answer to the last failed delivery.
	LastError string `json:"lastError,omitempty"`
	// Payload is the event's envelope as published.
	Payload json.RawMessage `json:"payload"`
}

// AuditLog is the newest entries of a sale's counter audit log.
type AuditLog struct {
	SKU     string       `json:"sku"`
	Entries []AuditEntry `json:"entries"`
}

// AuditEntry is one mutation of a sale's counter, with its source.
type AuditEntry struct {
	Seq           int64     `json:"seq"`
	At            time.Time `json:"at"`
	Op            string    `json:"op"`
	Source        string    `json:"source"`
	Delta         int64     `json:"delta"`
	Counter       int64     `json:"counter"`
	ReservationID string    `json:"reservationId,omitempty"`
}

// AutomationReport is the post-sale audit of a sale's orders for
// automation patterns, and, after CancelAutomation, what was cancelled.
type AutomationReport struct {
	SKU       string    `json:"sku"`
	Orders    int       `json:"orders"`
	Findings  []Finding `json:"findings"`
	Cancelled int       `json:"cancelled"`
	Policy    string    `json:"policy"`
}

// Finding is an order that matches automation patterns.
type Finding struct {
	OrderID       string               `json:"orderId"`
	OrderVersion  int64                `json:"orderVersion"`
	OrderState    flashsale.OrderState `json:"orderState"`
	ReservationID string               `json:"reservationId"`
	UserID        string               `json:"userId"`
	Quantity      int                  `json:"quantity"`
	Patterns      []string             `json:"patterns"`
	// Cancel says the published policy cancels it; Outcome, after a
	// cancelling run, is "cancelled" or why not.
	Cancel  bool   `json:"cancel"`
	Outcome string `json:"outcome,omitempty"`
}
