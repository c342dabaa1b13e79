-- +goose Up
-- The draw of a random or lottery sale. The seed is secret until drawn_at
-- is set; only its commitment (sale_events.seed_commitment) is published
-- before. The document is the published draw (JSON).
CREATE TABLE sale_draws (
    sale_id   TEXT PRIMARY KEY REFERENCES sale_events (sale_id),
    seed      BLOB NOT NULL CHECK (length(seed) >= 16),
    drawn_at  INTEGER,
    entrants  INTEGER CHECK (entrants >= 0),
    winners   INTEGER CHECK (winners >= 0 AND winners <= entrants),
    document  BLOB,
    CHECK ((drawn_at IS NULL) = (document IS NULL) AND (drawn_at IS NULL) = (entrants IS NULL))
) STRICT;

-- +goose Down
DROP TABLE sale_draws;
