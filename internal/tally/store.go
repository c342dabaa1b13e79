// Package tally counts the calls a request makes to the record, so that
// the rehearsal (and the server's metrics) can show that the funnel keeps
// its promise: a rejected request costs the database nothing.
//
// A request carries a *Request in its context; Store, wrapped around the
// record, adds one to it for every call made on the request's behalf, and
// counts the calls of no request (the background services) apart.
//
// Overselling is neither prevented nor caused here.
package tally

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// Request counts one request's calls to the record. Safe for concurrent
// use (the purchase path may call the record from more than one
// goroutine for a request).
type Request struct{ calls atomic.Int32 }

// Calls is how many calls to the record the request made.
func (r *Request) Calls() int { return int(r.calls.Load()) }

type requestKey struct{}

// With returns ctx carrying req.
func With(ctx context.Context, req *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

// Detach returns ctx without its request: for work a request does on
// behalf of everyone (filling a shared cache), whose calls count with the
// background work rather than against the request that happened to
// trigger it.
func Detach(ctx context.Context) context.Context {
	if _, ok := ctx.Value(requestKey{}).(*Request); !ok {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, (*Request)(nil))
}

// Store is a record that counts its calls. Every method of flashsale.Store
// is counted, so no call slips past the tally.
type Store struct {
	flashsale.Store
	total      atomic.Int64
	background atomic.Int64
}

// Wrap returns st counting its calls.
func Wrap(st flashsale.Store) *Store { return &Store{Store: st} }

// Total is every call counted; Background those made outside any request.
func (s *Store) Total() int64      { return s.total.Load() }
func (s *Store) Background() int64 { return s.background.Load() }

func (s *Store) note(ctx context.Context) {
	s.total.Add(1)
	if r, _ := ctx.Value(requestKey{}).(*Request); r != nil {
		r.calls.Add(1)
		return
	}
	s.background.Add(1)
}

func (s *Store) CreateSale(ctx context.Context, sale *flashsale.Sale) error {
	s.note(ctx)
	return s.Store.CreateSale(ctx, sale)
}

func (s *Store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	s.note(ctx)
	return s.Store.Sale(ctx, id)
}

func (s *Store) SaleBySKU(ctx context.Context, sku string) (*flashsale.Sale, error) {
	s.note(ctx)
	return s.Store.SaleBySKU(ctx, sku)
}

func (s *Store) Sales(ctx context.Context) ([]*flashsale.Sale, error) {
	s.note(ctx)
	return s.Store.Sales(ctx)
}

func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, version int64) error {
	s.note(ctx)
	return s.Store.UpdateSale(ctx, sale, version)
}

func (s *Store) SetSaleState(ctx context.Context, id string, state flashsale.SaleState, reason string, at time.Time) (*flashsale.Sale, error) {
	s.note(ctx)
	return s.Store.SetSaleState(ctx, id, state, reason, at)
}

func (s *Store) BeginRebuild(ctx context.Context, saleID string, at time.Time) (int64, []flashsale.Hold, error) {
	s.note(ctx)
	return s.Store.BeginRebuild(ctx, saleID, at)
}

func (s *Store) SpentAdmissions(ctx context.Context, saleID string) ([]flashsale.SpentAdmission, error) {
	s.note(ctx)
	return s.Store.SpentAdmissions(ctx, saleID)
}

func (s *Store) SaleTotals(ctx context.Context, saleID string) (flashsale.SaleTotals, error) {
	s.note(ctx)
	return s.Store.SaleTotals(ctx, saleID)
}

func (s *Store) PendingUnits(ctx context.Context, saleID string) (int64, error) {
	s.note(ctx)
	return s.Store.PendingUnits(ctx, saleID)
}

func (s *Store) CreateReservation(ctx context.Context, r *flashsale.Reservation, also ...flashsale.Event) error {
	s.note(ctx)
	return s.Store.CreateReservation(ctx, r, also...)
}

func (s *Store) Reservation(ctx context.Context, id string) (*flashsale.Reservation, error) {
	s.note(ctx)
	return s.Store.Reservation(ctx, id)
}

func (s *Store) ReservationByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Reservation, error) {
	s.note(ctx)
	return s.Store.ReservationByKey(ctx, saleID, userID, key)
}

func (s *Store) ConfirmReservation(ctx context.Context, id, userID, paymentRef string, now time.Time) (*flashsale.Reservation, *flashsale.Order, error) {
	s.note(ctx)
	return s.Store.ConfirmReservation(ctx, id, userID, paymentRef, now)
}

func (s *Store) CancelReservation(ctx context.Context, id, userID string, now time.Time) (*flashsale.Reservation, bool, error) {
	s.note(ctx)
	return s.Store.CancelReservation(ctx, id, userID, now)
}

func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) ([]*flashsale.Reservation, error) {
	s.note(ctx)
	return s.Store.ExpireDue(ctx, now, limit)
}

func (s *Store) VoidReservation(ctx context.Context, r *flashsale.Reservation) (bool, error) {
	s.note(ctx)
	return s.Store.VoidReservation(ctx, r)
}

func (s *Store) Attempts(ctx context.Context, saleID string) ([]flashsale.Attempt, error) {
	s.note(ctx)
	return s.Store.Attempts(ctx, saleID)
}

func (s *Store) ReservationStates(ctx context.Context, saleID string, ids []string) (map[string]flashsale.ReservationState, error) {
	s.note(ctx)
	return s.Store.ReservationStates(ctx, saleID, ids)
}

func (s *Store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	s.note(ctx)
	return s.Store.Order(ctx, id)
}

func (s *Store) Orders(ctx context.Context, saleID string) ([]*flashsale.Order, error) {
	s.note(ctx)
	return s.Store.Orders(ctx, saleID)
}

func (s *Store) ChangeOrder(ctx context.Context, c flashsale.OrderChange) (*flashsale.Order, bool, error) {
	s.note(ctx)
	return s.Store.ChangeOrder(ctx, c)
}

func (s *Store) OrderHistory(ctx context.Context, orderID string) ([]flashsale.OrderTransition, error) {
	s.note(ctx)
	return s.Store.OrderHistory(ctx, orderID)
}

func (s *Store) Draw(ctx context.Context, saleID string) (*flashsale.Draw, error) {
	s.note(ctx)
	return s.Store.Draw(ctx, saleID)
}

func (s *Store) SaveDraw(ctx context.Context, d *flashsale.Draw) (bool, error) {
	s.note(ctx)
	return s.Store.SaveDraw(ctx, d)
}

func (s *Store) AppendEvents(ctx context.Context, events ...flashsale.Event) (int, error) {
	s.note(ctx)
	return s.Store.AppendEvents(ctx, events...)
}

func (s *Store) ClaimEvents(ctx context.Context, c flashsale.EventClaim) ([]*flashsale.OutboxEvent, error) {
	s.note(ctx)
	return s.Store.ClaimEvents(ctx, c)
}

func (s *Store) CompleteEvents(ctx context.Context, token string, ids []string, at time.Time) (int, error) {
	s.note(ctx)
	return s.Store.CompleteEvents(ctx, token, ids, at)
}

func (s *Store) RetryEvent(ctx context.Context, token, id string, retryAt time.Time, cause string) (bool, error) {
	s.note(ctx)
	return s.Store.RetryEvent(ctx, token, id, retryAt, cause)
}

func (s *Store) BuryEvent(ctx context.Context, token, id string, at time.Time, cause string) (bool, error) {
	s.note(ctx)
	return s.Store.BuryEvent(ctx, token, id, at, cause)
}

func (s *Store) BuryAbandoned(ctx context.Context, now time.Time, maxAttempts int) (int, error) {
	s.note(ctx)
	return s.Store.BuryAbandoned(ctx, now, maxAttempts)
}

func (s *Store) ReplayEvent(ctx context.Context, id string, at time.Time) (*flashsale.OutboxEvent, error) {
	s.note(ctx)
	return s.Store.ReplayEvent(ctx, id, at)
}

func (s *Store) OutboxEvent(ctx context.Context, id string) (*flashsale.OutboxEvent, error) {
	s.note(ctx)
	return s.Store.OutboxEvent(ctx, id)
}

func (s *Store) SaleEvents(ctx context.Context, saleID string, limit int) ([]*flashsale.OutboxEvent, error) {
	s.note(ctx)
	return s.Store.SaleEvents(ctx, saleID, limit)
}

func (s *Store) DeadEvents(ctx context.Context, limit int) ([]*flashsale.OutboxEvent, error) {
	s.note(ctx)
	return s.Store.DeadEvents(ctx, limit)
}

func (s *Store) OutboxStats(ctx context.Context, saleID string) (flashsale.OutboxStats, error) {
	s.note(ctx)
	return s.Store.OutboxStats(ctx, saleID)
}

func (s *Store) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	s.note(ctx)
	return s.Store.PurgePublished(ctx, before, limit)
}

func (s *Store) Ping(ctx context.Context) error {
	s.note(ctx)
	return s.Store.Ping(ctx)
}

func (s *Store) IssueInvites(ctx context.Context, sale *flashsale.Sale, hashes []string, by string, at time.Time) error {
	s.note(ctx)
	return s.Store.IssueInvites(ctx, sale, hashes, by, at)
}

func (s *Store) RedeemInvite(ctx context.Context, sale *flashsale.Sale, hash, userID string, at time.Time) (*flashsale.Invite, error) {
	s.note(ctx)
	return s.Store.RedeemInvite(ctx, sale, hash, userID, at)
}

func (s *Store) InviteCounts(ctx context.Context, saleID string) (flashsale.InviteCounts, error) {
	s.note(ctx)
	return s.Store.InviteCounts(ctx, saleID)
}
