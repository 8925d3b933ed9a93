package business

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
)

// op is one decoded event, ready to apply.
type op struct {
	index   int
	env     domain.Envelope
	payload any // a pointer to the payload struct; nil for event types this read model ignores
}

// at is when the event happened, as the tables store it (updated_at); an envelope without
// occurred_at gets the time it is applied.
func (o op) at() time.Time {
	if o.env.OccurredAt.IsZero() {
		return readmodels.Millis(time.Now())
	}
	return readmodels.Millis(o.env.OccurredAt)
}

// decodeBatch decodes events in order, dropping repeats of an event id within the batch. Event
// types outside the business model decode to an op without payload: they are ignored.
func decodeBatch(tenant domain.TenantID, events []domain.Envelope) ([]op, error) {
	return eventdecode.Batch(tenant, events, decodeOne, func(i int, id uuid.UUID, err error) error {
		return &EventError{Index: i, EventID: id, Err: err}
	})
}

// bad is the error of a business event that can never be applied.
var bad = eventdecode.Bad

// decodeOne decodes the business event at index i of a batch whose tenant Batch has checked.
func decodeOne(i int, env domain.Envelope) (op, error) {
	o := op{index: i, env: env}
	info, ok := domain.LookupEventType(env.EventType)
	if !ok || info.Category != domain.CategoryBusiness {
		return o, nil
	}
	if env.StreamVersion <= 0 {
		return o, bad("stream_version", "must be positive")
	}
	p := info.Payload()
	if !projected(p) {
		return o, nil
	}
	if err := json.Unmarshal(env.Payload, p); err != nil {
		return o, bad("payload", err.Error())
	}
	want, err := streamOf(p)
	if err != nil {
		return o, err
	}
	if env.StreamID != want {
		return o, bad("stream_id", fmt.Sprintf("%s names stream %q, the payload belongs to %q", env.EventType, env.StreamID, want))
	}
	o.payload = p
	return o, nil
}

// projected reports whether p is the payload of an event type this read model applies.
func projected(p any) bool {
	if _, _, ok := membershipOf(p); ok {
		return true
	}
	switch p.(type) {
	case *domain.GroupCreated, *domain.GroupProfileUpdated, *domain.GroupSettingsUpdated,
		*domain.GroupAnnouncementUpdated, *domain.GroupOwnershipTransferred, *domain.GroupDissolved,
		*domain.GroupMemberCountChanged, *domain.FriendRequested, *domain.FriendAccepted,
		*domain.FriendDeclined, *domain.FriendRemoved, *domain.UserBlocked, *domain.UserUnblocked,
		*domain.UserRegistered, *domain.UserProfileUpdated, *domain.UserDiscoverableSet:
		return true
	}
	return false
}

// streamOf returns the stream a business payload belongs to, checking the ids it carries.
func streamOf(p any) (string, error) {
	switch e := p.(type) {
	case *domain.GroupCreated:
		return groupStream(e.GroupID)
	case *domain.GroupProfileUpdated:
		return groupStream(e.GroupID)
	case *domain.GroupSettingsUpdated:
		return groupStream(e.GroupID)
	case *domain.GroupAnnouncementUpdated:
		return groupStream(e.GroupID)
	case *domain.GroupOwnershipTransferred:
		return groupStream(e.GroupID)
	case *domain.GroupDissolved:
		return groupStream(e.GroupID)
	case *domain.GroupMemberCountChanged:
		return groupStream(e.GroupID)
	case *domain.FriendRequested:
		return domain.RelationStreamID(e.From, e.To)
	case *domain.FriendAccepted:
		return domain.RelationStreamID(e.From, e.To)
	case *domain.FriendDeclined:
		return domain.RelationStreamID(e.From, e.To)
	case *domain.FriendRemoved:
		return domain.RelationStreamID(e.By, e.Peer)
	case *domain.UserBlocked:
		return domain.RelationStreamID(e.By, e.Peer)
	case *domain.UserUnblocked:
		return domain.RelationStreamID(e.By, e.Peer)
	}
	if uid, ok := profileUser(p); ok {
		if uid <= 0 {
			return "", bad("user", "must be positive")
		}
		return domain.ProfileStreamID(domain.UserID(uid)), nil
	}
	g, u, _ := membershipOf(p)
	if g <= 0 || u <= 0 {
		return "", bad("group_id", "group and user must be positive")
	}
	return domain.MembershipStreamID(g, u), nil
}

func groupStream(g domain.GroupID) (string, error) {
	if g <= 0 {
		return "", bad("group_id", "must be positive")
	}
	return domain.GroupStreamID(g), nil
}

// membershipOf returns the group and user of a membership payload.
func membershipOf(p any) (domain.GroupID, domain.UserID, bool) {
	switch e := p.(type) {
	case *domain.MemberInvited:
		return e.GroupID, e.User, true
	case *domain.MemberJoinRequested:
		return e.GroupID, e.User, true
	case *domain.MemberJoinApproved:
		return e.GroupID, e.User, true
	case *domain.MemberJoinRejected:
		return e.GroupID, e.User, true
	case *domain.MemberJoined:
		return e.GroupID, e.User, true
	case *domain.MemberLeft:
		return e.GroupID, e.User, true
	case *domain.MemberRemoved:
		return e.GroupID, e.User, true
	case *domain.MemberUnbanned:
		return e.GroupID, e.User, true
	case *domain.MemberRoleSet:
		return e.GroupID, e.User, true
	case *domain.MemberMuted:
		return e.GroupID, e.User, true
	}
	return 0, 0, false
}
