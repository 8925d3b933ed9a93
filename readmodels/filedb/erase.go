package filedb

import (
	"context"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// EraseUser clears the names of the files user uploaded in tenant (user.erased.v1, DESIGN §7a):
// they become domain.ErasedText, as a rebuild reads them once the user's data keys are gone.
// It is idempotent. Errors wrap domain.ErrRetryable when MySQL fails.
func (s *Store) EraseUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) error {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "UPDATE "+tableset.Quote(DefaultTables().Files)+" SET name = ? WHERE uploader_id = ?",
		domain.ErasedText, user.Int64())
	return tenantdb.WrapErr("erase user's file names", err)
}
