package waitroom

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/token"
)

// Redeem binds an invite code to the shopper and gives it a ticket ahead
// of the line (contract: POST /sale/{sku}/redeem): its place is Invited,
// admitted at the open, or at once when open, whatever the pacing. The
// ticket is polled as any other, so the sale's challenge, the automation
// hold and the gate still apply, and the reserve still counts one per
// account and card. Redeeming again with the same code is harmless.
//
// A closed sale, an ineligible account, or a sale sold out for good is
// refused before the code is looked up, so that the code stays unbound
// for an account it can still serve. Errors besides those of Ticket:
// ErrInviteInvalid, ErrInviteUsed, and CodeRateLimited past RedeemLimit.
func (r *Room) Redeem(ctx context.Context, sku, userID string, accountCreated time.Time, code string) (Ticket, error) {
	if r.cfg.Invites == nil {
		return Ticket{}, flashsale.Errorf(flashsale.CodeNotFound, "Invite codes are redeemed at the origin.")
	}
	snap, err := r.Sale(ctx, sku)
	if err != nil {
		return Ticket{}, err
	}
	if !flashsale.ValidInviteCode(code) {
		return Ticket{}, flashsale.ErrInviteInvalid
	}
	sale, now := snap.Sale.Sale(), r.cfg.Now()
	if err := atTheDoor(snap, sale, accountCreated, now); err != nil {
		return Ticket{}, err
	}
	if r.redeems.Add(sale.ID, userID, now) > r.cfg.RedeemLimit {
		return Ticket{}, &flashsale.Error{Code: flashsale.CodeRateLimited, RetryAfter: time.Hour,
			Message: "Too many invite codes tried for this sale; try again later."}
	}
	inv, err := r.cfg.Invites.RedeemInvite(ctx, sale, flashsale.InviteHash(code), userID, now)
	if err != nil {
		return Ticket{}, err
	}
	r.await(ctx, snap, userID, Invited)
	tk := r.cfg.Tokens.SignTicket(token.Ticket{UserID: userID, SaleID: sale.ID, Arrival: inv.RedeemedAt,
		Position: Invited, AccountCreated: accountCreated})
	ahead, wait := r.ahead(snap, Invited, now)
	return Ticket{Token: tk, Position: ahead, EstimatedWait: wait, RetryAfter: pollAfter(wait)}, nil
}

// await notes, for a sale that notifies turns, that the shopper at
// position waits to be told (see Turns). Best effort: a note lost to an
// unreachable queue costs the shopper the message, not the place, and
// the shopper's next ticket request notes it again.
func (r *Room) await(ctx context.Context, snap *Snapshot, userID string, position int64) {
	if snap.Sale.NotifiedAdmissionSeconds <= 0 || (position <= 0 && position != Invited) {
		return
	}
	_ = r.cfg.Queue.Await(context.WithoutCancel(ctx), snap.Sale.ID, userID, position)
}

// claimKey is the key under which a place's admission counts once
// towards the pacer's outstanding admissions: the place itself, or, for
// the invited, who share one place, a negative key of the user's own.
func claimKey(t token.Ticket) int64 {
	if t.Position != Invited {
		return t.Position
	}
	h := fnv.New64a()
	h.Write([]byte(t.UserID))
	return -int64(h.Sum64()>>2) - 3
}
