package projections

import (
	"context"

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
	live := tokendb.DefaultTables()
	return tableProjection(ProjectionActionTokens, group, GroupActionTokens, []string{tkafka.TopicAuditEvent}, isActionTokenEvent,
		func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			return store.ApplyBatch(ctx, tenant, live, events)
		})
}
