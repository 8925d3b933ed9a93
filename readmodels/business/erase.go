package business

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// EraseUser clears the public profile of user in tenant (user.erased.v1, DESIGN §7a): nickname,
// avatar and signature become domain.ErasedText, as a rebuild from the events reads them once
// the user's data keys are destroyed, and the cached profile is dropped. A row with an empty
// nickname is no profile (see userRow). It is idempotent. Errors wrap domain.ErrRetryable when
// MySQL or Redis fails.
func (s *Store) EraseUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) error {
	tables := DefaultTables()
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return fmt.Errorf("erase user: %w", err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE "+q(tables.Users)+" SET nickname = ?, avatar = ?, signature = ? WHERE user_id = ?",
		domain.ErasedText, domain.ErasedText, domain.ErasedText, user.Int64()); err != nil {
		return tenantdb.WrapErr("erase user", err)
	}
	return s.invalidate(ctx, tenant, []string{s.keyspace(tenant).userProfile(user.Int64())})
}
