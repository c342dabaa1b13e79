-- Orders move on (shipped, cancelled, refunded) with an audit trail, and
-- every change is reported through a transactional outbox: the PostgreSQL
-- record's migration 00002, in SQLite.
--
-- SQLite cannot alter a CHECK constraint, so the reservations table is
-- rebuilt (https://sqlite.org/lang_altertable.html, "other kinds of table
-- schema changes"): foreign keys off, one transaction that creates the new
-- table, copies the rows, drops the old one and renames the new one, then
-- foreign keys on again. PRAGMA foreign_keys cannot change inside a
-- transaction, hence NO TRANSACTION and the explicit BEGIN and COMMIT.

-- +goose NO TRANSACTION
-- +goose Up
PRAGMA foreign_keys = OFF;

BEGIN IMMEDIATE;

CREATE TABLE reservations_new (
    reservation_id      TEXT PRIMARY KEY,
    sale_id             TEXT NOT NULL REFERENCES sale_events (sale_id),
    user_id             TEXT NOT NULL,
    quantity            INTEGER NOT NULL CHECK (quantity >= 1),
    state               TEXT NOT NULL CHECK (state IN ('pending', 'confirmed', 'expired', 'cancelled', 'voided')),
    payment_fingerprint TEXT NULL CHECK (payment_fingerprint <> ''),
    idempotency_key     TEXT NULL CHECK (idempotency_key <> ''),
    request_hash        TEXT NULL,
    epoch               INTEGER NOT NULL,
    created_at          INTEGER NOT NULL,
    expires_at          INTEGER NOT NULL,
    restocked_at        INTEGER NULL,
    confirmed_at        INTEGER NULL,
    version             INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),

    CONSTRAINT reservations_expires_after_created CHECK (expires_at > created_at),
    CONSTRAINT reservations_restocked_iff_over CHECK ((state IN ('pending', 'confirmed')) = (restocked_at IS NULL)),
    -- Cancelling or refunding an order ends its reservation (confirmed to
    -- cancelled), which keeps confirmed_at as history.
    CONSTRAINT reservations_confirmed_has_confirmed_at CHECK (state <> 'confirmed' OR confirmed_at IS NOT NULL),
    CONSTRAINT reservations_confirmed_at_only_if_confirmed CHECK (confirmed_at IS NULL OR state IN ('confirmed', 'cancelled'))
) STRICT;

INSERT INTO reservations_new (
    reservation_id, sale_id, user_id, quantity, state, payment_fingerprint,
    idempotency_key, request_hash, epoch, created_at, expires_at,
    restocked_at, confirmed_at, version)
SELECT
    reservation_id, sale_id, user_id, quantity, state, payment_fingerprint,
    idempotency_key, request_hash, epoch, created_at, expires_at,
    restocked_at, confirmed_at, version
FROM reservations;

DROP TABLE reservations;

ALTER TABLE reservations_new RENAME TO reservations;

CREATE UNIQUE INDEX reservations_live_user_key
    ON reservations (sale_id, user_id)
    WHERE state IN ('pending', 'confirmed');

CREATE UNIQUE INDEX reservations_live_instrument_key
    ON reservations (sale_id, payment_fingerprint)
    WHERE state IN ('pending', 'confirmed') AND payment_fingerprint IS NOT NULL;

CREATE UNIQUE INDEX reservations_idempotency_key
    ON reservations (sale_id, user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE INDEX reservations_due_idx ON reservations (expires_at) WHERE state = 'pending';

CREATE INDEX reservations_sale_state_idx ON reservations (sale_id, state);

CREATE TABLE order_events (
    id         INTEGER PRIMARY KEY,
    order_id   TEXT NOT NULL REFERENCES orders (order_id),
    -- NULL for the order's creation.
    from_state TEXT NULL CHECK (from_state IS NULL OR from_state IN ('confirmed', 'shipped', 'cancelled', 'refunded')),
    to_state   TEXT NOT NULL CHECK (to_state IN ('confirmed', 'shipped', 'cancelled', 'refunded')),
    -- Every move says who made it.
    actor      TEXT NOT NULL CHECK (actor <> ''),
    reason     TEXT NOT NULL DEFAULT '',
    version    INTEGER NOT NULL CHECK (version >= 1),
    at         INTEGER NOT NULL,
    event_id   TEXT NOT NULL,

    CONSTRAINT order_events_moves CHECK (from_state IS NOT to_state)
) STRICT;

CREATE INDEX order_events_order_idx ON order_events (order_id, id);

-- The outbox: see the PostgreSQL migration for what each column is for.
-- SQLite has one writer, so a claim is a write transaction that no other
-- claim can interleave with: it gives the guarantees SKIP LOCKED gives
-- PostgreSQL's relays.
CREATE TABLE outbox (
    event_id        TEXT PRIMARY KEY,
    topic           TEXT NOT NULL CHECK (topic <> ''),
    sale_id         TEXT NOT NULL,
    payload         TEXT NOT NULL CHECK (payload <> ''),
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at INTEGER NOT NULL,
    claim_token     TEXT NULL,
    claimed_by      TEXT NULL,
    claimed_at      INTEGER NULL,
    published_at    INTEGER NULL,
    dead_at         INTEGER NULL,
    last_error      TEXT NOT NULL DEFAULT '',

    CONSTRAINT outbox_published_or_dead CHECK (published_at IS NULL OR dead_at IS NULL),
    CONSTRAINT outbox_finished_unclaimed CHECK ((published_at IS NULL AND dead_at IS NULL) OR claim_token IS NULL),
    CONSTRAINT outbox_claim_has_claimed_at CHECK (claim_token IS NULL OR claimed_at IS NOT NULL)
) STRICT;

-- The relay's predicate exactly: only pending events are in the index.
CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at)
    WHERE published_at IS NULL AND dead_at IS NULL;

CREATE INDEX outbox_dead_idx ON outbox (dead_at) WHERE dead_at IS NOT NULL;

CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

CREATE INDEX outbox_sale_idx ON outbox (sale_id, created_at);

COMMIT;

PRAGMA foreign_keys = ON;

-- +goose Down
DROP TABLE outbox;
DROP TABLE order_events;
