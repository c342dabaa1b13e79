package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/client"
	"github.com/flashsale/flashsale/engine"
)

// The examples run against a flashsale server in this process (the engine
// behind an httptest server, on a temporary SQLite file), standing in for
// the shop's own; it is a demo server, so that GET /demo/token gives the
// examples shopper JWTs as the shop's identity service would.
var example struct {
	once sync.Once
	url  string
	dir  string
	srv  *httptest.Server
	eng  *engine.Engine
}

// exampleAdminToken is the example server's admin token.
const exampleAdminToken = "example-admin-token"

func exampleServer() string {
	example.once.Do(func() {
		dir, err := os.MkdirTemp("", "flashsale-client-example-")
		if err != nil {
			log.Fatal(err)
		}
		eng, err := engine.Open(context.Background(), engine.Config{DataDir: dir, Demo: true, AdminToken: exampleAdminToken})
		if err != nil {
			log.Fatal(err)
		}
		example.dir, example.eng, example.srv = dir, eng, httptest.NewServer(eng.Handler)
		example.url = example.srv.URL
	})
	return example.url
}

func TestMain(m *testing.M) {
	code := m.Run()
	if example.srv != nil {
		example.srv.Close()
		example.eng.Close()
		os.RemoveAll(example.dir)
	}
	os.Exit(code)
}

// exampleJWT is the shopper's JWT, as the shop's identity service issues
// it (here, the demo server's development key).
func exampleJWT(c *client.Client, user string) string {
	t, err := c.DemoToken(context.Background(), user)
	if err != nil {
		log.Fatal(err)
	}
	return t.Token
}

// A shop's backend sells one unit to a shopper: the operator creates the
// sale; the shopper takes a ticket, waits its turn, reserves with the
// admission and, once paid, confirms.
func Example() {
	ctx := context.Background()
	c, err := client.New(exampleServer())
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Admin(exampleAdminToken).CreateSale(ctx, client.NewSale{
		SKU: "sneaker-42", Name: "Sneaker 42", InitialStock: 100, OpensAt: time.Now(),
	})
	if err != nil {
		log.Fatal(err)
	}

	alice := c.Shopper(exampleJWT(c, "alice"))
	ticket, err := alice.Ticket(ctx, "sneaker-42")
	if err != nil {
		log.Fatal(err)
	}
	st, err := (&client.Waiter{Client: c, SKU: "sneaker-42"}).Wait(ctx, ticket.Token)
	if err != nil {
		log.Fatal(err)
	}
	if st.State != client.StateAdmitted {
		fmt.Println("not this time:", st.State)
		return
	}
	res, err := alice.Reserve(ctx, "sneaker-42", client.ReserveRequest{AdmissionToken: st.AdmissionToken})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reserved", res.Quantity)
	// ... the shop takes the payment ...
	orderID, err := alice.Confirm(ctx, res.ReservationID, "payment-123")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ordered:", orderID != "")
	// Output:
	// reserved 1
	// ordered: true
}

// A Waiter reports each status it reads, and solves the proof of work the
// sale asks before admitting.
func ExampleWaiter() {
	ctx := context.Background()
	c, err := client.New(exampleServer())
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Admin(exampleAdminToken).CreateSale(ctx, client.NewSale{
		SKU: "console-5", InitialStock: 10, OpensAt: time.Now(), ChallengeBits: 8,
	})
	if err != nil {
		log.Fatal(err)
	}
	ticket, err := c.Shopper(exampleJWT(c, "bob")).Ticket(ctx, "console-5")
	if err != nil {
		log.Fatal(err)
	}
	w := &client.Waiter{Client: c, SKU: "console-5", OnStatus: func(st *client.Status) {
		// Tell the shopper's page: its position while waiting, say.
		fmt.Println("status:", st.State)
	}}
	st, err := w.Wait(ctx, ticket.Token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("admission token:", st.AdmissionToken != "")
	// Output:
	// status: challenge
	// status: admitted
	// admission token: true
}

// The server's error codes are Go errors: errors.Is tells them apart.
func ExampleShopper_Reserve() {
	ctx := context.Background()
	c, err := client.New(exampleServer())
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Admin(exampleAdminToken).CreateSale(ctx, client.NewSale{SKU: "last-one", InitialStock: 1, OpensAt: time.Now()})
	if err != nil {
		log.Fatal(err)
	}
	// Both are admitted; one unit is left.
	admit := func(sh *client.Shopper) string {
		t, err := sh.Ticket(ctx, "last-one")
		if err != nil {
			log.Fatal(err)
		}
		st, err := (&client.Waiter{Client: c, SKU: "last-one"}).Wait(ctx, t.Token)
		if err != nil {
			log.Fatal(err)
		}
		return st.AdmissionToken
	}
	carol, dan := c.Shopper(exampleJWT(c, "carol")), c.Shopper(exampleJWT(c, "dan"))
	carolAdmission, danAdmission := admit(carol), admit(dan)

	if _, err := carol.Reserve(ctx, "last-one", client.ReserveRequest{AdmissionToken: carolAdmission}); err != nil {
		log.Fatal(err)
	}
	_, err = dan.Reserve(ctx, "last-one", client.ReserveRequest{AdmissionToken: danAdmission})
	switch {
	case errors.Is(err, client.ErrSoldOut):
		fmt.Println("dan: sold out")
	case errors.Is(err, client.ErrLimitReached):
		fmt.Println("dan: already has one")
	case err != nil:
		log.Fatal(err)
	}
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
	}
	// Output:
	// dan: sold out
	// 409 sold_out
}

// An operator's change names the version it read (If-Match); when the
// sale moved meanwhile, the change is refused and the operator reads again.
func ExampleAdmin_UpdateSale() {
	ctx := context.Background()
	c, err := client.New(exampleServer())
	if err != nil {
		log.Fatal(err)
	}
	adm := c.Admin(exampleAdminToken)
	v, err := adm.CreateSale(ctx, client.NewSale{SKU: "hoodie", InitialStock: 50, OpensAt: time.Now().Add(time.Hour)})
	if err != nil {
		log.Fatal(err)
	}
	stale := v.Version
	limit := 2
	if v, err = adm.UpdateSale(ctx, "hoodie", v.Version, client.SalePatch{PerUserLimit: &limit}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("per-user limit", v.PerUserLimit)

	stock := 80
	_, err = adm.UpdateSale(ctx, "hoodie", stale, client.SalePatch{InitialStock: &stock})
	if errors.Is(err, client.ErrVersionConflict) {
		fmt.Println("it moved since; reading it again")
		v, _ = adm.Sale(ctx, "hoodie")
		v, err = adm.UpdateSale(ctx, "hoodie", v.Version, client.SalePatch{InitialStock: &stock})
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stock", v.InitialStock, "limit", v.PerUserLimit)
	// Output:
	// per-user limit 2
	// it moved since; reading it again
	// stock 80 limit 2
}

// SolveChallenge does the proof of work a status asks, for a backend that
// posts the admission itself.
func ExampleSolveChallenge() {
	nonce, err := client.SolveChallenge(context.Background(), client.Challenge{Algorithm: "sha256", Salt: "example-salt", DifficultyBits: 8})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("nonce:", nonce)
	// Output:
	// nonce: 147
}
