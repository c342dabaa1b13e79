package flashsale

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// EventType names what happened. Consumers subscribe by type; on NATS it
// is the last part of the subject.
type EventType string

// The events a sale publishes. Each is written to the record's outbox in the
// same transaction as the change it reports, and delivered at least once.
const (
	EventReservationCreated   EventType = "reservation.created"
	EventReservationExpired   EventType = "reservation.expired"
	EventReservationCancelled EventType = "reservation.cancelled"
	EventOrderConfirmed       EventType = "order.confirmed"
	EventOrderShipped         EventType = "order.shipped"
	EventOrderCancelled       EventType = "order.cancelled"
	EventOrderRefunded        EventType = "order.refunded"
	EventSaleOpened           EventType = "sale.opened"
	EventSaleSoldOut          EventType = "sale.sold_out"
	EventSalePaused           EventType = "sale.paused"
	EventSaleResumed          EventType = "sale.resumed"
	EventSaleClosed           EventType = "sale.closed"
	EventInviteIssued         EventType = "invite.issued"
	EventInviteRedeemed       EventType = "invite.redeemed"
	EventShopperTurn          EventType = "shopper.turn"
)

// Event is one fact to publish: the row the record's outbox keeps until a
// relay has delivered it. Payload is the JSON envelope exactly as consumers
// receive it (see Envelope); the other fields repeat what the outbox needs
// to index and route it.
//
// ID is stable: it is chosen once, when the event is written, and every
// delivery of the event carries it, so consumers deduplicate on it. An
// Event's zero value is not valid; build one with the constructors below.
type Event struct {
	ID         string
	Type       EventType
	SaleID     string
	OccurredAt time.Time
	Payload    []byte
}

// Envelope is the JSON every event is published as:
//
//	{"id": "evt_…", "type": "order.shipped", "occurredAt": "…",
//	 "saleId": "sale_…", "sku": "…", "data": {…}}
//
// data is a ReservationData, OrderData or SaleData, by type.
type Envelope struct {
	ID         string          `json:"id"`
	Type       EventType       `json:"type"`
	OccurredAt time.Time       `json:"occurredAt"`
	SaleID     string          `json:"saleId"`
	SKU        string          `json:"sku,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// ReservationData is the data of the reservation.* events.
type ReservationData struct {
	ReservationID string           `json:"reservationId"`
	UserID        string           `json:"userId"`
	Quantity      int              `json:"quantity"`
	State         ReservationState `json:"state"`
	ExpiresAt     time.Time        `json:"expiresAt"`
	// Cause says who ended the hold: "shopper", "expiry", or the order
	// change that gave its units back ("order.cancelled", "order.refunded").
	Cause string `json:"cause,omitempty"`
}

// OrderData is the data of the order.* events.
type OrderData struct {
	OrderID       string `json:"orderId"`
	ReservationID string `json:"reservationId"`
	UserID        string `json:"userId"`
	Quantity      int    `json:"quantity"`
	// From is empty for order.confirmed, the order's first state.
	From OrderState `json:"from,omitempty"`
	To   OrderState `json:"to"`
	// Version is the order's version after the change.
	Version int64  `json:"version"`
	Actor   string `json:"actor"`
	Reason  string `json:"reason,omitempty"`
	// Restocked reports that the change gave the order's units back to
	// the sale's stock.
	Restocked bool `json:"restocked,omitempty"`
}

// SaleData is the data of the sale.* events.
type SaleData struct {
	State        SaleState `json:"state"`
	Reason       string    `json:"reason,omitempty"`
	OpensAt      time.Time `json:"opensAt"`
	InitialStock int       `json:"initialStock"`
	Epoch        int64     `json:"epoch"`
	// ReservationID, on sale.sold_out, is the hold that took the last
	// unit.
	ReservationID string `json:"reservationId,omitempty"`
}

// InviteData is the data of the invite.* events: the audit trail of a
// sale's codes. A code itself is never published; a redemption names the
// first 12 hex digits of its hash, enough to tell codes apart in an
// inquiry.
type InviteData struct {
	// Count and Actor, on invite.issued: how many codes, issued by whom.
	Count int    `json:"count,omitempty"`
	Actor string `json:"actor,omitempty"`
	// UserID and Code, on invite.redeemed.
	UserID string `json:"userId,omitempty"`
	Code   string `json:"codeHash,omitempty"`
}

// TurnData is the data of shopper.turn: the shopper whose turn came, and
// until when its admission lasts (the sale's notifiedAdmissionSeconds
// from the turn), so that the shop can tell the shopper to come back.
type TurnData struct {
	UserID             string    `json:"userId"`
	AdmissionExpiresAt time.Time `json:"admissionExpiresAt"`
}

// InviteIssuedEvent reports a batch of count codes issued by actor.
func InviteIssuedEvent(saleID, sku string, count int, actor string, at time.Time) Event {
	return NewEvent("", EventInviteIssued, saleID, sku, at, InviteData{Count: count, Actor: actor})
}

// InviteRedeemedEvent reports the code with the hash redeemed by userID.
// Its id is a function of the code: a code is redeemed once.
func InviteRedeemedEvent(saleID, sku, hash, userID string, at time.Time) Event {
	short := hash
	if len(short) > 12 {
		short = short[:12]
	}
	return NewEvent("evt_"+saleID+".invite."+hash, EventInviteRedeemed, saleID, sku, at,
		InviteData{UserID: userID, Code: short})
}

// ShopperTurnEvent is the shopper.turn event of userID in the sale, whose
// admission lasts until expires. Its id is a function of the sale and the
// user: a shopper's turn comes once, and every server that sees it come
// writes the same event, which the outbox keeps once.
func ShopperTurnEvent(saleID, sku, userID string, at, expires time.Time) Event {
	return NewEvent("evt_"+saleID+".turn."+TurnKey(userID), EventShopperTurn, saleID, sku, at,
		TurnData{UserID: userID, AdmissionExpiresAt: expires.UTC()})
}

// TurnKey is the part of a shopper.turn event's id that names the user: a
// hash, since a user id is the store's and may hold any character.
func TurnKey(userID string) string {
	h := sha256.Sum256([]byte(userID))
	return hex.EncodeToString(h[:12])
}

// NewEventID returns a new event id: a ULID, time-ordered. Safe for
// concurrent use.
func NewEventID() string { return NewID("evt_") }

// NewEvent builds an event of type typ with the data, marshalled into its
// envelope. id "" picks a new id. It panics only if data cannot be
// marshalled, which the data types above always can.
func NewEvent(id string, typ EventType, saleID, sku string, at time.Time, data any) Event {
	if id == "" {
		id = NewEventID()
	}
	at = at.UTC()
	raw, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("flashsale: marshal %s data: %v", typ, err))
	}
	payload, err := json.Marshal(Envelope{ID: id, Type: typ, OccurredAt: at, SaleID: saleID, SKU: sku, Data: raw})
	if err != nil {
		panic(fmt.Sprintf("flashsale: marshal %s envelope: %v", typ, err))
	}
	return Event{ID: id, Type: typ, SaleID: saleID, OccurredAt: at, Payload: payload}
}

// ReservationEvent reports a change of r (already in its new state) at at.
func ReservationEvent(typ EventType, r *Reservation, cause string, at time.Time) Event {
	return NewEvent("", typ, r.SaleID, r.SKU, at, ReservationData{
		ReservationID: r.ID, UserID: r.UserID, Quantity: r.Quantity, State: r.State,
		ExpiresAt: r.ExpiresAt.UTC(), Cause: cause,
	})
}

// OrderEvent reports the change of o (already in its new state) from the
// state from, by actor.
func OrderEvent(typ EventType, o *Order, from OrderState, actor, reason string, restocked bool, at time.Time) Event {
	return NewEvent("", typ, o.SaleID, o.SKU, at, OrderData{
		OrderID: o.ID, ReservationID: o.ReservationID, UserID: o.UserID, Quantity: o.Quantity,
		From: from, To: o.State, Version: o.Version, Actor: actor, Reason: reason, Restocked: restocked,
	})
}

// SaleEvent reports a change of s (already in its new state).
func SaleEvent(typ EventType, s *Sale, at time.Time) Event {
	return NewEvent("", typ, s.ID, s.SKU, at, saleData(s))
}

func saleData(s *Sale) SaleData {
	return SaleData{State: s.State, Reason: s.PauseReason, OpensAt: s.OpensAt.UTC(),
		InitialStock: s.InitialStock, Epoch: s.Epoch}
}

// SaleOpenedEvent is the sale.opened event of s. Its id is a function of
// the sale alone, so that every server that notices the opening writes the
// same event and the outbox keeps one (a sale opens once; a resume after a
// pause is sale.resumed). It occurred at OpensAt, or at CreatedAt for a sale
// created after its opening time.
func SaleOpenedEvent(s *Sale) Event {
	at := s.OpensAt
	if s.CreatedAt.After(at) {
		at = s.CreatedAt
	}
	d := saleData(s)
	d.State = SaleOpen
	return NewEvent("evt_"+s.ID+".opened", EventSaleOpened, s.ID, s.SKU, at, d)
}

// SaleSoldOutEvent is the sale.sold_out event written with the reservation
// that took the last unit. Its id is a function of that reservation: each
// sell-out (units may come back and sell out again) is one event, and a
// repeated write of it is one event too.
func SaleSoldOutEvent(s *Sale, reservationID string, at time.Time) Event {
	d := saleData(s)
	d.State = SaleSoldOut
	d.ReservationID = reservationID
	return NewEvent("evt_"+reservationID+".sold_out", EventSaleSoldOut, s.ID, s.SKU, at, d)
}

// SaleStateEvent returns the event type that reports a sale moving from one
// recorded state to another, and false when the move is not published
// (scheduled to open is not the opening: that is a moment, reported by
// sale.opened).
func SaleStateEvent(from, to SaleState) (EventType, bool) {
	switch {
	case from == to:
		return "", false
	case to == SalePaused:
		return EventSalePaused, true
	case from == SalePaused && (to == SaleOpen || to == SaleScheduled):
		return EventSaleResumed, true
	case to == SaleClosed:
		return EventSaleClosed, true
	case to == SaleSoldOut:
		return EventSaleSoldOut, true
	}
	return "", false
}

// OutboxEvent is an event as the outbox keeps it, with its delivery state.
type OutboxEvent struct {
	Event
	CreatedAt time.Time
	// Attempts counts claims: an attempt is counted when a relay claims
	// the event, before it tries, so that a relay dying mid-delivery still
	// uses one up.
	Attempts int
	// NextAttemptAt is when the event may be claimed: after its backoff,
	// or when the claim of a relay that died lapses.
	NextAttemptAt time.Time
	// ClaimToken is the token of the claim that holds the event, "" when
	// none does. Only that claim's holder can complete it.
	ClaimToken  string
	ClaimedBy   string
	ClaimedAt   time.Time
	PublishedAt time.Time
	// DeadAt is when the event was dead-lettered: it is no longer tried
	// until an operator replays it.
	DeadAt    time.Time
	LastError string
}

// Pending reports whether the event still waits for delivery.
func (e *OutboxEvent) Pending() bool { return e.PublishedAt.IsZero() && e.DeadAt.IsZero() }

// EventClaim is one relay's claim of a batch of due events.
type EventClaim struct {
	// Relay names the claimer (for operators; fencing uses Token).
	Relay string
	// Token is fresh for every claim; completing or failing an event
	// needs it.
	Token string
	// Now is the claimer's clock: events due at or before it are claimed.
	Now time.Time
	// Lease is the claim timeout: an event not completed by Now+Lease may
	// be claimed again, by any relay.
	Lease time.Duration
	// Limit bounds the batch; the claim never takes more.
	Limit int
	// MaxAttempts, when positive, leaves out events that already used
	// that many claims: they are dead letters to be (BuryAbandoned).
	MaxAttempts int
}

// OutboxStats are an outbox's figures for operators.
type OutboxStats struct {
	// Pending counts events not yet delivered (nor dead); OldestPending
	// is when the oldest of them was written (zero when none is).
	Pending       int64
	OldestPending time.Time
	// Dead counts dead-lettered events.
	Dead int64
}

// Lag is how long the oldest pending event has waited at now; zero when
// nothing is pending.
func (s OutboxStats) Lag(now time.Time) time.Duration {
	if s.Pending == 0 || s.OldestPending.IsZero() || now.Before(s.OldestPending) {
		return 0
	}
	return now.Sub(s.OldestPending)
}
