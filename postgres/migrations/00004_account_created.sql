-- +goose Up
-- The shopper's account creation time, as the sign-in said, kept with each
-- hold for the post-sale audit of automation patterns (accounts created
-- together). NULL when the sign-in did not carry it.
ALTER TABLE reservations ADD COLUMN account_created TIMESTAMPTZ;

-- +goose Down
ALTER TABLE reservations DROP COLUMN account_created;
