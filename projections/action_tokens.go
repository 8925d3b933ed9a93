package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tokendb"
)

// The action-tokens projection: the state of every one-time action token.
const (
	// ProjectionActionTokens is the replay name of the action-tokens projection.
	ProjectionActionTokens = "action-tokens"
	// GroupActionTokens is its consumer group. Never renamed (see GroupMessagesMySQL).
	GroupActionTokens = "imledger.proj.action-tokens.mysql.v1"
)

// TokenStore is what the action-tokens projection and its rebuild need of readmodels/tokendb.
type TokenStore interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, tables tokendb.Tables, events []domain.Envelope) (int, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables tokendb.Tables) (readmodels.TableSummary, error)
}

// isActionTokenEvent reports whether t is an action token event.
func isActionTokenEvent(t domain.EventType) bool {
	switch t {
	case domain.EventActionTokenIssued, domain.EventActionTokenConsumed, domain.EventActionTokenRevoked,
		domain.EventActionTokenUnconsumed:
		return true
	}
	return false
}

// ActionTokens is the action-tokens projection: the action token events of im.audit.event go to
// the tenant's im_action_tokens, version-guarded (tokendb.Store.ApplyBatch). commands/actiontoken
// writes each row right after its event too; whichever comes second changes nothing. group ""
// means GroupActionTokens.
func ActionTokens(store TokenStore, group string) Projection {
	if group == "" {
		group = GroupActionTokens
	}
	return Projection{
		Name:          ProjectionActionTokens,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicAuditEvent},
		Accept:        isActionTokenEvent,
		Applier: ApplierFunc(func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			n, err := store.ApplyBatch(ctx, tenant, tokendb.DefaultTables(), events)
			return n, readModelErr(err)
		}),
	}
}

// NewActionTokenRebuilder returns the rebuilder of action-tokens: the TableRebuilder skeleton over
// readmodels/tokendb. Rows older than the log (version 0) are carried over into the fresh tables.
func NewActionTokenRebuilder(store TokenStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*TableRebuilder[readmodels.TableSummary], error) {
	if store == nil {
		return nil, errors.New("projections: action token rebuild: a store is required")
	}
	return NewTableRebuilder[readmodels.TableSummary](tokenModel{store}, events, tenants, log)
}

// tokenModel is action-tokens as the rebuild skeleton drives it; its one part is its table.
type tokenModel struct{ store TokenStore }

var _ ReadModel[readmodels.TableSummary] = tokenModel{}

func (tokenModel) Projection() string { return ProjectionActionTokens }

func (tokenModel) Filter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(isActionTokenEvent)}
}

func (tokenModel) tables(suffix string) tokendb.Tables {
	return tokendb.DefaultTables().WithSuffix(suffix)
}

func (m tokenModel) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := tokendb.DropTables(ctx, db, m.tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	if err := tokendb.CreateTablesLike(ctx, db, tokendb.DefaultTables(), m.tables(suffix)); err != nil {
		return err
	}
	return tokendb.CarryPreLogRows(ctx, db, tokendb.DefaultTables(), m.tables(suffix))
}

func (m tokenModel) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return tokendb.DropTables(ctx, db, m.tables(suffix))
}

func (m tokenModel) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return tokendb.SwapTables(ctx, db, tokendb.DefaultTables(), m.tables(suffix))
}

func (m tokenModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.ApplyBatch(ctx, t, m.tables(suffix), events)
}

func (m tokenModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]readmodels.TableSummary, error) {
	sum, err := m.store.Checksum(ctx, t, m.tables(suffix))
	if err != nil {
		return nil, err
	}
	return map[string]readmodels.TableSummary{tokendb.DefaultTables().Tokens: sum}, nil
}
