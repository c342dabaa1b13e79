-- +goose Up
-- How a sale looks on the waiting-room page (flashsale.Display): the shop's
-- title, description, image, price, links and colour, as one JSON text.
-- NULL when the sale sets none.
ALTER TABLE sale_events ADD COLUMN display TEXT;

-- +goose Down
ALTER TABLE sale_events DROP COLUMN display;
