package restock

import (
	"context"

	"github.com/flashsale/flashsale"
)

// reconcileChunk bounds the ids of one read of the record.
const reconcileChunk = 1000

// Reconcile compares the holds the gate keeps for a sale with the record
// and finishes what was left halfway: a hold the record has ended
// (expired, cancelled) but the gate still keeps is restocked; one the
// record has voided is voided in the gate; a hold the record never took,
// older than OrphanGrace, is voided in the record (its tombstone) and
// then in the gate. Each step is exactly-once, so reconciling twice, or
// beside a sweeper, changes nothing more. It reports the units returned;
// it stops at the first error of the record or the gate.
func (s *Service) Reconcile(ctx context.Context, sale *flashsale.Sale) (int, error) {
	holds, err := s.cfg.Gate.Holds(ctx, sale.ID)
	if err != nil || len(holds) == 0 {
		return 0, err
	}
	units := 0
	now := s.cfg.Now()
	var epoch int64 // the gate's, read once the first orphan needs it
	for start := 0; start < len(holds); start += reconcileChunk {
		part := holds[start:min(start+reconcileChunk, len(holds))]
		ids := make([]string, len(part))
		for i, h := range part {
			ids[i] = h.ReservationID
		}
		states, err := s.cfg.Record.ReservationStates(ctx, sale.ID, ids)
		if err != nil {
			return units, err
		}
		for _, h := range part {
			state, known := states[h.ReservationID]
			var (
				moved bool
				err   error
			)
			switch {
			case known && state.Live():
				continue
			case known && state == flashsale.ReservationVoided:
				moved, err = s.void(ctx, "reconcile", sale.ID, h)
			case known:
				moved, err = s.restock(ctx, "reconcile", sale.ID, h.ReservationID, h.Quantity)
				if moved {
					s.cfg.Logger.Warn("reconciler finished an interrupted restock",
						"sku", sale.SKU, "reservation", h.ReservationID, "state", state)
				}
			case now.Sub(h.CreatedAt) >= s.cfg.OrphanGrace:
				if epoch == 0 {
					epoch = s.gateEpoch(ctx, sale)
				}
				inserted, rerr := s.cfg.Record.VoidReservation(ctx, tombstone(sale, h, epoch, now))
				if rerr != nil {
					return units, rerr
				}
				if !inserted {
					// The record took the hold after all; leave it.
					continue
				}
				moved, err = s.void(ctx, "reconcile", sale.ID, h)
				if moved {
					s.cfg.Logger.Warn("reconciler voided a hold the record never took",
						"sku", sale.SKU, "reservation", h.ReservationID)
				}
			}
			if err != nil {
				return units, err
			}
			if moved {
				units += h.Quantity
			}
		}
	}
	return units, nil
}
