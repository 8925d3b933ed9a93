package sessions

import (
	"context"
	"database/sql"
	"errors"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Store writes and reads the sessions read model of every tenant. It is safe for concurrent use.
type Store struct {
	router *tenantdb.Router
}

// NewStore returns a Store over router's tenant databases.
func NewStore(router *tenantdb.Router) (*Store, error) {
	if router == nil {
		return nil, errors.New("sessions: a tenant router is required")
	}
	return &Store{router: router}, nil
}

// EventError says which event of a batch could not be applied; Err wraps domain.ErrInvalid for
// an event that can never be applied (bad payload, another tenant, a stream that does not match).
type EventError = readmodels.EventError

func (s *Store) db(ctx context.Context, tenant domain.TenantID, tables Tables) (*sql.DB, error) {
	if err := tables.Validate(); err != nil {
		return nil, err
	}
	return s.router.DB(ctx, tenant)
}
