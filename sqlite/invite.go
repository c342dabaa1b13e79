package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/record"
)

// InsertInvites inserts the batch in one statement, the hashes passed as
// one JSON array.
func (x statements) InsertInvites(ctx context.Context, saleID string, hashes []string, by string, at time.Time) error {
	list, err := json.Marshal(hashes)
	if err != nil {
		return err
	}
	_, err = x.q.ExecContext(ctx, `
		INSERT INTO invites (code_hash, sale_id, issued_by, issued_at)
		SELECT value, ?1, ?3, ?4 FROM json_each(?2)`,
		saleID, string(list), by, micros(at))
	if isUniqueViolation(err) {
		return flashsale.ErrDuplicate
	}
	return err
}

func (x statements) BindInvite(ctx context.Context, saleID, hash, userID string, at time.Time) record.Row {
	return uniqueRow{x.q.QueryRowContext(ctx, `
		UPDATE invites SET redeemed_by = ?3, redeemed_at = COALESCE(redeemed_at, ?4)
		WHERE code_hash = ?2 AND sale_id = ?1 AND (redeemed_by IS NULL OR redeemed_by = ?3)
		RETURNING redeemed_at`,
		saleID, hash, userID, micros(at))}
}

func (x statements) Invite(ctx context.Context, hash string) record.Row {
	return x.q.QueryRowContext(ctx, `SELECT sale_id, redeemed_by FROM invites WHERE code_hash = ?1`, hash)
}

func (x statements) InviteOf(ctx context.Context, saleID, userID string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT code_hash, redeemed_at FROM invites WHERE sale_id = ?1 AND redeemed_by = ?2`, saleID, userID)
}

func (x statements) InviteCounts(ctx context.Context, saleID string) record.Row {
	return x.q.QueryRowContext(ctx, `
		SELECT count(*), count(i.redeemed_by),
			COALESCE(SUM(CASE WHEN i.redeemed_by IS NOT NULL AND EXISTS (
				SELECT 1 FROM reservations r
				WHERE r.sale_id = i.sale_id AND r.user_id = i.redeemed_by
				  AND r.state IN ('pending', 'confirmed')) THEN 1 ELSE 0 END), 0)
		FROM invites i WHERE i.sale_id = ?1`, saleID)
}

// uniqueRow reads a row whose statement may break a unique index: that is
// flashsale.ErrDuplicate.
type uniqueRow struct{ record.Row }

func (r uniqueRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if isUniqueViolation(err) {
		return flashsale.ErrDuplicate
	}
	return err
}
