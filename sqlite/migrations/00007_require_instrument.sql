-- +goose Up
-- A sale may require a payment instrument the server counts (the shopper
-- JWT's claim, or a trusted body value): a reserve without one is refused.
ALTER TABLE sale_events ADD COLUMN require_instrument INTEGER NOT NULL DEFAULT 0
	CHECK (require_instrument IN (0, 1));

-- +goose Down
ALTER TABLE sale_events DROP COLUMN require_instrument;
