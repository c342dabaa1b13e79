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
// Arrival is truncated to the millisecond. It is safe for concurrent use.
func (r *Keyring) SignTicket(t Ticket) string {
	return r.sign(kindTicket, func(b []byte) []byte {
		b = appendString(b, t.UserID)
		b = appendString(b, t.SaleID)
		b = appendVarint(b, t.Arrival.UnixMilli())
		b = appendVarint(b, t.Position)
		var created int64
		if !t.AccountCreated.IsZero() {
			created = t.AccountCreated.Unix()
		}
		return appendVarint(b, created)
	})
}

// VerifyTicket returns the ticket s holds if a key of the ring signed it as
// a ticket. Anything else (a malformed or forged token, an admission, a
// token of a key the ring no longer holds, input over MaxLen bytes) is
// ErrInvalid, the only error it returns. Tickets do not expire: a sale's end
// bounds them. It is safe for concurrent use and allocates only the
// returned strings.
func (r *Keyring) VerifyTicket(s string) (Ticket, error) {
	sc := r.getScratch()
	if sc == nil {
		return Ticket{}, ErrInvalid
	}
	defer r.scratch.Put(sc)
	p, ok := r.open(sc, s, kindTicket)
	if !ok {
		return Ticket{}, ErrInvalid
	}
	u0, u1 := p.span()
	s0, s1 := p.span()
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
	// One allocation for both strings: they lie in one run of the payload.
	str := string(p.b[u0:s1])
	return Ticket{
		UserID:         str[:u1-u0],
		SaleID:         str[s0-u0:],
		Arrival:        time.UnixMilli(arrival).UTC(),
		Position:       position,
		AccountCreated: createdAt,
	}, nil
}
