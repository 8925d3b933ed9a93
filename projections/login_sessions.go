package projections

import (
	"context"

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
	live := login.DefaultTables()
	return tableProjection(ProjectionLoginSessions, group, GroupLoginSessions, []string{tkafka.TopicBusinessEvent}, login.Accepts,
		func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			return store.ApplyBatch(ctx, tenant, live, events)
		})
}
