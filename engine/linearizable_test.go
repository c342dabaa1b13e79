package engine_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flashsale/flashsale/token"
)

// The operations of the stock history, as porcupine sees them.
type (
	reserveIn  struct{ quantity int }
	reserveOut struct {
		won bool
		id  string
	}
	cancelIn struct {
		id       string
		quantity int
	}
	readIn  struct{}
	readOut struct{ counter int64 }
	// stockState is the model: the units left, and the reservations
	// already given back (sorted, joined), so a state compares with ==.
	stockState struct {
		stock     int
		cancelled string
	}
)

// stockModel is the sale's stock as one atomic counter: a reserve wins
// only if the stock covers it, and is told sold out only if it does not;
// a cancellation returns its units the first time only; a read of the
// counter sees exactly the stock (so never a negative one).
func stockModel(initial int) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return stockState{stock: initial} },
		Step: func(state, in, out any) (bool, any) {
			s := state.(stockState)
			switch in := in.(type) {
			case reserveIn:
				if out.(reserveOut).won {
					if s.stock < in.quantity {
						return false, s
					}
					s.stock -= in.quantity
					return true, s
				}
				return s.stock < in.quantity, s
			case cancelIn:
				ids := strings.Split(s.cancelled, ",")
				if slices.Contains(ids, in.id) {
					return true, s
				}
				ids = append(ids, in.id)
				slices.Sort(ids)
				s.stock += in.quantity
				s.cancelled = strings.Join(ids, ",")
				return true, s
			case readIn:
				return out.(readOut).counter == int64(s.stock), s
			}
			return false, s
		},
		DescribeOperation: func(in, out any) string { return fmt.Sprintf("%+v -> %+v", in, out) },
		DescribeState:     func(state any) string { return fmt.Sprintf("%+v", state) },
	}
}

// TestStockIsLinearizable: clients reserve (one to three units each, every
// reserve a shopper of its own), cancel won reservations (some twice, from
// two clients at once) and read the counter from the operator's view, all
// concurrently; the recorded history must be linearizable against
// stockModel. A restock counted twice, a sold-out told while units were
// left, or a counter read that no order of the operations explains would
// fail it.
func TestStockIsLinearizable(t *testing.T) {
	for _, b := range []backend{backends[0], backends[1]} {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, b)
			const initial, clients, opsPerClient = 12, 6, 30
			h.createSale("lin", map[string]any{"initialStock": initial, "perUserLimit": 3})
			sale := h.saleOf("lin")
			began := time.Now()
			at := func() int64 { return int64(time.Since(began)) }

			var mu sync.Mutex
			var history []porcupine.Operation
			add := func(op porcupine.Operation) { mu.Lock(); history = append(history, op); mu.Unlock() }
			// Won reservations, for any client to cancel.
			type won struct {
				id, user string
				quantity int
			}
			pool := make(chan won, clients*opsPerClient)
			var users atomic.Int64
			var wg sync.WaitGroup
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(c), 42))
					for i := 0; i < opsPerClient; i++ {
						switch n := rng.IntN(10); {
						case n < 5:
							q := 1 + rng.IntN(3)
							user := fmt.Sprintf("lin-%d", users.Add(1))
							adm := h.eng.Tokens.SignAdmission(token.Admission{UserID: user, SaleID: sale.ID, ID: "adm-" + user,
								Expires: h.clock.Now().Add(time.Hour), Epoch: sale.Epoch})
							call := at()
							r := h.reserve("lin", user, adm, "k", map[string]any{"quantity": q})
							ret := at()
							var out reserveOut
							switch {
							case r.status == http.StatusCreated:
								out = reserveOut{won: true, id: r.json(t)["reservationId"].(string)}
								pool <- won{out.id, user, q}
								if rng.IntN(3) == 0 {
									pool <- won{out.id, user, q} // to be cancelled twice
								}
							case r.code() == "sold_out":
							default:
								t.Errorf("reserve: %d %s", r.status, r.body)
								return
							}
							add(porcupine.Operation{ClientId: c, Input: reserveIn{q}, Output: out, Call: call, Return: ret})
						case n < 8:
							var w won
							select {
							case w = <-pool:
							default:
								continue
							}
							call := at()
							r := h.do("DELETE", "/reservations/"+w.id, map[string]string{"Authorization": "Bearer " + h.jwt(w.user)}, nil)
							ret := at()
							if r.status != http.StatusOK {
								t.Errorf("cancel: %d %s", r.status, r.body)
								return
							}
							add(porcupine.Operation{ClientId: c, Input: cancelIn{w.id, w.quantity}, Output: nil, Call: call, Return: ret})
						default:
							call := at()
							r := h.do("GET", "/admin/sales/lin", nil, nil)
							ret := at()
							counter, ok := r.json(t)["counter"].(float64)
							if r.status != http.StatusOK || !ok {
								t.Errorf("read: %d %s", r.status, r.body)
								return
							}
							add(porcupine.Operation{ClientId: c, Input: readIn{}, Output: readOut{int64(counter)}, Call: call, Return: ret})
						}
					}
				}(c)
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			res := porcupine.CheckOperationsTimeout(stockModel(initial), history, 20*time.Second)
			switch res {
			case porcupine.Ok:
			case porcupine.Unknown:
				t.Fatalf("the check of %d operations did not finish in time", len(history))
			default:
				t.Fatalf("the history of %d operations is not linearizable against the stock model", len(history))
			}
			h.exact("lin")
			t.Logf("%d operations, linearizable", len(history))
		})
	}
}

// TestStockModelRejects checks the checker: histories with the defects
// the model is there to catch are found not linearizable.
func TestStockModelRejects(t *testing.T) {
	op := func(c int, in, out any, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Output: out, Call: call, Return: ret}
	}
	for name, history := range map[string][]porcupine.Operation{
		"a restock counted twice": {
			op(0, reserveIn{2}, reserveOut{won: true, id: "r1"}, 0, 1),
			op(0, cancelIn{"r1", 2}, nil, 2, 3),
			op(1, cancelIn{"r1", 2}, nil, 2, 3),
			op(0, readIn{}, readOut{4}, 4, 5), // 2 - 2 + 2 + 2
		},
		"sold out with units left": {
			op(0, reserveIn{1}, reserveOut{}, 0, 1),
		},
		"more sold than there is": {
			op(0, reserveIn{2}, reserveOut{won: true, id: "r1"}, 0, 1),
			op(1, reserveIn{1}, reserveOut{won: true, id: "r2"}, 0, 1),
		},
		"a negative counter": {
			op(0, readIn{}, readOut{-1}, 0, 1),
		},
	} {
		if porcupine.CheckOperations(stockModel(2), history) {
			t.Errorf("%s: the checker found it linearizable", name)
		}
	}
}
