package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// issue issues n codes for s and returns them.
func (e *env) issue(s *flashsale.Sale, n int) []string {
	e.t.Helper()
	codes := make([]string, n)
	hashes := make([]string, n)
	for i := range codes {
		codes[i] = flashsale.NewInviteCode()
		hashes[i] = flashsale.InviteHash(codes[i])
	}
	ok(e.t, "IssueInvites", e.store.IssueInvites(e.ctx, s, hashes, "operator:ann", t0))
	return codes
}

func testInviteIssueAndRedeem(e *env) {
	t := e.t
	s := e.sale()
	other := e.sale()
	codes := e.issue(s, 3)
	e.issue(other, 1)

	h := flashsale.InviteHash(codes[0])
	inv, err := e.store.RedeemInvite(e.ctx, s, h, "alice", t0.Add(time.Second))
	ok(t, "RedeemInvite", err)
	if inv.RedeemedBy != "alice" || inv.CodeHash != h || !inv.RedeemedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("RedeemInvite = %+v", inv)
	}
	// Again by the same account: the same binding, its first time kept.
	again, err := e.store.RedeemInvite(e.ctx, s, h, "alice", t0.Add(time.Minute))
	ok(t, "RedeemInvite again", err)
	same(t, "RedeemInvite again", *again, *inv)

	_, err = e.store.RedeemInvite(e.ctx, s, h, "bob", t0.Add(time.Minute))
	wantIs(t, "RedeemInvite by another account", err, flashsale.ErrInviteUsed)
	_, err = e.store.RedeemInvite(e.ctx, other, flashsale.InviteHash(codes[1]), "bob", t0)
	wantIs(t, "RedeemInvite for another sale", err, flashsale.ErrInviteInvalid)
	_, err = e.store.RedeemInvite(e.ctx, s, flashsale.InviteHash("nothing"), "bob", t0)
	wantIs(t, "RedeemInvite of no code", err, flashsale.ErrInviteInvalid)

	// Issued once, redeemed once: the audit trail.
	evs := e.outbox(s.ID)
	if n := len(ofType(evs, flashsale.EventInviteIssued)); n != 1 {
		t.Errorf("%d invite.issued events, want 1", n)
	}
	if n := len(ofType(evs, flashsale.EventInviteRedeemed)); n != 1 {
		t.Errorf("%d invite.redeemed events, want 1", n)
	}

	// A hash issued twice is refused, and nothing of its batch is written.
	err = e.store.IssueInvites(e.ctx, s, []string{flashsale.InviteHash("fresh"), h}, "operator", t0)
	wantIs(t, "IssueInvites of an existing hash", err, flashsale.ErrDuplicate)
	_, err = e.store.RedeemInvite(e.ctx, s, flashsale.InviteHash("fresh"), "carol", t0)
	wantIs(t, "RedeemInvite of a batch refused", err, flashsale.ErrInviteInvalid)

	err = e.store.IssueInvites(e.ctx, &flashsale.Sale{ID: "sale_missing", SKU: "x"}, []string{flashsale.InviteHash("y")}, "operator", t0)
	wantIs(t, "IssueInvites for no sale", err, flashsale.ErrNotFound)
}

// testInviteOnePerAccount: an account binds one code per sale; redeeming a
// second gives back the first and leaves the second for someone else.
func testInviteOnePerAccount(e *env) {
	t := e.t
	s := e.sale()
	codes := e.issue(s, 2)
	first, err := e.store.RedeemInvite(e.ctx, s, flashsale.InviteHash(codes[0]), "alice", t0)
	ok(t, "RedeemInvite", err)
	second, err := e.store.RedeemInvite(e.ctx, s, flashsale.InviteHash(codes[1]), "alice", t0.Add(time.Second))
	ok(t, "RedeemInvite of a second code", err)
	same(t, "the second code's answer", *second, *first)
	bob, err := e.store.RedeemInvite(e.ctx, s, flashsale.InviteHash(codes[1]), "bob", t0)
	ok(t, "RedeemInvite of the code alice left", err)
	if bob.RedeemedBy != "bob" {
		t.Errorf("bob's redeem = %+v", bob)
	}
}

func testInviteCounts(e *env) {
	t := e.t
	s := e.sale()
	c, err := e.store.InviteCounts(e.ctx, s.ID)
	ok(t, "InviteCounts", err)
	same(t, "InviteCounts of none", c, flashsale.InviteCounts{})
	codes := e.issue(s, 4)
	for i, u := range []string{"alice", "bob", "carol"} {
		_, err := e.store.RedeemInvite(e.ctx, s, flashsale.InviteHash(codes[i]), u, t0)
		ok(t, "RedeemInvite", err)
	}
	e.hold(s, "alice")
	r := e.hold(s, "bob")
	_, _, err = e.store.CancelReservation(e.ctx, r.ID, "bob", t0.Add(time.Second))
	ok(t, "CancelReservation", err)
	e.hold(s, "dave") // not invited
	c, err = e.store.InviteCounts(e.ctx, s.ID)
	ok(t, "InviteCounts", err)
	same(t, "InviteCounts", c, flashsale.InviteCounts{Issued: 4, Redeemed: 3, Won: 1})
}

// testConcurrentRedeem: many accounts redeem one code at once; exactly one
// binds it, every other is told it is used, and one event is written.
func testConcurrentRedeem(e *env) {
	t := e.t
	s := e.sale()
	h := flashsale.InviteHash(e.issue(s, 1)[0])
	const n = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []string
		others []error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("user-%d", i)
			inv, err := e.store.RedeemInvite(e.ctx, s, h, user, t0)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && inv.RedeemedBy == user {
				won = append(won, user)
			} else {
				others = append(others, err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d accounts bound the code (%v), want 1", len(won), won)
	}
	for _, err := range others {
		wantIs(t, "a losing redeem", err, flashsale.ErrInviteUsed)
	}
	if n := len(ofType(e.outbox(s.ID), flashsale.EventInviteRedeemed)); n != 1 {
		t.Errorf("%d invite.redeemed events, want 1", n)
	}
}
