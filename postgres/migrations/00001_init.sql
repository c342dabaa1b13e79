-- The record of the flash-sale engine: sales, the holds (reservations) the
-- gate granted, and the orders paid holds became.
--
-- The gate (Redis or in-process) decides who wins; these tables record the
-- winners durably. Every impossible state is refused here by a constraint,
-- because a constraint is the one defence that still holds when a second
-- program, or an operator in psql, writes to these tables.

-- +goose Up
CREATE TABLE sale_events (
    sale_id                 TEXT PRIMARY KEY,
    sku                     TEXT NOT NULL,
    -- active_sku equals sku until the sale is closed (or a later sale of the
    -- SKU is created after this one's closes_at): the unique constraint on
    -- it is "one active sale per SKU".
    active_sku              TEXT NULL,
    name                    TEXT NOT NULL DEFAULT '',
    initial_stock           INT NOT NULL,
    opens_at                TIMESTAMPTZ NOT NULL,
    closes_at               TIMESTAMPTZ NULL,
    hold_seconds            INT NOT NULL,
    per_user_limit          INT NOT NULL,
    fairness                TEXT NOT NULL,
    registration_closes_at  TIMESTAMPTZ NULL,
    admission_per_second    INT NOT NULL DEFAULT 0,
    min_account_age_seconds INT NOT NULL DEFAULT 0,
    challenge_bits          INT NOT NULL DEFAULT 0,
    shards                  INT NOT NULL DEFAULT 1,
    state                   TEXT NOT NULL,
    pause_reason            TEXT NOT NULL DEFAULT '',
    paused_at               TIMESTAMPTZ NULL,
    -- epoch counts rebuilds of the gate; a hold taken under an older epoch
    -- is refused (see reservations inserts, which lock this row FOR SHARE).
    epoch                   BIGINT NOT NULL DEFAULT 1,
    seed_commitment         TEXT NOT NULL DEFAULT '',
    version                 BIGINT NOT NULL DEFAULT 1,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL,

    CONSTRAINT sale_events_active_sku_key UNIQUE (active_sku),
    CONSTRAINT sale_events_active_sku_is_sku CHECK (active_sku IS NULL OR active_sku = sku),
    CONSTRAINT sale_events_closed_not_active CHECK (state <> 'closed' OR active_sku IS NULL),
    CONSTRAINT sale_events_initial_stock_check CHECK (initial_stock >= 0),
    CONSTRAINT sale_events_hold_seconds_check CHECK (hold_seconds BETWEEN 1 AND 86400),
    CONSTRAINT sale_events_per_user_limit_check CHECK (per_user_limit >= 1),
    CONSTRAINT sale_events_fairness_check CHECK (fairness IN ('fifo', 'random', 'lottery')),
    CONSTRAINT sale_events_admission_per_second_check CHECK (admission_per_second >= 0),
    CONSTRAINT sale_events_min_account_age_check CHECK (min_account_age_seconds >= 0),
    CONSTRAINT sale_events_challenge_bits_check CHECK (challenge_bits BETWEEN 0 AND 32),
    CONSTRAINT sale_events_shards_check CHECK (shards >= 1),
    CONSTRAINT sale_events_state_check CHECK (state IN ('scheduled', 'open', 'paused', 'sold_out', 'closed')),
    CONSTRAINT sale_events_epoch_check CHECK (epoch >= 1),
    CONSTRAINT sale_events_version_check CHECK (version >= 1),
    CONSTRAINT sale_events_closes_after_opens CHECK (closes_at IS NULL OR closes_at > opens_at),
    CONSTRAINT sale_events_lottery_registers CHECK (fairness <> 'lottery' OR registration_closes_at IS NOT NULL),
    CONSTRAINT sale_events_paused_iff_paused_at CHECK ((state = 'paused') = (paused_at IS NOT NULL))
);

CREATE INDEX sale_events_sku_created_idx ON sale_events (sku, created_at);

CREATE TABLE reservations (
    reservation_id      TEXT PRIMARY KEY,
    sale_id             TEXT NOT NULL REFERENCES sale_events (sale_id),
    user_id             TEXT NOT NULL,
    quantity            INT NOT NULL,
    state               TEXT NOT NULL,
    -- NULL, never '', when the shopper gave no instrument or key, so that
    -- the partial unique indexes below ignore them.
    payment_fingerprint TEXT NULL,
    idempotency_key     TEXT NULL,
    request_hash        TEXT NULL,
    epoch               BIGINT NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    expires_at          TIMESTAMPTZ NOT NULL,
    -- restocked_at is set exactly once, by the one conditional UPDATE that
    -- ends a hold (expire or cancel) or by the voided tombstone: the units
    -- go back to the gate only when that write affected a row.
    restocked_at        TIMESTAMPTZ NULL,
    confirmed_at        TIMESTAMPTZ NULL,
    version             BIGINT NOT NULL DEFAULT 1,

    CONSTRAINT reservations_quantity_check CHECK (quantity >= 1),
    CONSTRAINT reservations_state_check CHECK (state IN ('pending', 'confirmed', 'expired', 'cancelled', 'voided')),
    CONSTRAINT reservations_fingerprint_not_empty CHECK (payment_fingerprint <> ''),
    CONSTRAINT reservations_idempotency_key_not_empty CHECK (idempotency_key <> ''),
    CONSTRAINT reservations_version_check CHECK (version >= 1),
    CONSTRAINT reservations_expires_after_created CHECK (expires_at > created_at),
    -- A live hold (pending, confirmed) holds units; every other state gave
    -- them back, and says when.
    CONSTRAINT reservations_restocked_iff_over CHECK ((state IN ('pending', 'confirmed')) = (restocked_at IS NULL)),
    CONSTRAINT reservations_confirmed_iff_confirmed_at CHECK ((state = 'confirmed') = (confirmed_at IS NOT NULL))
);

-- One LIVE hold per shopper per sale: the per-user limit where it cannot be
-- bypassed. Partial, so that a shopper whose hold expired or was cancelled
-- (or voided) may try again.
CREATE UNIQUE INDEX reservations_live_user_key
    ON reservations (sale_id, user_id)
    WHERE state IN ('pending', 'confirmed');

-- One live hold per payment instrument per sale: instruments cost an
-- attacker money, addresses and accounts do not.
CREATE UNIQUE INDEX reservations_live_instrument_key
    ON reservations (sale_id, payment_fingerprint)
    WHERE state IN ('pending', 'confirmed') AND payment_fingerprint IS NOT NULL;

-- A shopper's idempotency key names one reservation, whatever became of it.
-- Voided tombstones carry no key, so a retry under the key may insert.
CREATE UNIQUE INDEX reservations_idempotency_key
    ON reservations (sale_id, user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The sweeper's predicate exactly: the index holds only pending holds, so it
-- stays small however many holds the sale has ended.
CREATE INDEX reservations_due_idx ON reservations (expires_at) WHERE state = 'pending';

CREATE INDEX reservations_sale_state_idx ON reservations (sale_id, state);

CREATE TABLE orders (
    order_id       TEXT PRIMARY KEY,
    reservation_id TEXT NOT NULL REFERENCES reservations (reservation_id),
    sale_id        TEXT NOT NULL REFERENCES sale_events (sale_id),
    user_id        TEXT NOT NULL,
    quantity       INT NOT NULL,
    state          TEXT NOT NULL,
    payment_ref    TEXT NOT NULL DEFAULT '',
    version        BIGINT NOT NULL DEFAULT 1,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    shipped_at     TIMESTAMPTZ NULL,

    -- A reservation becomes at most one order.
    CONSTRAINT orders_reservation_id_key UNIQUE (reservation_id),
    CONSTRAINT orders_quantity_check CHECK (quantity >= 1),
    CONSTRAINT orders_state_check CHECK (state IN ('confirmed', 'shipped', 'cancelled', 'refunded')),
    CONSTRAINT orders_version_check CHECK (version >= 1),
    CONSTRAINT orders_shipped_has_shipped_at CHECK (state <> 'shipped' OR shipped_at IS NOT NULL)
);

CREATE INDEX orders_sale_created_idx ON orders (sale_id, created_at);

-- +goose Down
DROP TABLE orders;
DROP TABLE reservations;
DROP TABLE sale_events;
