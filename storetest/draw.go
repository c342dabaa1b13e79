package storetest

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/flashsale/flashsale"
)

// testDraw: the seed is stored with the sale, secret until the draw; the
// draw is saved once, whoever saves it; a fifo sale has none.
func testDraw(e *env) {
	seed := bytes.Repeat([]byte{7}, 32)
	s := e.sale(func(s *flashsale.Sale) {
		s.Fairness = flashsale.FairnessRandom
		s.SeedCommitment = "c0ffee"
		s.DrawSeed = seed
	})
	d, err := e.store.Draw(e.ctx, s.ID)
	if err != nil {
		e.t.Fatalf("Draw: %v", err)
	}
	if !bytes.Equal(d.Seed, seed) || !d.DrawnAt.IsZero() || d.Document != nil || d.Entrants != 0 {
		e.t.Fatalf("undrawn: %+v", d)
	}
	if got, _ := e.store.Sale(e.ctx, s.ID); got.DrawSeed != nil || got.SeedCommitment != "c0ffee" {
		e.t.Fatalf("the sale carries its seed or lost its commitment: %+v", got)
	}

	var saved atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ok, err := e.store.SaveDraw(e.ctx, &flashsale.Draw{SaleID: s.ID, DrawnAt: t0, Entrants: 3 + i, Winners: 2,
				Document: []byte(`{"order":[]}`)})
			if err != nil {
				e.t.Errorf("SaveDraw: %v", err)
			}
			if ok {
				saved.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if saved.Load() != 1 {
		e.t.Fatalf("%d draws saved, want exactly 1", saved.Load())
	}
	d, err = e.store.Draw(e.ctx, s.ID)
	if err != nil || !d.DrawnAt.Equal(t0) || d.Winners != 2 || d.Entrants < 3 || string(d.Document) != `{"order":[]}` {
		e.t.Fatalf("drawn: %+v %v", d, err)
	}

	fifo := e.sale()
	if _, err := e.store.Draw(e.ctx, fifo.ID); !errors.Is(err, flashsale.ErrNotFound) {
		e.t.Fatalf("draw of a fifo sale: %v", err)
	}
}
