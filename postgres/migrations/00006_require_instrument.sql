-- +goose Up
-- A sale may require a payment instrument the server counts (the shopper
-- JWT's claim, or a trusted body value): a reserve without one is refused.
ALTER TABLE sale_events ADD COLUMN require_instrument BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE sale_events DROP COLUMN require_instrument;
