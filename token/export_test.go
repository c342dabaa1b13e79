package token

// SignTicketFormat2 signs t in the previous ticket format (2), which carried
// the sale id, as servers before format 3 did: the tests use it to show
// that such tickets still verify.
func (r *Keyring) SignTicketFormat2(t Ticket) string {
	return r.sign(kindTicket, formatVersion, "", func(b []byte) []byte {
		b = appendString(b, t.UserID)
		b = appendString(b, t.SaleID)
		b = appendVarint(b, t.Arrival.UnixMilli())
		b = appendVarint(b, t.Position)
		return appendVarint(b, unixOrZero(t.AccountCreated))
	})
}
