package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/sessions"
)

// The sessions projection: who was online when.
const (
	// ProjectionSessionsMySQL is the replay name of the sessions projection.
	ProjectionSessionsMySQL = "sessions-mysql"
	// GroupSessionsMySQL is its consumer group. Never renamed (see GroupMessagesMySQL).
	GroupSessionsMySQL = "imledger.proj.sessions.mysql.v1"
)

// SessionsStore is what the sessions projection needs of readmodels/sessions: ApplyBatch writes
// one tenant's session events and their processed rows in one transaction.
type SessionsStore interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables sessions.Tables, events []domain.Envelope) (int, error)
}

// isSessionEvent reports whether t belongs to the session category.
func isSessionEvent(t domain.EventType) bool {
	info, ok := domain.LookupEventType(t)
	return ok && info.Category == domain.CategorySession
}

// SessionsMySQL is the sessions-mysql projection: every event of im.session.event goes to the
// tenant's im_sessions table with its processed row. group "" means GroupSessionsMySQL. Unknown
// tenants are dead-lettered as for MessagesMySQL.
func SessionsMySQL(store SessionsStore, group string) Projection {
	if group == "" {
		group = GroupSessionsMySQL
	}
	return Projection{
		Name:          ProjectionSessionsMySQL,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicSessionEvent},
		Accept:        isSessionEvent,
		Applier:       sessionsApplier{store: store, group: group},
	}
}

type sessionsApplier struct {
	store SessionsStore
	group string
}

func (a sessionsApplier) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	n, err := a.store.ApplyBatch(ctx, tenant, a.group, sessions.DefaultTables(), events)
	return n, sessionsErr(err)
}

// sessionsErr classifies an ApplyBatch error as businessErr does.
func sessionsErr(err error) error {
	if err == nil || errors.Is(err, domain.ErrRetryable) {
		return err
	}
	var ee *sessions.EventError
	if errors.As(err, &ee) && errors.Is(err, domain.ErrInvalid) {
		return permanent(ReasonBadEvent, err)
	}
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnknownTenant, err)
	}
	return err
}
