package domain

import (
	"sort"
	"sync"
	"sync/atomic"
)

// The event registry. Every event type this build can write or read is listed once in eventTable
// below, grouped by area; the lookup map is built from it when the package is initialised and is
// never written afterwards, so lookups need no lock. An event name is a wire contract: adding a
// type means adding its row here, and a name listed twice stops the program at start.
//
// Columns: type, schema version (the envelope "version", also the name's ".vN" suffix), category
// (decides the Kafka topic), biz type (the envelope "biz_type"), payload constructor.
var eventTable = []EventInfo{
	// Messages (events.go, seq_skipped.go). Every event of a conversation has a group and a direct
	// variant so that it travels on the conversation's topic, under its key.
	{EventGroupMessageSent, 1, CategoryGroupMessage, "group_message", payloadOf[MessageSent]},
	{EventGroupMessageRecalled, 1, CategoryGroupMessage, "group_message", payloadOf[MessageRecalled]},
	{EventGroupMessageEdited, 1, CategoryGroupMessage, "group_message", payloadOf[MessageEdited]},
	{EventGroupMessageDeleted, 1, CategoryGroupMessage, "group_message", payloadOf[MessageDeletedForUser]},
	{EventGroupReadMarked, 1, CategoryGroupMessage, "group_message", payloadOf[ReadMarked]},
	{EventGroupSeqSkipped, 1, CategoryGroupMessage, "group_message", payloadOf[SeqSkipped]},
	{EventDirectMessageSent, 1, CategoryDirectMessage, "direct_message", payloadOf[MessageSent]},
	{EventDirectMessageRecalled, 1, CategoryDirectMessage, "direct_message", payloadOf[MessageRecalled]},
	{EventDirectMessageEdited, 1, CategoryDirectMessage, "direct_message", payloadOf[MessageEdited]},
	{EventDirectMessageDeleted, 1, CategoryDirectMessage, "direct_message", payloadOf[MessageDeletedForUser]},
	{EventDirectReadMarked, 1, CategoryDirectMessage, "direct_message", payloadOf[ReadMarked]},
	{EventDirectSeqSkipped, 1, CategoryDirectMessage, "direct_message", payloadOf[SeqSkipped]},

	// Groups (group_events.go).
	{EventGroupCreated, 1, CategoryBusiness, BizTypeGroup, payloadOf[GroupCreated]},
	{EventGroupProfileUpdated, 1, CategoryBusiness, BizTypeGroup, payloadOf[GroupProfileUpdated]},
	{EventGroupSettingsUpdated, 1, CategoryBusiness, BizTypeGroup, payloadOf[GroupSettingsUpdated]},
	{EventGroupAnnouncementUpdated, 1, CategoryBusiness, BizTypeGroup, payloadOf[GroupAnnouncementUpdated]},
	{EventGroupOwnershipTransferred, 1, CategoryBusiness, BizTypeGroup, payloadOf[GroupOwnershipTransferred]},
	{EventGroupDissolved, 1, CategoryBusiness, BizTypeGroup, payloadOf[GroupDissolved]},
	{EventGroupMemberCountChanged, 1, CategoryBusiness, BizTypeGroup, payloadOf[GroupMemberCountChanged]},

	// Group members (group_events.go; member.muted.v1 in group_events_v1.go, superseded by v2).
	{EventMemberInvited, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberInvited]},
	{EventMemberJoinRequested, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberJoinRequested]},
	{EventMemberJoinApproved, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberJoinApproved]},
	{EventMemberJoinRejected, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberJoinRejected]},
	{EventMemberJoined, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberJoined]},
	{EventMemberLeft, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberLeft]},
	{EventMemberRemoved, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberRemoved]},
	{EventMemberUnbanned, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberUnbanned]},
	{EventMemberRoleSet, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberRoleSet]},
	{EventMemberMuted, 2, CategoryBusiness, BizTypeMember, payloadOf[MemberMuted]},
	{EventMemberMutedV1, 1, CategoryBusiness, BizTypeMember, payloadOf[MemberMutedV1]},

	// Relations between users (relation.go).
	{EventFriendRequested, 1, CategoryBusiness, BizTypeRelation, payloadOf[FriendRequested]},
	{EventFriendAccepted, 1, CategoryBusiness, BizTypeRelation, payloadOf[FriendAccepted]},
	{EventFriendDeclined, 1, CategoryBusiness, BizTypeRelation, payloadOf[FriendDeclined]},
	{EventFriendRemoved, 1, CategoryBusiness, BizTypeRelation, payloadOf[FriendRemoved]},
	{EventUserBlocked, 1, CategoryBusiness, BizTypeRelation, payloadOf[UserBlocked]},
	{EventUserUnblocked, 1, CategoryBusiness, BizTypeRelation, payloadOf[UserUnblocked]},

	// Accounts: registration (account.go), status and credentials (account_status.go), profile
	// (profile.go) and login sessions (login_session.go).
	{EventUserRegistered, 1, CategoryBusiness, BizTypeUser, payloadOf[UserRegistered]},
	{EventUserErased, 1, CategoryBusiness, BizTypeUser, payloadOf[UserErased]},
	{EventUserBanned, 1, CategoryBusiness, BizTypeUser, payloadOf[UserBanned]},
	{EventUserUnbanned, 1, CategoryBusiness, BizTypeUser, payloadOf[UserUnbanned]},
	{EventUserKicked, 1, CategoryBusiness, BizTypeUser, payloadOf[UserKicked]},
	{EventUserTokensRevoked, 1, CategoryBusiness, BizTypeUser, payloadOf[UserTokensRevoked]},
	{EventUserPasswordReset, 1, CategoryBusiness, BizTypeUser, payloadOf[UserPasswordReset]},
	{EventUserPasswordChanged, 1, CategoryBusiness, BizTypeUser, payloadOf[UserPasswordChanged]},
	{EventUserContactChanged, 1, CategoryBusiness, BizTypeUser, payloadOf[UserContactChanged]},
	{EventUserProfileUpdated, 1, CategoryBusiness, BizTypeUser, payloadOf[UserProfileUpdated]},
	{EventUserDiscoverableSet, 1, CategoryBusiness, BizTypeUser, payloadOf[UserDiscoverableSet]},
	{EventUserSessionStarted, 1, CategoryBusiness, BizTypeUser, payloadOf[UserSessionStarted]},
	{EventUserSessionEnded, 1, CategoryBusiness, BizTypeUser, payloadOf[UserSessionEnded]},

	// Push devices and per-conversation push mutes (push.go).
	{EventPushDeviceRegistered, 1, CategoryBusiness, BizTypePush, payloadOf[PushDeviceRegistered]},
	{EventPushDeviceRemoved, 1, CategoryBusiness, BizTypePush, payloadOf[PushDeviceRemoved]},
	{EventPushConversationMuted, 1, CategoryBusiness, BizTypePush, payloadOf[PushConversationMuted]},
	{EventPushConversationUnmuted, 1, CategoryBusiness, BizTypePush, payloadOf[PushConversationUnmuted]},

	// WebSocket sessions (session.go).
	{EventSessionOpened, 1, CategorySession, "session", payloadOf[SessionOpened]},
	{EventSessionClosed, 1, CategorySession, "session", payloadOf[SessionClosed]},

	// Tenants: lifecycle and settings (tenant.go) and API keys (api_key.go) travel as config; a
	// broadcast to the tenant's users is a business event.
	{EventTenantProvisioned, 1, CategoryConfig, BizTypeTenant, payloadOf[TenantProvisioned]},
	{EventTenantSuspended, 1, CategoryConfig, BizTypeTenant, payloadOf[TenantSuspended]},
	{EventTenantResumed, 1, CategoryConfig, BizTypeTenant, payloadOf[TenantResumed]},
	{EventTenantConfigSet, 1, CategoryConfig, BizTypeTenant, payloadOf[TenantConfigSet]},
	{EventTenantRetentionApplied, 1, CategoryConfig, BizTypeTenant, payloadOf[TenantRetentionApplied]},
	{EventTenantAPIKeyCreated, 1, CategoryConfig, BizTypeTenant, payloadOf[TenantAPIKeyCreated]},
	{EventTenantAPIKeyRevoked, 1, CategoryConfig, BizTypeTenant, payloadOf[TenantAPIKeyRevoked]},
	{EventTenantBroadcastSent, 1, CategoryBusiness, BizTypeTenant, payloadOf[TenantBroadcastSent]},

	// Files (file.go).
	{EventFileCreated, 1, CategoryAudit, "file", payloadOf[FileCreated]},
	{EventFileUploaded, 1, CategoryAudit, "file", payloadOf[FileUploaded]},
	{EventFileAudited, 1, CategoryAudit, "file", payloadOf[FileAudited]},
	{EventFileDeleted, 1, CategoryAudit, "file", payloadOf[FileDeleted]},
	{EventFileRestored, 1, CategoryAudit, "file", payloadOf[FileRestored]},

	// Action tokens: one-time codes of registration, login and contact checks (action_token.go).
	{EventActionTokenIssued, 1, CategoryAudit, BizTypeActionToken, payloadOf[ActionTokenIssued]},
	{EventActionTokenConsumed, 1, CategoryAudit, BizTypeActionToken, payloadOf[ActionTokenConsumed]},
	{EventActionTokenRevoked, 1, CategoryAudit, BizTypeActionToken, payloadOf[ActionTokenRevoked]},
	{EventActionTokenUnconsumed, 1, CategoryAudit, BizTypeActionToken, payloadOf[ActionTokenUnconsumed]},
}

// upcasterTable lists every step from a superseded version of an event type to the next (see
// upcast.go). Both types must be in eventTable; the steps are checked when the package is
// initialised.
var upcasterTable = []Upcaster{
	{From: EventMemberMutedV1, To: EventMemberMuted, Fn: upcastMemberMutedV1,
		Note: "adds muted: true when until is present, false when it is absent (the event lifts the mute)"},
}

// payloadOf is the payload constructor of an event whose payload is a T: it returns a new *T.
func payloadOf[T any]() any { return new(T) }

// registry is the lookup map of eventTable.
var registry = indexEventTypes(eventTable)

// indexEventTypes returns the types of table by name; a name listed twice panics.
func indexEventTypes(table []EventInfo) map[EventType]EventInfo {
	m := make(map[EventType]EventInfo, len(table))
	for _, info := range table {
		if _, dup := m[info.Type]; dup {
			panic("domain: event type registered twice: " + string(info.Type))
		}
		m[info.Type] = info
	}
	return m
}

// Types added at run time by RegisterEventType. The map behind the pointer is never modified: a
// registration replaces it with a copy, so lookups read it without a lock; registrations are
// serialised by testTypesMu. In a production process the pointer stays nil.
var (
	testTypesMu sync.Mutex
	testTypes   atomic.Pointer[map[EventType]EventInfo]
)

// RegisterEventType adds an event type that is not in the table, for tests only: a test that
// plays a newer build which knows a type this one does not (say, a relay that resumes once the
// type is known) registers it while the process runs. Production event types are rows of
// eventTable, never registered. A name already known panics, as a name listed twice in the table
// does.
func RegisterEventType(info EventInfo) {
	testTypesMu.Lock()
	defer testTypesMu.Unlock()
	if _, dup := LookupEventType(info.Type); dup {
		panic("domain: event type registered twice: " + string(info.Type))
	}
	next := map[EventType]EventInfo{info.Type: info}
	if old := testTypes.Load(); old != nil {
		for t, i := range *old {
			next[t] = i
		}
	}
	testTypes.Store(&next)
}

// LookupEventType returns the registration of t.
func LookupEventType(t EventType) (EventInfo, bool) {
	if info, ok := registry[t]; ok {
		return info, true
	}
	if extra := testTypes.Load(); extra != nil {
		info, ok := (*extra)[t]
		return info, ok
	}
	return EventInfo{}, false
}

// EventTypes lists every registered event type, sorted by name.
func EventTypes() []EventInfo {
	out := make([]EventInfo, 0, len(registry))
	for _, i := range registry {
		out = append(out, i)
	}
	if extra := testTypes.Load(); extra != nil {
		for _, i := range *extra {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
