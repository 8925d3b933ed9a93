package msgstore

import (
	"context"
	"database/sql"
	"sync/atomic"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Store reads and writes the message read model of every tenant through a tenant router. It is
// safe for concurrent use.
type Store struct {
	router *tenantdb.Router

	noScripts atomic.Bool  // the server refused a compound statement; write statement by statement
	scripted  atomic.Int64 // batches written by applyScript
}

// NewStore returns a Store over router's tenant databases.
func NewStore(router *tenantdb.Router) *Store { return &Store{router: router} }

// EventError says which event of a batch could not be applied. Err wraps domain.ErrInvalid for an
// event that can never be applied (a payload without seq or sender, a topic of the wrong kind,
// another tenant's event) and domain.ErrNotFound for a recall or edit of a message the read
// model does not hold; a projector parks such an event instead of retrying it. Content the
// server refuses is not an error: the message is stored as a placeholder (see Apply).
type EventError = readmodels.EventError

// db returns tenant's pool after checking the table names.
func (s *Store) db(ctx context.Context, tenant domain.TenantID, tables Tables) (*sql.DB, error) {
	if err := tables.Validate(); err != nil {
		return nil, err
	}
	return s.router.DB(ctx, tenant)
}
