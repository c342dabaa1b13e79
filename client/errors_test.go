package client_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/httpapi"
	fstoken "github.com/flashsale/flashsale/token"
)

// serverCodes reads every error code the server knows from its source:
// the Code constants of the root package's error.go and the codes of
// httpapi's status table. A code added there without a sentinel here
// fails TestEveryCodeHasASentinel.
func serverCodes(t *testing.T) map[string]bool {
	t.Helper()
	codes := map[string]bool{}
	fset := token.NewFileSet()
	root, err := parser.ParseFile(fset, "../error.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(root, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Code" {
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok {
						s, _ := strconv.Unquote(lit.Value)
						codes[s] = true
					}
				}
			}
		}
		return true
	})
	respond, err := parser.ParseFile(fset, "../httpapi/respond.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(respond, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if lit, ok := kv.Key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				codes[s] = true
			}
		}
		return true
	})
	if len(codes) < 30 {
		t.Fatalf("read only %d codes from the server's source: %v", len(codes), codes)
	}
	return codes
}

// TestEveryCodeHasASentinel: each code the server can answer, and each of
// the contract's, has a sentinel that errors.Is matches, and an answer
// with another code or status is not matched.
func TestEveryCodeHasASentinel(t *testing.T) {
	codes := serverCodes(t)
	// The contract's codes and its additions the server on main does not
	// answer yet (invites; the media type check on the operator routes).
	for _, c := range []string{"unsupported_media_type", "invite_invalid", "invite_used"} {
		codes[c] = true
	}
	for c := range codes {
		s := client.Sentinel(client.Code(c))
		if s == nil {
			t.Errorf("no sentinel for the code %q", c)
			continue
		}
		answer := &client.Error{Status: httpapi.StatusOf(flashsale.Code(c)), Code: client.Code(c), Message: "m"}
		if !errors.Is(answer, s) {
			t.Errorf("%q: errors.Is does not match its sentinel", c)
		}
		for other := range codes {
			if other != c && errors.Is(answer, client.Sentinel(client.Code(other))) {
				t.Errorf("%q matches the sentinel of %q", c, other)
			}
		}
	}
	if client.Sentinel("no_such_code") != nil {
		t.Error("a sentinel for an unknown code")
	}
	// The root package's errors match too, by code.
	if !errors.Is(&client.Error{Status: 412, Code: client.CodeVersionConflict}, flashsale.ErrVersionConflict) {
		t.Error("errors.Is(err, flashsale.ErrVersionConflict)")
	}
	// A target with a status matches that status only.
	if errors.Is(&client.Error{Status: 409, Code: client.CodeSoldOut}, &client.Error{Status: 410, Code: client.CodeSoldOut}) {
		t.Error("a target's status ignored")
	}
}

// TestErrorCodesFromTheServer provokes, through the client, the codes the
// funnel and the operator routes answer, and checks each maps to its
// sentinel and status.
func TestErrorCodesFromTheServer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t, b)
		ctx := context.Background()
		adm := h.admin()
		h.createSale("shoe", func(s *client.NewSale) { s.InitialStock, s.PerUserLimit, s.HoldSeconds = 2, 2, 60 })
		h.createSale("old-accounts", func(s *client.NewSale) { s.MinAccountAgeSeconds = 86400 })
		later := h.createSale("later", func(s *client.NewSale) { s.OpensAt = start.Add(time.Hour) })
		aliceAdm := h.admit("shoe", "alice")
		alice := h.shopper("alice")
		reserve := func(sh *client.Shopper, r client.ReserveRequest) error {
			_, err := sh.Reserve(ctx, "shoe", r)
			return err
		}

		wantCode(t, "quantity above the limit", reserve(alice, client.ReserveRequest{AdmissionToken: aliceAdm, Quantity: 3}),
			client.ErrBadRequest, 400)
		wantCode(t, "body over 16 KiB", reserve(alice, client.ReserveRequest{AdmissionToken: aliceAdm,
			PaymentFingerprint: strings.Repeat("x", 17<<10)}), client.ErrTooLarge, 413)
		wantCode(t, "forged JWT", reserve(h.c.Shopper(h.jwt("alice")+"x"), client.ReserveRequest{AdmissionToken: aliceAdm}),
			client.ErrUnauthenticated, 401)
		_, err := h.c.Status(ctx, "shoe", "tkt_forged")
		wantCode(t, "forged ticket", err, client.ErrInvalidToken, 401)
		wantCode(t, "no admission", reserve(alice, client.ReserveRequest{}), client.ErrAdmissionRequired, 403)
		wantCode(t, "forged admission", reserve(alice, client.ReserveRequest{AdmissionToken: aliceAdm + "x"}), client.ErrAdmissionInvalid, 403)
		h.clock.Advance(121 * time.Second)
		wantCode(t, "expired admission", reserve(h.shopper("alice"), client.ReserveRequest{AdmissionToken: aliceAdm}), client.ErrAdmissionExpired, 403)
		h.clock.Advance(-121 * time.Second)
		_, err = h.c.Shopper(h.jwtAged("newbie", time.Hour)).Ticket(ctx, "old-accounts")
		wantCode(t, "young account", err, client.ErrNotEligible, 403)
		_, err = alice.Reserve(ctx, "later", client.ReserveRequest{AdmissionToken: h.eng.Tokens.SignAdmission(fstoken.Admission{
			UserID: "alice", SaleID: later.SaleID, ID: fstoken.AdmissionID(later.SaleID, "alice"),
			Expires: start.Add(time.Minute), Epoch: later.Epoch})})
		wantCode(t, "reserve before the open", err, client.ErrNotOpen, 409)

		first, err := alice.Reserve(ctx, "shoe", client.ReserveRequest{AdmissionToken: aliceAdm, IdempotencyKey: "first",
			PaymentFingerprint: "card-A"})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "admission spent", reserve(alice, client.ReserveRequest{AdmissionToken: aliceAdm}), client.ErrAdmissionUsed, 403)
		wantCode(t, "same key, other request", reserve(alice, client.ReserveRequest{AdmissionToken: aliceAdm, IdempotencyKey: "first", Quantity: 2}),
			client.ErrIdempotencyKeyReused, 422)
		bob := h.shopper("bob")
		bobAdm := h.admit("shoe", "bob")
		wantCode(t, "instrument already holds", reserve(bob, client.ReserveRequest{AdmissionToken: bobAdm, PaymentFingerprint: "card-A"}),
			client.ErrLimitReached, 409)
		wantCode(t, "more than is left", reserve(h.shopper("carol"), client.ReserveRequest{AdmissionToken: h.admit("shoe", "carol"), Quantity: 2}),
			client.ErrSoldOut, 409)
		if err := reserve(bob, client.ReserveRequest{AdmissionToken: bobAdm}); err != nil {
			t.Fatal(err)
		}
		// Told sold out, but let through, until the account's budget is
		// spent.
		var rateLimited error
		daveAdm := h.admit("shoe", "dave")
		for i := 0; i < 10 && rateLimited == nil; i++ {
			err := reserve(h.shopper("dave"), client.ReserveRequest{AdmissionToken: daveAdm})
			switch {
			case errors.Is(err, client.ErrRateLimited):
				rateLimited = err
			case !errors.Is(err, client.ErrSoldOut):
				t.Fatalf("dave's reserve %d: %v", i, err)
			}
		}
		wantCode(t, "over the budget", rateLimited, client.ErrRateLimited, 429)
		if e := (*client.Error)(nil); !errors.As(rateLimited, &e) || e.RetryAfter <= 0 {
			t.Fatalf("rate limited without Retry-After: %#v", rateLimited)
		}

		// Reservation routes.
		_, err = alice.Reservation(ctx, "res_nope")
		wantCode(t, "unknown reservation", err, client.ErrNotFound, 404)
		_, err = bob.Confirm(ctx, first.ReservationID, "x")
		wantCode(t, "another shopper's reservation", err, client.ErrNotFound, 404)
		if _, err := alice.Cancel(ctx, first.ReservationID); err != nil {
			t.Fatal(err)
		}
		_, err = alice.Confirm(ctx, first.ReservationID, "x")
		wantCode(t, "confirm a cancelled reservation", err, client.ErrReservationCancelled, 409)
		bobRes, err := adm.Orders(ctx, "shoe")
		if err != nil || len(bobRes) != 0 {
			t.Fatalf("orders: %v %v", bobRes, err)
		}

		// A hold that lapses, and one that became an order.
		h.createSale("brief", func(s *client.NewSale) { s.HoldSeconds = 1 })
		erin := h.shopper("erin")
		lapsed, err := erin.Reserve(ctx, "brief", client.ReserveRequest{AdmissionToken: h.admit("brief", "erin")})
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(2 * time.Second)
		_, err = erin.Confirm(ctx, lapsed.ReservationID, "late")
		wantCode(t, "confirm a lapsed hold", err, client.ErrReservationExpired, 409)
		frank := h.shopper("frank")
		paid, err := frank.Reserve(ctx, "brief", client.ReserveRequest{AdmissionToken: h.admit("brief", "frank")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := frank.Confirm(ctx, paid.ReservationID, "p"); err != nil {
			t.Fatal(err)
		}
		_, err = frank.Cancel(ctx, paid.ReservationID)
		wantCode(t, "cancel an order's reservation", err, client.ErrReservationConfirmed, 409)

		// Operator routes.
		_, err = adm.CreateSale(ctx, client.NewSale{SKU: "shoe", InitialStock: 1, OpensAt: start})
		wantCode(t, "a second live sale of a SKU", err, client.ErrSaleExists, 409)
		_, err = adm.CreateSale(ctx, client.NewSale{SKU: "x", InitialStock: 1, OpensAt: start, Fairness: "bribes"})
		wantCode(t, "a bad fairness", err, client.ErrBadRequest, 400)
		_, err = adm.UpdateSale(ctx, "shoe", 999, client.SalePatch{Name: ptr("x")})
		wantCode(t, "a stale version", err, client.ErrVersionConflict, 412)
		_, err = adm.Rebuild(ctx, "later")
		wantCode(t, "rebuild while not paused", err, client.ErrNotPaused, 409)
		_, err = adm.Ship(ctx, "ord_x", 1, "")
		wantCode(t, "ship an unknown order", err, client.ErrNotFound, 404)
		_, err = adm.Sale(ctx, "nope")
		wantCode(t, "an unknown sale", err, client.ErrNotFound, 404)

		// The waiting room.
		if _, err := adm.Pause(ctx, "old-accounts", ""); err != nil {
			t.Fatal(err)
		}
		tk, err := h.shopper("gail").Ticket(ctx, "old-accounts")
		if err != nil {
			t.Fatal(err)
		}
		h.waits()
		_, err = h.c.Admission(ctx, "old-accounts", client.AdmissionRequest{Token: tk.Token, Salt: "s", Nonce: "1"})
		wantCode(t, "a proof of work for a paused sale", err, client.ErrSalePaused, 503)
		if w := h.waits(); len(w) != 0 {
			t.Fatalf("sale_paused repeated after %v", w)
		}
		h.createSale("queue", func(s *client.NewSale) { s.AdmissionPerSecond = 1 })
		var last *client.Ticket
		for i := 0; i < 5; i++ {
			if last, err = h.shopper("q"+strconv.Itoa(i)).Ticket(ctx, "queue"); err != nil {
				t.Fatal(err)
			}
		}
		_, err = h.c.Admission(ctx, "queue", client.AdmissionRequest{Token: last.Token, Salt: "s", Nonce: "1"})
		wantCode(t, "a proof of work before the place came up", err, client.ErrNotAdmitted, 409)
		h.createSale("ending", func(s *client.NewSale) { s.ClosesAt = start.Add(time.Minute) })
		h.clock.Advance(2 * time.Minute)
		_, err = h.shopper("hal").Ticket(ctx, "ending")
		wantCode(t, "a ticket after the close", err, client.ErrClosed, 409)
	})
}

// TestErrorsOutsideTheContract: an answer without the contract's shape
// (a proxy's) keeps its status, has no code, and is repeated where a 503
// of the server would be.
func TestErrorsOutsideTheContract(t *testing.T) {
	h := newHarness(t, backends[0])
	n := 0
	h.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		n++
		switch n {
		case 1:
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		case 2:
			http.Error(w, "teapot", http.StatusTeapot)
		default:
			next.ServeHTTP(w, r)
		}
	}
	_, err := h.c.Sale(context.Background(), "any")
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusTeapot || e.Code != "" || e.Message != "I'm a teapot" {
		t.Fatalf("the proxy's answers: %#v", err)
	}
	if w := h.waits(); len(w) != 1 || n != 2 {
		t.Fatalf("a 502 without a code: %d requests, waits %v", n, w)
	}
}
