// Package purchase is the bottom of the funnel: reserve, confirm, cancel. It
// runs the checks in the contract's order (idempotency, admission,
// eligibility, rate, pause), asks the stock gate for the one atomic
// decision, and writes only the winners to the record. When the record
// write fails after the gate said yes, the units go back through the same
// exactly-once give-back as an expired hold (package restock): the record
// decides, by inserting a tombstone, and only then does the gate give the
// units back.
//
// Overselling is not prevented here but in the gate this package asks
// (packages memory and redis), in one atomic step; this package never writes
// the counter. Units it must give back (a hold the record did not take, a
// shopper's cancel) go through package restock, where overselling could be
// caused.
package purchase

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/logsample"
	"github.com/flashsale/flashsale/internal/window"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/restock"
	"github.com/flashsale/flashsale/token"
)

// Store is the part of the record the purchase path uses.
type Store interface {
	CreateReservation(ctx context.Context, r *flashsale.Reservation, also ...flashsale.Event) error
	Reservation(ctx context.Context, id string) (*flashsale.Reservation, error)
	ReservationByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Reservation, error)
	ConfirmReservation(ctx context.Context, id, userID, paymentRef string, now time.Time) (*flashsale.Reservation, *flashsale.Order, error)
}

// Limiter spends a shopper's request budget for a sale; nil allows all.
// It is keyed on what costs an attacker money (account, payment
// instrument), never on a network address.
type Limiter interface {
	Allow(ctx context.Context, saleID, userID, instrument string, now time.Time) (retryAfter time.Duration, ok bool, err error)
}

// Config configures a Service. Gate, Store, Restock and Tokens are
// required.
type Config struct {
	Gate  flashsale.Gate
	Store Store
	// Restock gives back the units of holds the record did not take and
	// of cancelled reservations; the gate above cannot.
	Restock *restock.Service
	Tokens  *token.Keyring
	Limiter Limiter
	// FailClosed pauses a sale whose gate has no counter for it.
	FailClosed func(ctx context.Context, saleID, reason string)
	// GateFailed is told of a gate call that failed; it pauses the sale
	// if the gate is unreachable (see control.Service.GateFailed).
	GateFailed func(ctx context.Context, saleID string, cause error)
	// Suspect holds a shopper under the automation policy (one who keeps
	// hitting the rate limits); nil holds no one.
	Suspect func(ctx context.Context, saleID, userID, reason string)
	// SuspectAfter is how many rate-limited reserves in an hour mark a
	// shopper (default 10).
	SuspectAfter int
	// Decided is told of every reserve the gate was asked about: how long
	// the gate and record took, and whether either failed. The waiting
	// room's pacer admits by it.
	Decided func(ctx context.Context, sale *flashsale.Sale, latency time.Duration, failed bool)
	Now     func() time.Time
	// GateTimeout bounds one gate call (default 500ms), so that an
	// unreachable gate fails the sale closed within a second.
	GateTimeout time.Duration
	// RecordTimeout bounds one record write (default 3s).
	RecordTimeout time.Duration
	// AnswerTTL is how long a rejection is replayed for its idempotency
	// key (default 10m); AnswerLimit bounds how many are kept (default 1M).
	AnswerTTL   time.Duration
	AnswerLimit int
	// SharedAnswers, when set, keeps the remembered rejections for every
	// server of the fleet as well (see SharedAnswers).
	SharedAnswers SharedAnswers
	Logger        *slog.Logger
	Metrics       *metrics.Metrics
}

// Service is the purchase path. Safe for concurrent use.
type Service struct {
	cfg     Config
	answers *answerCache
	flight  singleflight.Group
	limited *window.Counter
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.GateTimeout <= 0 {
		cfg.GateTimeout = 500 * time.Millisecond
	}
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = 3 * time.Second
	}
	if cfg.AnswerTTL <= 0 {
		cfg.AnswerTTL = 10 * time.Minute
	}
	if cfg.AnswerLimit <= 0 {
		cfg.AnswerLimit = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FailClosed == nil {
		cfg.FailClosed = func(context.Context, string, string) {}
	}
	if cfg.GateFailed == nil {
		cfg.GateFailed = func(context.Context, string, error) {}
	}
	if cfg.Decided == nil {
		cfg.Decided = func(context.Context, *flashsale.Sale, time.Duration, bool) {}
	}
	if cfg.SuspectAfter <= 0 {
		cfg.SuspectAfter = 10
	}
	return &Service{cfg: cfg, answers: newAnswerCache(cfg.AnswerLimit, cfg.AnswerTTL), limited: window.New(time.Hour)}
}

// ReserveRequest is a shopper's reserve, after the HTTP layer has checked
// its shape and authenticated the shopper.
type ReserveRequest struct {
	Sale *flashsale.Sale
	// UserID and AccountCreated come from the verified shopper JWT;
	// AccountCreated is zero when the token lacks acct_created.
	UserID         string
	AccountCreated time.Time
	AdmissionToken string
	IdempotencyKey string
	Quantity       int
	// PaymentFingerprint is the payment instrument the per-instrument
	// limits count: the JWT's claim, or the body's value where the server
	// trusts the client's (the HTTP layer decides); "" for none.
	PaymentFingerprint string
	// IgnoredFingerprint is a paymentFingerprint the client sent that
	// counts for nothing (the server does not trust the client's and the
	// JWT carries none). The request's hash still covers it, so the same
	// Idempotency-Key with another body is told so (422) all the same.
	IgnoredFingerprint string
}

// Hash identifies req among the reserves of its key: RequestHash of its
// sale, quantity and fingerprint (the counted one, else the ignored one).
func (req *ReserveRequest) Hash() string {
	fp := req.PaymentFingerprint
	if fp == "" {
		fp = req.IgnoredFingerprint
	}
	return RequestHash(req.Sale.ID, req.Quantity, fp)
}

// Check validates the request's own shape, which the contract checks
// before anything else (even authentication): the idempotency key, the
// quantity against the sale's per-user limit, the fingerprint.
func Check(sale *flashsale.Sale, key string, quantity int, fingerprint string) error {
	switch {
	case key == "":
		return flashsale.Errorf(flashsale.CodeBadRequest, "The Idempotency-Key header is required.")
	case !printable(key, 255):
		return flashsale.Errorf(flashsale.CodeBadRequest, "Idempotency-Key must be 1 to 255 visible ASCII characters.")
	case quantity < 1 || quantity > sale.PerUserLimit:
		return flashsale.Errorf(flashsale.CodeBadRequest, "quantity must be a whole number from 1 to %d.", sale.PerUserLimit)
	case fingerprint != "" && !flashsale.ValidInstrument(fingerprint):
		return flashsale.Errorf(flashsale.CodeBadRequest, "paymentFingerprint must be 1 to %d visible ASCII characters.", flashsale.MaxInstrumentLen)
	}
	return nil
}

func printable(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// RequestHash identifies what a reserve asked for, so that a key reused
// for a different request is told so (422) instead of replayed.
func RequestHash(saleID string, quantity int, fingerprint string) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{saleID, fingerprint} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	binary.BigEndian.PutUint64(n[:], uint64(quantity))
	h.Write(n[:])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Errors of the purchase path that carry a Retry-After.
func errPaused(reason string) error {
	msg := "The sale is paused; please keep your place and try again shortly."
	if reason != "" {
		msg = "The sale is paused: " + reason + "."
	}
	return &flashsale.Error{Code: flashsale.CodeSalePaused, Message: msg, RetryAfter: 5 * time.Second}
}

func errUnavailable(err error) error {
	return &flashsale.Error{Code: flashsale.CodeUnavailable,
		Message:    "We could not confirm your reservation yet; repeat the request with the same Idempotency-Key.",
		RetryAfter: time.Second, Err: err}
}

// Reserve runs the funnel's last checks and, for a winner, writes the hold
// to the record. A rejection is a *flashsale.Error with its contract code.
// A reserve repeated with the same idempotency key and request replays the
// first answer.
func (s *Service) Reserve(ctx context.Context, req ReserveRequest) (*flashsale.Reservation, error) {
	sale := req.Sale
	hash := req.Hash()
	ansKey := answerKey(sale.ID, req.UserID, req.IdempotencyKey)

	// The key is looked up before any other check, so that a replay whose
	// admission token is already spent still gets its first answer.
	if a, ok := s.answers.get(ansKey, s.cfg.Now()); ok {
		if a.hash != hash {
			return nil, errKeyReused()
		}
		return nil, a.err
	}

	// Concurrent uses of one key in this process share one flight, so
	// they all get the first one's answer; across processes the gate's
	// idempotency entry and the wait in replay do the same.
	v, err, _ := s.flight.Do(ansKey+"\x00"+hash, func() (any, error) {
		hold, found, err := s.lookup(ctx, sale, req.UserID, req.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		if found {
			if hold.RequestHash != hash {
				return nil, errKeyReused()
			}
			return s.replay(ctx, sale, hold)
		}
		// Asked after the gate, not before: a gate that does not answer
		// has failed the request already, and the sale fails closed in
		// one timeout, not two.
		if a, ok := s.sharedAnswer(ctx, ansKey); ok {
			s.answers.put(ansKey, a, s.cfg.Now())
			if a.hash != hash {
				return nil, errKeyReused()
			}
			return nil, a.err
		}
		if sale.Epoch > 1 || sale.StateAt(s.cfg.Now()) == flashsale.SaleClosed {
			// A rebuild gives the gate the keys of live holds only, so a
			// key whose hold ended before it is known to the record
			// alone; and a closed sale's keys leave the gate when it is
			// retired (control.Retirer). Only rebuilt and closed sales pay
			// for this read.
			prior, err := s.cfg.Store.ReservationByKey(ctx, sale.ID, req.UserID, req.IdempotencyKey)
			switch {
			case err == nil && prior.State != flashsale.ReservationVoided:
				if prior.RequestHash != hash {
					return nil, errKeyReused()
				}
				return prior, nil
			case err != nil && !errors.Is(err, flashsale.ErrNotFound):
				return nil, errUnavailable(err)
			}
		}
		r, err := s.attempt(ctx, req, hash)
		if err != nil && remembered(err) {
			s.remember(ctx, ansKey, answer{hash: hash, err: err})
		}
		return r, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*flashsale.Reservation), nil
}

// sharedAnswer reads the fleet's memory of the key's first answer, when
// there is one. If it cannot be read, the request goes on to the gate: an
// answer decided again is the worst that can come of it, and a gate that
// does not answer either fails the sale closed.
func (s *Service) sharedAnswer(ctx context.Context, key string) (answer, bool) {
	if s.cfg.SharedAnswers == nil {
		return answer{}, false
	}
	gctx, cancel := context.WithTimeout(ctx, s.cfg.GateTimeout)
	defer cancel()
	v, ok, err := s.cfg.SharedAnswers.Answer(gctx, key)
	if err != nil || !ok {
		return answer{}, false
	}
	return decodeAnswer(v)
}

// remember keeps a final rejection for its key, in this process and, when
// there is one, in the fleet's memory, where the first answer kept wins.
func (s *Service) remember(ctx context.Context, key string, a answer) {
	s.answers.put(key, a, s.cfg.Now())
	if s.cfg.SharedAnswers == nil {
		return
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GateTimeout)
	defer cancel()
	if err := s.cfg.SharedAnswers.Remember(gctx, key, a.encode(), s.cfg.AnswerTTL); err != nil {
		if n, ok := writeFailures.Allow(sharedAnswerKey{s.cfg.Logger}, s.cfg.Now()); ok {
			s.cfg.Logger.Warn("purchase: could not keep a rejection for the fleet; a repeat on another server is decided again",
				"err", err, "suppressed", n)
		}
	}
}

// sharedAnswerKey samples the warnings of remember apart from the errors
// of record writes.
type sharedAnswerKey struct{ logger *slog.Logger }

// remembered reports whether a rejection is final enough to replay for its
// key: the gate's verdicts are; a pause, an outage or a rate limit asks
// the client to come back, so it is not.
func remembered(err error) bool {
	switch flashsale.ErrorCode(err) {
	case flashsale.CodeSoldOut, flashsale.CodeLimitReached, flashsale.CodeAdmissionUsed:
		return true
	}
	return false
}

func errKeyReused() error {
	return flashsale.Errorf(flashsale.CodeIdempotencyKeyReused,
		"This Idempotency-Key was used with a different request; use a new key for a new request.")
}

func (s *Service) attempt(ctx context.Context, req ReserveRequest, hash string) (res *flashsale.Reservation, err error) {
	sale := req.Sale
	// Millisecond precision: what the stores keep, so a replay's body is
	// byte for byte the first answer's.
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)

	// Admission: the token says the waiting room let this shopper in.
	if req.AdmissionToken == "" {
		return nil, flashsale.Errorf(flashsale.CodeAdmissionRequired,
			"Reserving needs an admission token from the waiting room (X-Admission-Token).")
	}
	adm, err := s.cfg.Tokens.VerifyAdmission(req.AdmissionToken, now)
	switch {
	case errors.Is(err, token.ErrExpired) && adm.UserID == req.UserID && adm.SaleID == sale.ID:
		return nil, flashsale.Errorf(flashsale.CodeAdmissionExpired,
			"Your admission has expired; check your place in the waiting room again.")
	case err != nil, adm.UserID != req.UserID, adm.SaleID != sale.ID:
		return nil, flashsale.Errorf(flashsale.CodeAdmissionInvalid,
			"The admission token is not valid for this shopper and sale.")
	}

	// Eligibility: cheap checks on this shopper alone, no contended work.
	if min := sale.MinAccountAge(); min > 0 {
		if req.AccountCreated.IsZero() {
			return nil, flashsale.Errorf(flashsale.CodeNotEligible,
				"This sale needs the account's creation time, which your sign-in does not carry.")
		}
		if now.Sub(req.AccountCreated) < min {
			return nil, flashsale.Errorf(flashsale.CodeNotEligible,
				"This sale is open to accounts older than %s.", min)
		}
	}
	if sale.RequireInstrument && req.PaymentFingerprint == "" {
		return nil, flashsale.Errorf(flashsale.CodeNotEligible,
			"This sale needs the payment instrument your sign-in vouches for, which it does not carry.")
	}
	if s.cfg.Limiter != nil {
		retry, ok, err := s.cfg.Limiter.Allow(ctx, sale.ID, req.UserID, req.PaymentFingerprint, now)
		if err != nil {
			return nil, errUnavailable(err)
		}
		if !ok {
			if s.limited.Add(sale.ID, req.UserID, now) == s.cfg.SuspectAfter+1 && s.cfg.Suspect != nil {
				s.cfg.Suspect(ctx, sale.ID, req.UserID, "kept hitting the purchase rate limits")
			}
			return nil, &flashsale.Error{Code: flashsale.CodeRateLimited,
				Message: "Too many requests for this account or payment instrument; wait and try again.", RetryAfter: retry}
		}
	}

	switch sale.StateAt(now) {
	case flashsale.SalePaused:
		return nil, errPaused(sale.PauseReason)
	case flashsale.SaleScheduled:
		return nil, &flashsale.Error{Code: flashsale.CodeNotOpen, Message: "The sale has not opened yet.",
			RetryAfter: retryUntil(sale.OpensAt, now)}
	case flashsale.SaleClosed:
		return nil, flashsale.Errorf(flashsale.CodeClosed, "The sale has closed.")
	}

	// The gate: one atomic step decides.
	res = &flashsale.Reservation{
		ID:                 flashsale.NewID("res_"),
		SaleID:             sale.ID,
		SKU:                sale.SKU,
		UserID:             req.UserID,
		Quantity:           req.Quantity,
		State:              flashsale.ReservationPending,
		PaymentFingerprint: req.PaymentFingerprint,
		IdempotencyKey:     req.IdempotencyKey,
		RequestHash:        hash,
		AdmissionID:        adm.ID,
		AccountCreated:     req.AccountCreated,
		CreatedAt:          now,
		ExpiresAt:          now.Add(sale.Hold()),
		Version:            1,
	}
	asked, failed := time.Now(), false
	defer func() { s.cfg.Decided(ctx, sale, time.Since(asked), failed) }()
	out, err := s.gateReserve(ctx, flashsale.GateReserve{
		SaleID:         sale.ID,
		ReservationID:  res.ID,
		UserID:         req.UserID,
		Quantity:       req.Quantity,
		Instrument:     req.PaymentFingerprint,
		AdmissionID:    adm.ID,
		Epoch:          adm.Epoch,
		IdempotencyKey: req.IdempotencyKey,
		RequestHash:    hash,
		Now:            now,
	})
	if err != nil {
		failed = true
		s.cfg.GateFailed(ctx, sale.ID, err)
		return nil, errPaused(flashsale.PauseGateUnreachable)
	}
	switch out.Verdict {
	case flashsale.VerdictWon:
	case flashsale.VerdictReplayed:
		if out.Hold.RequestHash != hash {
			return nil, errKeyReused()
		}
		return s.replay(ctx, sale, out.Hold)
	case flashsale.VerdictKeyReused:
		return nil, errKeyReused()
	case flashsale.VerdictNotLoaded:
		s.cfg.FailClosed(ctx, sale.ID, flashsale.PauseGateNoCounter)
		return nil, errPaused(flashsale.PauseGateNoCounter)
	case flashsale.VerdictPaused:
		return nil, errPaused("")
	case flashsale.VerdictStaleEpoch:
		return nil, flashsale.Errorf(flashsale.CodeAdmissionExpired,
			"The sale was restarted since you were admitted; check your place in the waiting room again.")
	case flashsale.VerdictAdmissionUsed:
		return nil, flashsale.Errorf(flashsale.CodeAdmissionUsed, "This admission token was already used.")
	case flashsale.VerdictSoldOut:
		return nil, flashsale.Errorf(flashsale.CodeSoldOut, "Sold out: no stock is left.")
	case flashsale.VerdictLimitReached:
		return nil, flashsale.Errorf(flashsale.CodeLimitReached,
			"You, or this payment instrument, already hold or bought this sale's limit.")
	default:
		return nil, fmt.Errorf("purchase: unknown gate verdict %v", out.Verdict)
	}

	// The record: only winners get here.
	res.Epoch = out.Epoch
	hold := out.Hold
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RecordTimeout)
	defer cancel()
	// The win that left nothing took the last unit: exactly one reserve
	// sees that, per sell-out, whichever server it ran on. Its sale.sold_out
	// is written with its hold, in the same statement, so the event exists
	// exactly when the hold that caused it does; a hold voided below takes
	// its sell-out with it, and a rejection never writes.
	var also []flashsale.Event
	if out.Remaining == 0 {
		also = append(also, flashsale.SaleSoldOutEvent(sale, res.ID, now))
	}
	err = s.cfg.Store.CreateReservation(rctx, res, also...)
	switch {
	case err == nil:
		s.cfg.Metrics.Reserved(sale.SKU, res.Quantity)
		return res, nil
	case errors.Is(err, flashsale.ErrDuplicate):
		// The gate let through what the record's unique indexes refuse: an
		// earlier reservation under this key (the gate's memory of it was
		// rebuilt away), or a live hold of this shopper or instrument. The
		// record is the truth; the new hold goes back.
		s.cfg.Restock.Void(rctx, sale, hold, out.Epoch)
		if prior, perr := s.cfg.Store.ReservationByKey(rctx, sale.ID, req.UserID, req.IdempotencyKey); perr == nil &&
			prior.State != flashsale.ReservationVoided {
			if prior.RequestHash != hash {
				return nil, errKeyReused()
			}
			return prior, nil
		}
		return nil, flashsale.Errorf(flashsale.CodeLimitReached,
			"You, or this payment instrument, already hold or bought this sale's limit.")
	case errors.Is(err, flashsale.ErrStaleEpoch):
		// The gate was rebuilt from the record while this hold was in
		// flight; the rebuild did not count it.
		s.cfg.Restock.Void(rctx, sale, hold, out.Epoch)
		return nil, errPaused("the sale's counter was rebuilt")
	default:
		failed = true
		// A record that fails, fails for every winner: one line a second.
		if n, ok := writeFailures.Allow(s.cfg.Logger, now); ok {
			s.cfg.Logger.Error("purchase: record write failed after the gate said yes",
				"sku", sale.SKU, "reservation", res.ID, "err", err, "suppressed", n)
		}
		s.cfg.Restock.Void(rctx, sale, hold, out.Epoch)
		return nil, errUnavailable(err)
	}
}

// writeFailures samples the ERROR lines of failed record writes, per
// logger.
var writeFailures logsample.Sampler

// replay answers a repeated reserve with the reservation its key made.
func (s *Service) replay(ctx context.Context, sale *flashsale.Sale, hold flashsale.Hold) (*flashsale.Reservation, error) {
	r, err := s.cfg.Store.Reservation(ctx, hold.ReservationID)
	switch {
	case err == nil && r.State != flashsale.ReservationVoided:
		return r, nil
	case err == nil:
		// Voided in the record, but the gate still remembers the key: the
		// void stopped between its two steps. Finish it; the shopper's next
		// try is a fresh attempt.
		if _, err := s.cfg.Restock.FinishVoid(ctx, sale.ID, hold); err != nil {
			return nil, errUnavailable(err)
		}
		return nil, errUnavailable(errors.New("voided hold"))
	case errors.Is(err, flashsale.ErrNotFound):
		// The first request is still writing (on another server), or gave
		// up without a tombstone. Wait for the writer while it may still
		// be writing; past its deadline the hold is an orphan: void it
		// here rather than make the shopper wait for the reconciler.
		if r, ok := s.awaitRecord(ctx, hold); ok {
			return r, nil
		}
		if s.cfg.Now().Sub(hold.CreatedAt) > s.cfg.RecordTimeout+time.Second {
			// The gate's answer that took the hold is long gone: the
			// tombstone takes the gate's epoch (epoch 0).
			s.cfg.Restock.Void(ctx, sale, hold, 0)
		}
		return nil, errUnavailable(errors.New("reservation not yet in the record"))
	default:
		return nil, errUnavailable(err)
	}
}

// awaitRecord waits, at most until the first writer's deadline, for the
// reservation of a hold to reach the record.
func (s *Service) awaitRecord(ctx context.Context, hold flashsale.Hold) (*flashsale.Reservation, bool) {
	deadline := hold.CreatedAt.Add(s.cfg.RecordTimeout)
	// Bounded in real time too, whatever the injected clock says.
	giveUp := time.Now().Add(s.cfg.RecordTimeout)
	wait := 5 * time.Millisecond
	for s.cfg.Now().Before(deadline) && time.Now().Before(giveUp) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false
		case <-t.C:
		}
		r, err := s.cfg.Store.Reservation(ctx, hold.ReservationID)
		if err == nil && r.State != flashsale.ReservationVoided {
			return r, true
		}
		if err != nil && !errors.Is(err, flashsale.ErrNotFound) {
			return nil, false
		}
		wait = min(wait*2, 100*time.Millisecond)
	}
	return nil, false
}

func (s *Service) lookup(ctx context.Context, sale *flashsale.Sale, userID, key string) (flashsale.Hold, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GateTimeout)
	defer cancel()
	start := time.Now()
	h, found, err := s.cfg.Gate.Lookup(ctx, sale.ID, userID, key)
	s.cfg.Metrics.Gate("lookup", time.Since(start), err)
	if err != nil {
		s.cfg.GateFailed(ctx, sale.ID, err)
		return h, false, errPaused(flashsale.PauseGateUnreachable)
	}
	return h, found, nil
}

func (s *Service) gateReserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	// The call is not cancelled with the client: once asked, the gate's
	// answer must be heard, or a won hold would be orphaned.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GateTimeout)
	defer cancel()
	start := time.Now()
	out, err := s.cfg.Gate.Reserve(ctx, r)
	s.cfg.Metrics.Gate("reserve", time.Since(start), err)
	return out, err
}

// Reservation returns the shopper's reservation; another shopper's, or a
// voided one, is flashsale.ErrNotFound.
func (s *Service) Reservation(ctx context.Context, userID, id string) (*flashsale.Reservation, error) {
	r, err := s.cfg.Store.Reservation(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.UserID != userID || r.State == flashsale.ReservationVoided {
		return nil, flashsale.ErrNotFound
	}
	return r, nil
}

// Confirm turns the shopper's pending reservation into an order after
// payment; repeating it returns the same order.
func (s *Service) Confirm(ctx context.Context, userID, id, paymentRef string) (*flashsale.Order, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RecordTimeout)
	defer cancel()
	_, order, err := s.cfg.Store.ConfirmReservation(ctx, id, userID, paymentRef, s.cfg.Now())
	return order, err
}

// Cancel cancels the shopper's pending reservation; its units go back to
// stock exactly once, however often it is repeated (restock.Service.Cancel).
func (s *Service) Cancel(ctx context.Context, userID, id string) (*flashsale.Reservation, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RecordTimeout)
	defer cancel()
	return s.cfg.Restock.Cancel(ctx, id, userID)
}

func retryUntil(t, now time.Time) time.Duration {
	d := t.Sub(now)
	if d < time.Second {
		return time.Second
	}
	return d
}
