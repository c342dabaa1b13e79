package flashsale

import (
	"context"
	"time"
)

// Draw is a random or lottery sale's draw as the record keeps it. The seed
// is secret until DrawnAt is set: only its commitment (Sale.SeedCommitment)
// is published before.
type Draw struct {
	SaleID string
	Seed   []byte
	// DrawnAt is zero until the draw has run.
	DrawnAt time.Time
	// Entrants is how many took part; Winners how many a lottery selected.
	Entrants int
	Winners  int
	// Document is the published draw (JSON): the entrants' pseudonyms and
	// the order, for anyone to recompute.
	Document []byte
}

// DrawStore keeps draws in the record.
type DrawStore interface {
	// Draw returns the sale's draw, or ErrNotFound for a sale without one
	// (a fifo sale).
	Draw(ctx context.Context, saleID string) (*Draw, error)

	// SaveDraw records the outcome of the sale's draw (DrawnAt, Entrants,
	// Winners, Document) if it has not run yet, and reports whether this
	// call did: a draw happens once, whichever server runs it.
	SaveDraw(ctx context.Context, d *Draw) (bool, error)
}
