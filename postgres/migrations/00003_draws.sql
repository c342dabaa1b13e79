-- +goose Up
-- The draw of a random or lottery sale. The seed is secret until drawn_at
-- is set; only its commitment (sale_events.seed_commitment) is published
-- before. The document is the published draw (JSON): pseudonyms of the
-- entrants and the order, so anyone can recompute it.
CREATE TABLE sale_draws (
    sale_id   TEXT PRIMARY KEY REFERENCES sale_events (sale_id),
    seed      BYTEA NOT NULL CHECK (octet_length(seed) >= 16),
    drawn_at  TIMESTAMPTZ,
    entrants  INT CHECK (entrants >= 0),
    winners   INT CHECK (winners >= 0 AND winners <= entrants),
    document  BYTEA,
    CONSTRAINT sale_draws_drawn_complete CHECK ((drawn_at IS NULL) = (document IS NULL) AND (drawn_at IS NULL) = (entrants IS NULL))
);

-- +goose Down
DROP TABLE sale_draws;
