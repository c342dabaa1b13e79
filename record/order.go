package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// Order returns the order with the id, with its SKU, or ErrNotFound.
func (s *Store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	o, err := s.order(ctx, s.d.Reads(), id)
	if err != nil {
		return nil, s.fail(err, "order %s", id)
	}
	return o, nil
}

func (s *Store) order(ctx context.Context, x Statements, id string) (*flashsale.Order, error) {
	return one(x.OrderByID(ctx, id), s.scanOrderRow)
}

// Orders returns the sale's orders, oldest first; none (and no error) for
// a sale without orders or no such sale.
func (s *Store) Orders(ctx context.Context, saleID string) ([]*flashsale.Order, error) {
	var orders []*flashsale.Order
	err := s.d.Reads().Orders(ctx, saleID, collect(&orders, s.scanOrderRow))
	if err != nil {
		return nil, s.fail(err, "orders of sale %s", saleID)
	}
	return orders, nil
}

// orderEventType is the event that reports an order moving to a state.
var orderEventType = map[flashsale.OrderState]flashsale.EventType{
	flashsale.OrderShipped:   flashsale.EventOrderShipped,
	flashsale.OrderCancelled: flashsale.EventOrderCancelled,
	flashsale.OrderRefunded:  flashsale.EventOrderRefunded,
}

// ChangeOrder moves the order to c.To if it is still at c.Version and in a
// state it may leave for c.To (flashsale.OrderFrom), in one transaction:
//
//  1. one conditional UPDATE on id and version; zero rows is the answer
//     (a version conflict, a refused move, or no such order, told apart
//     by reading the row afterwards, never by an error string);
//  2. for cancelled and refunded, the order's reservation moves from
//     confirmed to cancelled with restocked_at set, by a conditional UPDATE
//     whose row count says whether the caller restocks the gate;
//  3. the audit row (order_events);
//  4. the outbox rows: the order event and, when the reservation moved,
//     its reservation.cancelled.
//
// If any statement fails, none of them lands. The state the order left is
// read from the row the UPDATE returns: an order with shipped_at set was
// shipped, since only shipping sets it and refunded is final.
func (s *Store) ChangeOrder(ctx context.Context, c flashsale.OrderChange) (*flashsale.Order, bool, error) {
	from := flashsale.OrderFrom(c.To)
	typ, ok := orderEventType[c.To]
	if len(from) == 0 || !ok {
		return nil, false, flashsale.Errorf(flashsale.CodeBadRequest, "An order cannot be moved to %q.", c.To)
	}
	var (
		ord       *flashsale.Order
		restocked bool
	)
	err := s.d.Tx(ctx, func(x Statements) error {
		restocked = false
		var shippedAt time.Time
		o, err := s.scanOrder(x.MoveOrder(ctx, c, from), s.d.Time(&shippedAt))
		if errors.Is(err, sql.ErrNoRows) {
			return s.orderRefused(ctx, x, c)
		}
		if err != nil {
			return err
		}
		left := flashsale.OrderConfirmed
		if c.To == flashsale.OrderRefunded && !shippedAt.IsZero() {
			left = flashsale.OrderShipped
		}
		var events []flashsale.Event
		if c.To.Restocks() {
			r, err := s.scanReservation(x.EndOrderReservation(ctx, o.ReservationID, c.At))
			switch {
			case err == nil:
				restocked = true
				events = append(events, flashsale.ReservationEvent(flashsale.EventReservationCancelled, r, string(typ), c.At))
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		ev := flashsale.OrderEvent(typ, o, left, c.Actor, c.Reason, restocked, c.At)
		if err := s.insertTransition(ctx, x, o, left, c.Actor, c.Reason, ev.ID, c.At); err != nil {
			return err
		}
		if _, err := x.InsertEvents(ctx, append([]flashsale.Event{ev}, events...)); err != nil {
			return err
		}
		ord = o
		return nil
	})
	if err != nil {
		return nil, false, s.fail(err, "move order %s to %s", c.OrderID, c.To)
	}
	s.eventsWritten()
	return ord, restocked, nil
}

// orderRefused says why the conditional UPDATE of ChangeOrder moved no row,
// from the row as the same transaction reads it.
func (s *Store) orderRefused(ctx context.Context, x Statements, c flashsale.OrderChange) error {
	cur, err := s.order(ctx, x, c.OrderID)
	if err != nil {
		return fmt.Errorf("order %s: %w", c.OrderID, err)
	}
	if cur.Version != c.Version {
		return fmt.Errorf("at version %d (it is at %d): %w", c.Version, cur.Version, flashsale.ErrVersionConflict)
	}
	return flashsale.Errorf(flashsale.CodeInvalidState, "The order is %s; it cannot become %s.", cur.State, c.To)
}

// insertTransition writes the audit row of o's move from from (""
// for its creation) to its state, made by actor.
func (s *Store) insertTransition(ctx context.Context, x Statements, o *flashsale.Order, from flashsale.OrderState, actor, reason, eventID string, at time.Time) error {
	err := x.InsertTransition(ctx, flashsale.OrderTransition{OrderID: o.ID, From: from, To: o.State, Actor: actor,
		Reason: reason, Version: o.Version, At: at, EventID: eventID})
	if err != nil {
		return fmt.Errorf("write the audit row: %w", err)
	}
	return nil
}

// OrderHistory returns the order's audit rows, oldest first; none for an
// order that does not exist.
func (s *Store) OrderHistory(ctx context.Context, orderID string) ([]flashsale.OrderTransition, error) {
	var history []flashsale.OrderTransition
	if err := s.d.Reads().OrderHistory(ctx, orderID, collect(&history, s.scanTransition)); err != nil {
		return nil, s.fail(err, "history of order %s", orderID)
	}
	return history, nil
}
