-- +goose Up
-- A sale may notify each shopper's turn (the event shopper.turn) and then
-- keep the admission that many seconds; 0 notifies no one.
ALTER TABLE sale_events ADD COLUMN notified_admission_seconds INT NOT NULL DEFAULT 0
    CONSTRAINT sale_events_notified_admission_check CHECK (notified_admission_seconds BETWEEN 0 AND 86400);

-- A sale's invite codes, kept as the SHA-256 of each code: the code itself
-- was shown once, to the operator who issued it. A code is bound to the
-- first account that redeems it, by one conditional UPDATE (WHERE
-- redeemed_by IS NULL OR redeemed_by = the account); the partial unique
-- index binds at most one code per account and sale, so that an account
-- cannot hoard codes.
CREATE TABLE invites (
    code_hash   TEXT PRIMARY KEY CHECK (length(code_hash) = 64),
    sale_id     TEXT NOT NULL REFERENCES sale_events (sale_id),
    issued_by   TEXT NOT NULL,
    issued_at   TIMESTAMPTZ NOT NULL,
    redeemed_by TEXT NULL CHECK (redeemed_by <> ''),
    redeemed_at TIMESTAMPTZ NULL,
    CONSTRAINT invites_redeemed_together CHECK ((redeemed_by IS NULL) = (redeemed_at IS NULL))
);

CREATE INDEX invites_sale ON invites (sale_id);
CREATE UNIQUE INDEX invites_one_per_account ON invites (sale_id, redeemed_by)
    WHERE redeemed_by IS NOT NULL;

-- +goose Down
DROP TABLE invites;
ALTER TABLE sale_events DROP COLUMN notified_admission_seconds;
