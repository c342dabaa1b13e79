package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// Restored is what Restore did to one sale.
type Restored struct {
	Sale *flashsale.Sale
	// Reopened is true for a sale that sells again: open (or scheduled
	// past its opening) before the restart, or paused only because the
	// gate failed (flashsale.GatePause), which the rebuild cured.
	// False for a sale an operator or the invariant watcher paused: it
	// stays paused with its reason, its counter rebuilt, so that a resume
	// needs no rebuild.
	Reopened bool
	// Holds is how many live holds the record gave the gate; Spent how
	// many admissions (turns taken).
	Holds, Spent int
}

// Restore rebuilds an empty in-process gate from the record when the
// process starts, so that a restart is a non-event: every sale that was
// open is open again, without an operator, with its counter, holds,
// buyers, instruments, idempotency keys and spent admissions exactly as the
// record has them. It is safe because the process is then the in-process
// gate's only writer; a gate shared with other servers (Redis) that lost
// its keys must instead fail closed for the operator's rebuild, since the
// others may still be selling on what it lost.
//
// Every sale that is not closed and has opened (or was paused) is rebuilt
// like Rebuild does: a new epoch (which refuses admissions issued before
// the restart: the waiting room hands each place the same admission again,
// under the new epoch) and the record's live holds and spends. A sale not
// yet open is left to the Warmer, which loads it before it opens. A sale
// that cannot be rebuilt (its holds take more than its stock, the record
// does not answer) is left unloaded: the Warmer then fails it closed. It
// returns what it did, sale by sale, and the errors it met, joined.
//
// Call it before the Warmer's first round and before serving; it is not
// safe to run beside reserves of the sales it rebuilds.
func (s *Service) Restore(ctx context.Context) ([]Restored, error) {
	sales, err := s.catalog.Active(ctx)
	if err != nil {
		return nil, fmt.Errorf("control: restore the gate: list the sales: %w", err)
	}
	now := s.now()
	var (
		done []Restored
		errs []error
	)
	for _, sale := range sales {
		if sale.State == flashsale.SaleScheduled && now.Before(sale.OpensAt) {
			continue
		}
		r, err := s.restore(ctx, sale)
		if err != nil {
			s.logger.Error("control: restore the gate: the sale stays unloaded and fails closed", "sku", sale.SKU, "err", err)
			errs = append(errs, fmt.Errorf("restore %s: %w", sale.SKU, err))
			continue
		}
		s.logger.Info("sale restored from the record", "sku", sale.SKU, "sale", sale.ID, "epoch", r.Sale.Epoch,
			"reopened", r.Reopened, "state", r.Sale.State, "reason", r.Sale.PauseReason, "holds", r.Holds, "spent", r.Spent)
		done = append(done, r)
	}
	return done, errors.Join(errs...)
}

func (s *Service) restore(ctx context.Context, sale *flashsale.Sale) (Restored, error) {
	epoch, holds, err := s.store.BeginRebuild(ctx, sale.ID, s.now())
	if err != nil {
		return Restored{}, err
	}
	spent, err := s.store.SpentAdmissions(ctx, sale.ID)
	if err != nil {
		return Restored{}, err
	}
	// Rebuild leaves the gate paused.
	if err := s.gate.Rebuild(ctx, sale.ID, int64(sale.InitialStock), epoch, holds, spent, s.source+" restore"); err != nil {
		return Restored{}, err
	}
	r := Restored{Holds: len(holds), Spent: len(spent)}
	switch {
	case sale.State != flashsale.SalePaused:
		if err := s.gate.SetPaused(ctx, sale.ID, false, s.source+" restore"); err != nil {
			return Restored{}, err
		}
		r.Reopened = true
		r.Sale, err = s.store.Sale(ctx, sale.ID)
		if err != nil {
			return Restored{}, err
		}
		s.catalog.Put(r.Sale)
	case flashsale.GatePause(sale.PauseReason):
		// The record says paused because the gate failed; the gate is
		// whole again. Resume checks it as it would an operator's.
		if r.Sale, err = s.Resume(ctx, sale.SKU); err != nil {
			return Restored{}, err
		}
		r.Reopened = true
	default:
		r.Sale, err = s.store.Sale(ctx, sale.ID)
		if err != nil {
			return Restored{}, err
		}
		s.catalog.Put(r.Sale)
		s.metrics.SalePaused(sale.SKU, PauseCause(sale.PauseReason)) // a new process's gauge starts at zero
	}
	return r, nil
}
