package waitroom

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"testing"

	"github.com/flashsale/flashsale/token"
)

// signFormat2 spells a ticket as servers before format 3 signed it, the
// sale id in the payload, written out here byte by byte so that the test
// does not lean on the token package's own idea of the old format.
func signFormat2(k token.Key, t token.Ticket) string {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	p := []byte{2, 1}
	p = str(p, k.ID)
	p = str(p, t.UserID)
	p = str(p, t.SaleID)
	p = binary.AppendVarint(p, t.Arrival.UnixMilli())
	p = binary.AppendVarint(p, t.Position)
	p = binary.AppendVarint(p, 0)
	m := hmac.New(sha256.New, k.Secret)
	m.Write([]byte("tkt_"))
	m.Write(p)
	return "tkt_" + base64.RawURLEncoding.EncodeToString(p) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// TestTicketOfThePreviousFormatStillPolls holds the restart promise across
// the upgrade that took the sale id out of the ticket (format 3): a shopper
// holding a ticket a server handed out before the upgrade polls a server
// after it and keeps its place, for its own sale only; its admission, and
// a ticket the room signs for it again, are of the new format and verify
// too.
func TestTicketOfThePreviousFormatStillPolls(t *testing.T) {
	ctx := context.Background()
	key, err := token.GenerateKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	room, _, _ := placesRig(t, 0)
	keys, err := token.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	room.cfg.Tokens = keys
	snaps := room.cfg.Snapshots.(fixedSnapshots)
	snaps["fifo"].AdmittedUpTo = 3

	old := signFormat2(key, token.Ticket{UserID: "early", SaleID: "sale_fifo", Arrival: opens, Position: 7})
	st, err := room.StatusFor(ctx, "fifo", old, "early")
	if err != nil || st.State != StateWaiting || st.Position != 4 {
		t.Fatalf("a ticket of format 2, polled after the upgrade: %+v, %v; want waiting at 4", st, err)
	}
	// Another sale's poll does not accept it.
	if _, err := room.StatusFor(ctx, "random", old, "early"); err != ErrInvalidTicket {
		t.Fatalf("a format-2 ticket of sale_fifo polled for sale_random: %v, want ErrInvalidTicket", err)
	}
	// Its place comes up: admitted, as before the upgrade.
	snaps["fifo"].AdmittedUpTo = 7
	st, err = room.StatusFor(ctx, "fifo", old, "early")
	if err != nil || st.State != StateAdmitted {
		t.Fatalf("a format-2 ticket at its place: %+v, %v; want admitted", st, err)
	}
	if _, err := keys.VerifyAdmission(st.AdmissionToken, opens); err != nil {
		t.Fatalf("the admission handed to it: %v", err)
	}
	// A ticket of format 3 is shorter by the sale id, and answers alike.
	now := keys.SignTicket(token.Ticket{UserID: "early", SaleID: "sale_fifo", Arrival: opens, Position: 7})
	if len(now) >= len(old) {
		t.Errorf("format 3 is %d bytes, format 2 %d", len(now), len(old))
	}
	if st2, err := room.StatusFor(ctx, "fifo", now, "early"); err != nil || st2.State != StateAdmitted {
		t.Fatalf("the same ticket in format 3: %+v, %v", st2, err)
	}
}
