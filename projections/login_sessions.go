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
	"github.com/imledger/imledger/readmodels/login"
)

// The login-sessions projection: the login sessions each user lists.
const (
	// ProjectionLoginSessions is the replay name of the login-sessions projection.
	ProjectionLoginSessions = "login-sessions"
	// GroupLoginSessions is its consumer group. Never renamed (see GroupMessagesMySQL).
	GroupLoginSessions = "imledger.proj.login-sessions.mysql.v1"
)

// LoginStore is what the login-sessions projection and its rebuild need of readmodels/login.
type LoginStore interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, tables login.Tables, events []domain.Envelope) (int, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables login.Tables) (map[string]readmodels.TableSummary, error)
}

// LoginSessions is the login-sessions projection: the login session events and the account events
// that cut sessions off (login.Accepts), all on im.business.event, go to the tenant's
// im_login_sessions and im_login_cutoffs. group "" means GroupLoginSessions. Unknown tenants are
// dead-lettered as for MessagesMySQL.
func LoginSessions(store LoginStore, group string) Projection {
	if group == "" {
		group = GroupLoginSessions
	}
	return Projection{
		Name:          ProjectionLoginSessions,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicBusinessEvent},
		Accept:        login.Accepts,
		Applier: ApplierFunc(func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			n, err := store.ApplyBatch(ctx, tenant, login.DefaultTables(), events)
			return n, readModelErr(err)
		}),
	}
}

// NewLoginSessionRebuilder returns the rebuilder of login-sessions: the TableRebuilder skeleton
// over readmodels/login.
func NewLoginSessionRebuilder(store LoginStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*TableRebuilder[readmodels.TableSummary], error) {
	if store == nil {
		return nil, errors.New("projections: login session rebuild: a store is required")
	}
	return NewTableRebuilder[readmodels.TableSummary](loginModel{store}, events, tenants, log)
}

// loginModel is login-sessions as the rebuild skeleton drives it; its parts are its two tables.
type loginModel struct{ store LoginStore }

var _ ReadModel[readmodels.TableSummary] = loginModel{}

func (loginModel) Projection() string { return ProjectionLoginSessions }

func (loginModel) Filter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(login.Accepts)}
}

func (loginModel) tables(suffix string) login.Tables { return login.DefaultTables().WithSuffix(suffix) }

func (m loginModel) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := login.DropTables(ctx, db, m.tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	return login.CreateTablesLike(ctx, db, login.DefaultTables(), m.tables(suffix))
}

func (m loginModel) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return login.DropTables(ctx, db, m.tables(suffix))
}

func (m loginModel) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return login.SwapTables(ctx, db, login.DefaultTables(), m.tables(suffix))
}

func (m loginModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.ApplyBatch(ctx, t, m.tables(suffix), events)
}

func (m loginModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]readmodels.TableSummary, error) {
	return m.store.Checksum(ctx, t, m.tables(suffix))
}
