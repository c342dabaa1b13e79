package record

import (
	"database/sql"
	"errors"

	"github.com/flashsale/flashsale"
)

// The column lists of the rows the Store reads, in the order it scans
// them: a statement that returns a sale, a reservation, an order or an
// event selects (or returns) exactly these. They live beside the scans so
// that a column is added to both at once.
const (
	// SaleColumns is a sale_events row.
	SaleColumns = `sale_id, sku, name, initial_stock, opens_at, closes_at,
	hold_seconds, per_user_limit, fairness, registration_closes_at,
	admission_per_second, min_account_age_seconds, challenge_bits, shards,
	state, pause_reason, paused_at, epoch, seed_commitment, version,
	created_at, updated_at, require_instrument, display,
	notified_admission_seconds`

	// ReservationColumns is a reservation: r is its reservations row (or a
	// CTE named r), s its sale and o its order, as ReservationJoins
	// joins them.
	ReservationColumns = `r.reservation_id, r.sale_id, s.sku, r.user_id,
	r.quantity, r.state, r.payment_fingerprint, r.idempotency_key,
	r.request_hash, r.epoch, r.created_at, r.expires_at, r.restocked_at,
	r.confirmed_at, r.version, o.order_id`

	// ReservationJoins completes FROM reservations r for
	// ReservationColumns.
	ReservationJoins = `
	JOIN sale_events s ON s.sale_id = r.sale_id
	LEFT JOIN orders o ON o.reservation_id = r.reservation_id`

	// OrderColumns is an order: o is its orders row (or a CTE named o)
	// and s its sale, as OrderJoins joins them.
	OrderColumns = `o.order_id, o.reservation_id, o.sale_id, s.sku, o.user_id,
	o.quantity, o.state, o.payment_ref, o.version, o.created_at, o.updated_at`

	// OrderJoins completes FROM orders o for OrderColumns.
	OrderJoins = `
	JOIN sale_events s ON s.sale_id = o.sale_id`

	// EventColumns is an outbox row.
	EventColumns = `event_id, topic, sale_id, payload, created_at, attempts,
	next_attempt_at, claim_token, claimed_by, claimed_at, published_at,
	dead_at, last_error`
)

func (s *Store) scanSale(row Row) (*flashsale.Sale, error) {
	var (
		sale            flashsale.Sale
		fairness, state string
	)
	t := s.d.Time
	err := row.Scan(&sale.ID, &sale.SKU, &sale.Name, &sale.InitialStock, t(&sale.OpensAt), t(&sale.ClosesAt),
		&sale.HoldSeconds, &sale.PerUserLimit, &fairness, t(&sale.RegistrationClosesAt),
		&sale.AdmissionPerSecond, &sale.MinAccountAgeSeconds, &sale.ChallengeBits, &sale.Shards,
		&state, &sale.PauseReason, t(&sale.PausedAt), &sale.Epoch, &sale.SeedCommitment, &sale.Version,
		t(&sale.CreatedAt), t(&sale.UpdatedAt), &sale.RequireInstrument, &sale.Display,
		&sale.NotifiedAdmissionSeconds)
	if err != nil {
		return nil, err
	}
	sale.Fairness = flashsale.Fairness(fairness)
	sale.State = flashsale.SaleState(state)
	return &sale, nil
}

func (s *Store) scanReservation(row Row) (*flashsale.Reservation, error) {
	var (
		r                         flashsale.Reservation
		state                     string
		instr, key, hash, orderID sql.NullString
	)
	t := s.d.Time
	err := row.Scan(&r.ID, &r.SaleID, &r.SKU, &r.UserID,
		&r.Quantity, &state, &instr, &key,
		&hash, &r.Epoch, t(&r.CreatedAt), t(&r.ExpiresAt), t(&r.RestockedAt),
		t(&r.ConfirmedAt), &r.Version, &orderID)
	if err != nil {
		return nil, err
	}
	r.State = flashsale.ReservationState(state)
	r.PaymentFingerprint, r.IdempotencyKey, r.RequestHash = instr.String, key.String, hash.String
	r.OrderID = orderID.String
	return &r, nil
}

// scanOrder reads OrderColumns, then into extra any columns that follow
// them.
func (s *Store) scanOrder(row Row, extra ...any) (*flashsale.Order, error) {
	var (
		o     flashsale.Order
		state string
	)
	t := s.d.Time
	err := row.Scan(append([]any{&o.ID, &o.ReservationID, &o.SaleID, &o.SKU, &o.UserID,
		&o.Quantity, &state, &o.PaymentRef, &o.Version, t(&o.CreatedAt), t(&o.UpdatedAt)}, extra...)...)
	if err != nil {
		return nil, err
	}
	o.State = flashsale.OrderState(state)
	return &o, nil
}

// scanOrderRow reads OrderColumns alone.
func (s *Store) scanOrderRow(row Row) (*flashsale.Order, error) { return s.scanOrder(row) }

func (s *Store) scanEvent(row Row) (*flashsale.OutboxEvent, error) {
	var (
		e              flashsale.OutboxEvent
		topic, payload string
		token, by      sql.NullString
	)
	t := s.d.Time
	err := row.Scan(&e.ID, &topic, &e.SaleID, &payload, t(&e.CreatedAt), &e.Attempts,
		t(&e.NextAttemptAt), &token, &by, t(&e.ClaimedAt), t(&e.PublishedAt),
		t(&e.DeadAt), &e.LastError)
	if err != nil {
		return nil, err
	}
	e.Type = flashsale.EventType(topic)
	e.Payload = []byte(payload)
	e.OccurredAt = e.CreatedAt
	e.ClaimToken, e.ClaimedBy = token.String, by.String
	return &e, nil
}

func (s *Store) scanHold(row Row) (flashsale.Hold, error) {
	var (
		h                flashsale.Hold
		instr, key, hash sql.NullString
	)
	err := row.Scan(&h.ReservationID, &h.UserID, &h.Quantity, &instr, &key, &hash, s.d.Time(&h.CreatedAt))
	h.Instrument, h.IdempotencyKey, h.RequestHash = instr.String, key.String, hash.String
	return h, err
}

func (s *Store) scanAttempt(row Row) (flashsale.Attempt, error) {
	var (
		a                      flashsale.Attempt
		instr, orderID, ostate sql.NullString
		state                  string
		version                sql.NullInt64
	)
	t := s.d.Time
	err := row.Scan(&a.ReservationID, &a.UserID, &instr, &a.Quantity, &state, t(&a.CreatedAt), t(&a.AccountCreated),
		&orderID, &ostate, &version)
	a.Instrument, a.State = instr.String, flashsale.ReservationState(state)
	a.OrderID, a.OrderState, a.OrderVersion = orderID.String, flashsale.OrderState(ostate.String), version.Int64
	return a, err
}

func (s *Store) scanTransition(row Row) (flashsale.OrderTransition, error) {
	var (
		t    flashsale.OrderTransition
		from sql.NullString
		to   string
	)
	err := row.Scan(&t.OrderID, &from, &to, &t.Actor, &t.Reason, &t.Version, s.d.Time(&t.At), &t.EventID)
	t.From, t.To = flashsale.OrderState(from.String), flashsale.OrderState(to)
	return t, err
}

// one reads the row a statement returned with scan; no row is
// flashsale.ErrNotFound.
func one[T any](row Row, scan func(Row) (T, error)) (T, error) {
	v, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		err = flashsale.ErrNotFound
	}
	return v, err
}

// collect appends what scan reads of each row to *out.
func collect[T any](out *[]T, scan func(Row) (T, error)) Each {
	return func(row Row) error {
		v, err := scan(row)
		if err != nil {
			return err
		}
		*out = append(*out, v)
		return nil
	}
}
