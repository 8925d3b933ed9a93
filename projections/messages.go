package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// Projection names, as the replay command spells them.
const (
	ProjectionMessagesMySQL = "messages-mysql"
	ProjectionMessagesHot   = "messages-hot"
)

// MessageStore is what the messages-mysql projection needs of readmodels/msgstore: Apply
// writes a batch of one tenant's events in one transaction, every write idempotent; ApplyIf does
// the same but lets ok veto the commit.
type MessageStore interface {
	Apply(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables msgstore.Tables, events []domain.Envelope) (int, error)
	ApplyIf(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables msgstore.Tables, events []domain.Envelope, ok func(context.Context) error) (int, error)
}

// HotStore is what the messages-hot projection needs of readmodels/hot: ApplyBatch writes a
// batch of one tenant's events to Redis in order and is idempotent by construction; an event
// that does not decode fails with domain.ErrInvalid after the events before it were applied.
type HotStore interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (applied int, err error)
}

// isMessageEvent reports whether t is an event of a conversation's message log (sent, recalled,
// edited, deleted for a user, read marked; group and direct).
func isMessageEvent(t domain.EventType) bool {
	info, ok := domain.LookupEventType(t)
	return ok && (info.Category == domain.CategoryGroupMessage || info.Category == domain.CategoryDirectMessage)
}

// MessagesMySQL is the messages-mysql projection: every message event of both message topics is
// written to the tenant's MySQL tables (msgstore.DefaultTables). group "" means
// GroupMessagesMySQL.
//
// An event of a tenant without a read-model database is dead-lettered with ReasonUnknownTenant:
// tenants are provisioned by an operator command (`imledger tenant`), never implicitly by an
// event, because an event naming a tenant nobody created is a misrouted or forged event, and
// creating databases on its say-so would hide that. Provision the tenant, then replay.
func MessagesMySQL(store MessageStore, group string) Projection {
	if group == "" {
		group = GroupMessagesMySQL
	}
	return Projection{
		Name:          ProjectionMessagesMySQL,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist},
		Accept:        isMessageEvent,
		Applier:       mysqlApplier{store: store, group: group, tables: msgstore.DefaultTables()},
	}
}

var _ CheckedApplier = mysqlApplier{}

// mysqlApplier adapts msgstore to Applier and maps its errors to the projector's contract.
type mysqlApplier struct {
	store  MessageStore
	group  string
	tables msgstore.Tables
}

func (a mysqlApplier) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	n, err := a.store.Apply(ctx, tenant, a.group, a.tables, events)
	return n, msgstoreErr(err)
}

// ApplyIf implements CheckedApplier.
func (a mysqlApplier) ApplyIf(ctx context.Context, tenant domain.TenantID, events []domain.Envelope, ok func(context.Context) error) (int, error) {
	n, err := a.store.ApplyIf(ctx, tenant, a.group, a.tables, events, ok)
	return n, msgstoreErr(err)
}

// msgstoreErr classifies a msgstore.Apply error: an event that can never apply is permanent, an
// unprovisioned tenant is ErrUnknownTenant; a recall or edit of a message the read model does
// not hold stays an ordinary error (retried, then dead-lettered); transient ones pass through.
// Content the store refuses never gets here: msgstore writes such a message as a placeholder.
func msgstoreErr(err error) error {
	if err == nil || errors.Is(err, domain.ErrRetryable) {
		return err
	}
	var ee *msgstore.EventError
	if errors.As(err, &ee) {
		if errors.Is(err, domain.ErrInvalid) {
			return permanent(ReasonBadEvent, err)
		}
		return err
	}
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnknownTenant, err)
	}
	return err
}

// MessagesHot is the messages-hot projection: message events of both message topics go to the
// Redis hot store (group snapshots, recall and edit, last seqs and read marks; the store
// ignores what it does not keep). Like the MySQL projections it keeps no record of applied
// events: every Redis write is a compare-and-set that only moves forward. group "" means
// GroupMessagesHot.
func MessagesHot(store HotStore, group string) Projection {
	if group == "" {
		group = GroupMessagesHot
	}
	return Projection{
		Name:          ProjectionMessagesHot,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist},
		Accept:        isMessageEvent,
		Applier:       hotApplier{store: store},
	}
}

type hotApplier struct{ store HotStore }

func (a hotApplier) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	n, err := a.store.ApplyBatch(ctx, tenant, events)
	if err != nil && errors.Is(err, domain.ErrInvalid) && !errors.Is(err, domain.ErrRetryable) {
		return n, permanent(ReasonBadEvent, err)
	}
	return n, err
}
