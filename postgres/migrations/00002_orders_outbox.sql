-- Orders move on (shipped, cancelled, refunded) with an audit trail, and
-- every change is reported through a transactional outbox.
--
-- order_events is the audit trail: one row per move of an order, written in
-- the same transaction as the move. outbox holds the events to publish,
-- written in the same transaction as the change each reports, and is the
-- work queue the relay drains (package outbox).

-- +goose Up

-- Cancelling or refunding an order ends its reservation: confirmed becomes
-- cancelled and restocked_at is set, so that its units go back to stock
-- exactly once. The reservation keeps confirmed_at as history, which the
-- old "confirmed iff confirmed_at" constraint forbade; the new pair says
-- the same for live holds and lets a cancelled order's hold remember it was
-- confirmed.
ALTER TABLE reservations DROP CONSTRAINT reservations_confirmed_iff_confirmed_at;
ALTER TABLE reservations ADD CONSTRAINT reservations_confirmed_has_confirmed_at
    CHECK (state <> 'confirmed' OR confirmed_at IS NOT NULL);
ALTER TABLE reservations ADD CONSTRAINT reservations_confirmed_at_only_if_confirmed
    CHECK (confirmed_at IS NULL OR state IN ('confirmed', 'cancelled'));

CREATE TABLE order_events (
    id         BIGSERIAL PRIMARY KEY,
    order_id   TEXT NOT NULL REFERENCES orders (order_id),
    -- NULL for the order's creation.
    from_state TEXT NULL,
    to_state   TEXT NOT NULL,
    actor      TEXT NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',
    -- The order's version after the move.
    version    BIGINT NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    -- The outbox event written with the move.
    event_id   TEXT NOT NULL,

    CONSTRAINT order_events_from_check CHECK (from_state IS NULL OR from_state IN ('confirmed', 'shipped', 'cancelled', 'refunded')),
    CONSTRAINT order_events_to_check CHECK (to_state IN ('confirmed', 'shipped', 'cancelled', 'refunded')),
    CONSTRAINT order_events_moves CHECK (from_state IS DISTINCT FROM to_state),
    -- Every move says who made it.
    CONSTRAINT order_events_actor_not_empty CHECK (actor <> ''),
    CONSTRAINT order_events_version_check CHECK (version >= 1)
);

CREATE INDEX order_events_order_idx ON order_events (order_id, id);

CREATE TABLE outbox (
    -- Chosen when the event is written and carried by every delivery, so
    -- that consumers deduplicate on it.
    event_id        TEXT PRIMARY KEY,
    topic           TEXT NOT NULL,
    sale_id         TEXT NOT NULL,
    -- The JSON envelope exactly as published (TEXT, not JSONB, so that the
    -- bytes delivered are the bytes written).
    payload         TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    -- Counted when a relay claims the event, before it tries: a relay that
    -- dies mid-delivery still uses an attempt up.
    attempts        INT NOT NULL DEFAULT 0,
    -- When the event may next be claimed: at once when written, after its
    -- backoff when a delivery failed, and when the claim lapses while a
    -- relay holds it (the claim timeout that rescues work from a relay
    -- that died).
    next_attempt_at TIMESTAMPTZ NOT NULL,
    -- Fresh for every claim, cleared when the claim ends; completing or
    -- failing the event needs it, so a relay whose claim lapsed (a zombie)
    -- changes nothing.
    claim_token     TEXT NULL,
    claimed_by      TEXT NULL,
    claimed_at      TIMESTAMPTZ NULL,
    published_at    TIMESTAMPTZ NULL,
    dead_at         TIMESTAMPTZ NULL,
    last_error      TEXT NOT NULL DEFAULT '',

    CONSTRAINT outbox_topic_not_empty CHECK (topic <> ''),
    CONSTRAINT outbox_payload_not_empty CHECK (payload <> ''),
    CONSTRAINT outbox_attempts_check CHECK (attempts >= 0),
    CONSTRAINT outbox_published_or_dead CHECK (published_at IS NULL OR dead_at IS NULL),
    CONSTRAINT outbox_finished_unclaimed CHECK ((published_at IS NULL AND dead_at IS NULL) OR claim_token IS NULL),
    CONSTRAINT outbox_claim_has_claimed_at CHECK (claim_token IS NULL OR claimed_at IS NOT NULL)
);

-- The relay's predicate exactly: only pending events are in the index, so
-- it stays small however many events were ever published.
CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at)
    WHERE published_at IS NULL AND dead_at IS NULL;

-- Dead letters, for the operator's list.
CREATE INDEX outbox_dead_idx ON outbox (dead_at) WHERE dead_at IS NOT NULL;

-- Retention: published events older than the retention go.
CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

-- A sale's events, for the operator's view.
CREATE INDEX outbox_sale_idx ON outbox (sale_id, created_at);

-- +goose Down
DROP TABLE outbox;
DROP TABLE order_events;
ALTER TABLE reservations DROP CONSTRAINT reservations_confirmed_at_only_if_confirmed;
ALTER TABLE reservations DROP CONSTRAINT reservations_confirmed_has_confirmed_at;
ALTER TABLE reservations ADD CONSTRAINT reservations_confirmed_iff_confirmed_at
    CHECK ((state = 'confirmed') = (confirmed_at IS NOT NULL));
