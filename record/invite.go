package record

import (
	"context"
	"database/sql"
	"errors"

	"time"

	"github.com/flashsale/flashsale"
)

// IssueInvites writes the hashes as the sale's unredeemed codes with their
// invite.issued event, in one transaction: ErrNotFound for a sale the
// record lacks, ErrDuplicate if a hash exists (then nothing is written).
func (s *Store) IssueInvites(ctx context.Context, sale *flashsale.Sale, hashes []string, by string, at time.Time) error {
	err := s.d.Tx(ctx, func(x Statements) error {
		exists, err := x.SaleExists(ctx, sale.ID)
		switch {
		case err != nil:
			return err
		case !exists:
			return flashsale.ErrNotFound
		}
		if err := x.InsertInvites(ctx, sale.ID, hashes, by, at); err != nil {
			return err
		}
		_, err = x.InsertEvents(ctx, []flashsale.Event{flashsale.InviteIssuedEvent(sale.ID, sale.SKU, len(hashes), by, at)})
		return err
	})
	if err != nil {
		return s.fail(err, "issue %d invites for sale %s", len(hashes), sale.ID)
	}
	s.eventsWritten()
	return nil
}

// RedeemInvite binds the code to userID with one conditional UPDATE, and
// its invite.redeemed event in the same transaction (the event's id is the
// code's, so a repeat writes none). When the UPDATE takes no row, the code
// is read to say why; when the account already holds another code of the
// sale (the one-per-account index), that code is the answer and the code
// sent stays unbound.
func (s *Store) RedeemInvite(ctx context.Context, sale *flashsale.Sale, hash, userID string, at time.Time) (*flashsale.Invite, error) {
	inv := &flashsale.Invite{SaleID: sale.ID, CodeHash: hash, RedeemedBy: userID}
	wrote := false
	err := s.d.Tx(ctx, func(x Statements) error {
		err := x.BindInvite(ctx, sale.ID, hash, userID, at).Scan(s.d.Time(&inv.RedeemedAt))
		if err != nil {
			return err
		}
		n, err := x.InsertEvents(ctx, []flashsale.Event{flashsale.InviteRedeemedEvent(sale.ID, sale.SKU, hash, userID, at)})
		wrote = n > 0
		return err
	})
	switch {
	case err == nil:
		if wrote {
			s.eventsWritten()
		}
		return inv, nil
	case errors.Is(err, flashsale.ErrDuplicate):
		// The account redeemed another code of the sale: that one stands.
		held := &flashsale.Invite{SaleID: sale.ID, RedeemedBy: userID}
		err := s.d.Reads().InviteOf(ctx, sale.ID, userID).Scan(&held.CodeHash, s.d.Time(&held.RedeemedAt))
		if err != nil {
			return nil, s.fail(err, "invite of %s in sale %s", userID, sale.ID)
		}
		return held, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, s.fail(err, "redeem an invite of sale %s", sale.ID)
	}
	// Refused: no such code, another sale's, or another account's.
	var saleID string
	var by sql.NullString
	err = s.d.Reads().Invite(ctx, hash).Scan(&saleID, &by)
	switch {
	case errors.Is(err, sql.ErrNoRows), err == nil && saleID != sale.ID:
		return nil, flashsale.ErrInviteInvalid
	case err != nil:
		return nil, s.fail(err, "invite of sale %s", sale.ID)
	case by.Valid && by.String != userID:
		return nil, flashsale.ErrInviteUsed
	}
	// Bound to this account since the UPDATE looked: a concurrent redeem
	// of its own; the row now says so.
	return s.RedeemInvite(ctx, sale, hash, userID, at)
}

// InviteCounts counts the sale's codes: issued, redeemed, and won
// (redeemed by an account with a pending or confirmed reservation of the
// sale).
func (s *Store) InviteCounts(ctx context.Context, saleID string) (flashsale.InviteCounts, error) {
	var c flashsale.InviteCounts
	if err := s.d.Reads().InviteCounts(ctx, saleID).Scan(&c.Issued, &c.Redeemed, &c.Won); err != nil {
		return flashsale.InviteCounts{}, s.fail(err, "invite counts of sale %s", saleID)
	}
	return c, nil
}
