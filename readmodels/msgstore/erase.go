package msgstore

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// EraseUser replaces the content of every message user sent in tenant, in tables, with
// domain.ErasedContent (user.erased.v1, DESIGN §7a): what a rebuild from the events gives once
// the user's data keys are destroyed, so the live tables and a rebuild keep the same checksum.
// Recalled messages, which hold no content, are left as they are. It is idempotent. Errors wrap
// domain.ErrRetryable when MySQL fails.
func (s *Store) EraseUser(ctx context.Context, tenant domain.TenantID, tables Tables, user domain.UserID) (int64, error) {
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return 0, fmt.Errorf("erase user: %w", err)
	}
	var n int64
	for _, t := range []string{tables.GroupMessages, tables.DirectMessages} {
		res, err := db.ExecContext(ctx, "UPDATE "+q(t)+" SET content = ?, content_size = ?"+
			" WHERE from_user = ? AND content IS NOT NULL", string(domain.ErasedContent), len(domain.ErasedContent), user.Int64())
		if err != nil {
			return n, tenantdb.WrapErr("erase user", err)
		}
		c, _ := res.RowsAffected()
		n += c
	}
	return n, nil
}
