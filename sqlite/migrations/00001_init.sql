-- The record of the flash-sale engine in SQLite: sales, the holds
-- (reservations) the gate granted, and the orders paid holds became.
--
-- The same tables, constraints and partial indexes as the PostgreSQL record,
-- with every time an INTEGER count of microseconds since the Unix epoch, UTC,
-- so that comparisons (expires_at <= now) are exact. Tables are STRICT: a
-- value of the wrong type is refused rather than stored.
--
-- Every impossible state is refused here by a constraint, because a
-- constraint is the one defence that still holds when a second program, or
-- an operator in the sqlite3 shell, writes to these tables.

-- +goose Up
CREATE TABLE sale_events (
    sale_id                 TEXT PRIMARY KEY,
    sku                     TEXT NOT NULL,
    -- active_sku equals sku until the sale is closed (or a later sale of the
    -- SKU is created after this one's closes_at): the unique constraint on
    -- it is "one active sale per SKU".
    active_sku              TEXT NULL UNIQUE,
    name                    TEXT NOT NULL DEFAULT '',
    initial_stock           INTEGER NOT NULL CHECK (initial_stock >= 0),
    opens_at                INTEGER NOT NULL,
    closes_at               INTEGER NULL,
    hold_seconds            INTEGER NOT NULL CHECK (hold_seconds BETWEEN 1 AND 86400),
    per_user_limit          INTEGER NOT NULL CHECK (per_user_limit >= 1),
    fairness                TEXT NOT NULL CHECK (fairness IN ('fifo', 'random', 'lottery')),
    registration_closes_at  INTEGER NULL,
    admission_per_second    INTEGER NOT NULL DEFAULT 0 CHECK (admission_per_second >= 0),
    min_account_age_seconds INTEGER NOT NULL DEFAULT 0 CHECK (min_account_age_seconds >= 0),
    challenge_bits          INTEGER NOT NULL DEFAULT 0 CHECK (challenge_bits BETWEEN 0 AND 32),
    shards                  INTEGER NOT NULL DEFAULT 1 CHECK (shards >= 1),
    state                   TEXT NOT NULL CHECK (state IN ('scheduled', 'open', 'paused', 'sold_out', 'closed')),
    pause_reason            TEXT NOT NULL DEFAULT '',
    paused_at               INTEGER NULL,
    -- epoch counts rebuilds of the gate; a hold taken under an older epoch
    -- is refused.
    epoch                   INTEGER NOT NULL DEFAULT 1 CHECK (epoch >= 1),
    seed_commitment         TEXT NOT NULL DEFAULT '',
    version                 INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL,

    CONSTRAINT sale_events_active_sku_is_sku CHECK (active_sku IS NULL OR active_sku = sku),
    CONSTRAINT sale_events_closed_not_active CHECK (state <> 'closed' OR active_sku IS NULL),
    CONSTRAINT sale_events_closes_after_opens CHECK (closes_at IS NULL OR closes_at > opens_at),
    CONSTRAINT sale_events_lottery_registers CHECK (fairness <> 'lottery' OR registration_closes_at IS NOT NULL),
    CONSTRAINT sale_events_paused_iff_paused_at CHECK ((state = 'paused') = (paused_at IS NOT NULL))
) STRICT;

CREATE INDEX sale_events_sku_created_idx ON sale_events (sku, created_at);

CREATE TABLE reservations (
    reservation_id      TEXT PRIMARY KEY,
    sale_id             TEXT NOT NULL REFERENCES sale_events (sale_id),
    user_id             TEXT NOT NULL,
    quantity            INTEGER NOT NULL CHECK (quantity >= 1),
    state               TEXT NOT NULL CHECK (state IN ('pending', 'confirmed', 'expired', 'cancelled', 'voided')),
    -- NULL, never '', when the shopper gave no instrument or key, so that
    -- the partial unique indexes below ignore them.
    payment_fingerprint TEXT NULL CHECK (payment_fingerprint <> ''),
    idempotency_key     TEXT NULL CHECK (idempotency_key <> ''),
    request_hash        TEXT NULL,
    epoch               INTEGER NOT NULL,
    created_at          INTEGER NOT NULL,
    expires_at          INTEGER NOT NULL,
    -- restocked_at is set exactly once, by the one conditional UPDATE that
    -- ends a hold (expire or cancel) or by the voided tombstone: the units
    -- go back to the gate only when that write changed a row.
    restocked_at        INTEGER NULL,
    confirmed_at        INTEGER NULL,
    version             INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),

    CONSTRAINT reservations_expires_after_created CHECK (expires_at > created_at),
    -- A live hold (pending, confirmed) holds units; every other state gave
    -- them back, and says when.
    CONSTRAINT reservations_restocked_iff_over CHECK ((state IN ('pending', 'confirmed')) = (restocked_at IS NULL)),
    CONSTRAINT reservations_confirmed_iff_confirmed_at CHECK ((state = 'confirmed') = (confirmed_at IS NOT NULL))
) STRICT;

-- One LIVE hold per shopper per sale: the per-user limit where it cannot be
-- bypassed. Partial, so that a shopper whose hold expired or was cancelled
-- (or voided) may try again.
CREATE UNIQUE INDEX reservations_live_user_key
    ON reservations (sale_id, user_id)
    WHERE state IN ('pending', 'confirmed');

-- One live hold per payment instrument per sale.
CREATE UNIQUE INDEX reservations_live_instrument_key
    ON reservations (sale_id, payment_fingerprint)
    WHERE state IN ('pending', 'confirmed') AND payment_fingerprint IS NOT NULL;

-- A shopper's idempotency key names one reservation, whatever became of it.
-- Voided tombstones carry no key, so a retry under the key may insert.
CREATE UNIQUE INDEX reservations_idempotency_key
    ON reservations (sale_id, user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The sweeper's predicate exactly: only pending holds are in the index.
CREATE INDEX reservations_due_idx ON reservations (expires_at) WHERE state = 'pending';

CREATE INDEX reservations_sale_state_idx ON reservations (sale_id, state);

CREATE TABLE orders (
    order_id       TEXT PRIMARY KEY,
    -- UNIQUE: a reservation becomes at most one order.
    reservation_id TEXT NOT NULL UNIQUE REFERENCES reservations (reservation_id),
    sale_id        TEXT NOT NULL REFERENCES sale_events (sale_id),
    user_id        TEXT NOT NULL,
    quantity       INTEGER NOT NULL CHECK (quantity >= 1),
    state          TEXT NOT NULL CHECK (state IN ('confirmed', 'shipped', 'cancelled', 'refunded')),
    payment_ref    TEXT NOT NULL DEFAULT '',
    version        INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    shipped_at     INTEGER NULL,

    CONSTRAINT orders_shipped_has_shipped_at CHECK (state <> 'shipped' OR shipped_at IS NOT NULL)
) STRICT;

CREATE INDEX orders_sale_created_idx ON orders (sale_id, created_at);

-- +goose Down
DROP TABLE orders;
DROP TABLE reservations;
DROP TABLE sale_events;
