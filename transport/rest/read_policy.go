package rest

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// ReadPolicy decides whether user may read topic: its history, its unread count, and the
// member list of its group. A refusal is a *domain.DeniedError (answered 403 with its reason).
type ReadPolicy interface {
	CanRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error
}

// MembershipReader tells whether a user is a member of a group; *business.Store implements it.
type MembershipReader interface {
	IsMember(ctx context.Context, tenant domain.TenantID, gid domain.GroupID, uid domain.UserID) (bool, error)
}

// MemberReadPolicy lets the two parties of a 1:1 topic read it, and the current members of a
// group read the group's topic, as the membership read model says. A user who left or was
// removed reads no more; a membership the read model has not caught up with yet is refused
// until it has.
type MemberReadPolicy struct {
	Members MembershipReader
}

// Refusal reasons of MemberReadPolicy.
const (
	ReasonNotMember = "not_member"
	ReasonNotParty  = "not_party"
)

// CanRead implements ReadPolicy.
func (p MemberReadPolicy) CanRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error {
	switch topic.Kind() {
	case domain.TopicDirect:
		if !topic.Has(user) {
			return domain.Deny(ReasonNotParty)
		}
		return nil
	case domain.TopicGroup:
		if p.Members == nil {
			return errors.New("read policy: no membership reader configured")
		}
		ok, err := p.Members.IsMember(ctx, tenant, domain.GroupID(topic.GroupID()), user)
		if err != nil {
			return fmt.Errorf("read policy: %w", err)
		}
		if !ok {
			return domain.Deny(ReasonNotMember)
		}
		return nil
	}
	return &domain.ValidationError{Field: "topic", Reason: "required"}
}
