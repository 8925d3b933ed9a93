package projections

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// The erasure projection: what the read models still hold of an erased user (DESIGN §7a).
const (
	// ProjectionErasure is the name of the erasure projection.
	ProjectionErasure = "erasure"
	// GroupErasure is its consumer group. Never renamed (see GroupMessagesMySQL).
	GroupErasure = "imledger.proj.erasure.v1"
)

// Erasers are the read models the erasure projection clears; a nil one is skipped.
type Erasers struct {
	// Messages replaces the content of the user's messages in MySQL (readmodels/msgstore).
	Messages interface {
		EraseUser(ctx context.Context, tenant domain.TenantID, tables msgstore.Tables, user domain.UserID) (int64, error)
	}
	// Hot replaces the content of the user's cached snapshots in Redis (readmodels/hot).
	Hot interface {
		EraseUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int, error)
	}
	// Profiles clears the user's public profile (readmodels/business).
	Profiles interface {
		EraseUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) error
	}
	// Files clears the names of the user's files (readmodels/filedb).
	Files interface {
		EraseUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) error
	}
}

// Erasure is the erasure projection: on user.erased.v1 it makes every read model show what a
// rebuild would show once the user's data keys are gone — the erased marker for the content of
// the user's messages (MySQL and Redis), an empty profile and empty names of their files. The events after the erasure are
// projected by the other projections under destroyed keys, so they read as erased too. Each
// write is idempotent (it sets fixed values), so a redelivery is harmless. group "" means
// GroupErasure.
func Erasure(e Erasers, group string) Projection {
	if group == "" {
		group = GroupErasure
	}
	return Projection{
		Name:          ProjectionErasure,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicBusinessEvent},
		Accept:        func(t domain.EventType) bool { return t == domain.EventUserErased },
		Applier: ApplierFunc(func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			n := 0
			for _, env := range events {
				var p domain.UserErased
				if err := env.Decode(&p); err != nil || p.User <= 0 {
					return n, permanent(ReasonBadEvent, fmt.Errorf("event %s: user.erased.v1 without a user: %v", env.EventID, err))
				}
				if err := e.erase(ctx, tenant, p.User); err != nil {
					return n, readModelErr(err)
				}
				n++
			}
			return n, nil
		}),
	}
}

// erase clears user from each read model.
func (e Erasers) erase(ctx context.Context, tenant domain.TenantID, user domain.UserID) error {
	if e.Messages != nil {
		if _, err := e.Messages.EraseUser(ctx, tenant, msgstore.DefaultTables(), user); err != nil {
			return err
		}
	}
	if e.Hot != nil {
		if _, err := e.Hot.EraseUser(ctx, tenant, user); err != nil {
			return err
		}
	}
	if e.Profiles != nil {
		if err := e.Profiles.EraseUser(ctx, tenant, user); err != nil {
			return err
		}
	}
	if e.Files != nil {
		return e.Files.EraseUser(ctx, tenant, user)
	}
	return nil
}
