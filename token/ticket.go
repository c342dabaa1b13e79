package token

import "time"

// Ticket is a shopper's place in a sale's queue, as the waiting room issued
// it. It carries its own position, so the waiting room answers a status poll
// from the ticket alone and asking again never yields a better place.
type Ticket struct {
	UserID string
	SaleID string
	// Arrival is when the shopper reached the edge, kept to the
	// millisecond; a verified ticket's Arrival is in UTC.
	Arrival time.Time
	// Position is the shopper's place in the sale's queue.
	Position int64
	// AccountCreated is the shopper's account creation time (to the
	// second; zero when the sign-in did not say), so that the edge can
	// set a young account's proof-of-work harder with no lookup.
	AccountCreated time.Time
}

// SignTicket returns t as a "tkt_" token signed with the ring's signing key.
// The token does not carry t.SaleID: its MAC covers it, so the ticket
// verifies only for that sale (see VerifyTicket). Arrival is truncated to
// the millisecond. It is safe for concurrent use.
func (r *Keyring) SignTicket(t Ticket) string {
	return r.sign(kindTicket, ticketVersion, t.SaleID, func(b []byte) []byte {
		b = appendString(b, t.UserID)
		b = appendVarint(b, t.Arrival.UnixMilli())
		b = appendVarint(b, t.Position)
		return appendVarint(b, unixOrZero(t.AccountCreated))
	})
}

// unixOrZero is t in Unix seconds, 0 for the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// VerifyTicket returns the ticket s holds if a key of the ring signed it as
// a ticket of the sale saleID, the sale the shopper asks about; the
// returned SaleID is saleID. A ticket of the previous format (2), which
// carried its sale id, verifies too, if that id is saleID: tickets handed
// out before an upgrade stay valid.
//
// Anything else (a malformed or forged token, a ticket of another sale, an
// admission, a token of a key the ring no longer holds, input over MaxLen
// bytes) is ErrInvalid, the only error it returns. Tickets do not expire: a
// sale's end bounds them. It is safe for concurrent use and allocates only
// the returned user id.
func (r *Keyring) VerifyTicket(s, saleID string) (Ticket, error) {
	sc := r.getScratch()
	if sc == nil {
		return Ticket{}, ErrInvalid
	}
	defer r.scratch.Put(sc)
	p, version, ok := r.open(sc, s, kindTicket, saleID)
	if !ok {
		return Ticket{}, ErrInvalid
	}
	u0, u1 := p.span()
	if version == formatVersion {
		s0, s1 := p.span()
		if string(p.b[s0:s1]) != saleID { // compared in place, without allocating
			return Ticket{}, ErrInvalid
		}
	}
	arrival := p.varint()
	position := p.varint()
	created := p.varint()
	if !p.done() {
		return Ticket{}, ErrInvalid
	}
	var createdAt time.Time
	if created != 0 {
		createdAt = time.Unix(created, 0).UTC()
	}
	return Ticket{
		UserID:         string(p.b[u0:u1]),
		SaleID:         saleID,
		Arrival:        time.UnixMilli(arrival).UTC(),
		Position:       position,
		AccountCreated: createdAt,
	}, nil
}
