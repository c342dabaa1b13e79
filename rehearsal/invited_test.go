package rehearsal_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/engine"
	"github.com/flashsale/flashsale/rehearsal"
)

// TestInvited: invited shoppers redeem their codes instead of taking a
// ticket, are admitted ahead of the paced line, and the report counts
// their codes; the sale still sells exactly its units.
func TestInvited(t *testing.T) {
	rep, err := rehearsal.Run(context.Background(), rehearsal.Config{Users: 1000, Units: 50, Seed: 11, Invited: 20})
	if err != nil {
		t.Fatal(err)
	}
	check(t, rep, 50)
	s := rep.Store
	if s.InvitesIssued != 20 || s.InvitesRedeemed != 20 {
		t.Fatalf("invites: %d issued, %d redeemed; want 20 and 20", s.InvitesIssued, s.InvitesRedeemed)
	}
	// Ahead of the line: admitted at the open, the invited win far more
	// often than the 980 others, admitted at the pacer's rate (they
	// still race the first of those to reserve, so not always).
	if rate, others := float64(s.InvitesWon)/20, float64(s.Confirmed-s.InvitesWon)/980; s.InvitesWon < 10 || rate < 5*others {
		t.Fatalf("%d of 20 invited shoppers won (%.2f), the others %.3f", s.InvitesWon, rate, others)
	}
	var out bytes.Buffer
	rep.WriteText(&out)
	if !strings.Contains(out.String(), "invited: 20 codes issued, 20 redeemed, ") {
		t.Fatalf("the report does not count the invited:\n%s", out.String())
	}
	if _, err := rehearsal.Run(context.Background(), rehearsal.Config{Users: 10, Units: 5, Invited: 11}); err == nil {
		t.Fatal("--invited over --users was accepted")
	}
}

// TestInvitedAgainstServer: over HTTP, the codes are issued through the
// operator's route, redeemed at the origin, and counted from the sale's
// view. The line is paced slowly, so that the invited, admitted at the
// open, reach the reserve first.
func TestInvitedAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sale in real time")
	}
	eng := startEngine(t, engine.Config{})
	srv := httptest.NewServer(eng.Handler)
	t.Cleanup(srv.Close)
	rep, err := rehearsal.Run(context.Background(), rehearsal.Config{Target: srv.URL, Users: 200, Units: 10, Seed: 3,
		Invited: 5, AdmissionPerSecond: 2, Hold: 2 * time.Second, Arrival: time.Second, Concurrency: 32})
	if err != nil {
		t.Fatal(err)
	}
	check(t, rep, 10)
	if s := rep.Store; s.InvitesIssued != 5 || s.InvitesRedeemed != 5 || s.InvitesWon < 4 {
		t.Fatalf("invites over HTTP: %+v", s)
	}
}
