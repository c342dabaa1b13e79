-- +goose Up
-- The admission each hold spent: its shopper's one turn in the sale. A
-- gate rebuilt from the record (after a restart of the in-process gate, a
-- Redis that lost its keys, an operator's rebuild) reads them back
-- (SpentAdmissions), so that a rebuild hands out no turn. NULL for a hold
-- made without one, or before this migration. A turn is taken at most once:
-- the unique index refuses a second hold on the same admission, whatever
-- the gate said (a voided hold gave its admission back).
ALTER TABLE reservations ADD COLUMN admission_id TEXT CHECK (admission_id <> '');
CREATE UNIQUE INDEX reservations_admission_key ON reservations (sale_id, admission_id)
    WHERE admission_id IS NOT NULL AND state <> 'voided';

-- +goose Down
DROP INDEX reservations_admission_key;
ALTER TABLE reservations DROP COLUMN admission_id;
