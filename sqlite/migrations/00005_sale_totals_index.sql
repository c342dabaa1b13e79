-- +goose Up
-- A sale's totals by state (the invariant's check, every second, and the
-- waiting room's read of pending holds) are summed from the index alone:
-- with quantity in it, the sum visits no table row.
CREATE INDEX reservations_sale_state_qty_idx ON reservations (sale_id, state, quantity);
DROP INDEX reservations_sale_state_idx;

-- +goose Down
CREATE INDEX reservations_sale_state_idx ON reservations (sale_id, state);
DROP INDEX reservations_sale_state_qty_idx;
