package domain

import (
	"encoding/json"
	"reflect"
	"sort"
	"time"

	"github.com/google/uuid"
)

// AdminCommandType names a command of the admin plane as "<subject>.<verb>". Like event types,
// the names are a wire contract and never renamed.
type AdminCommandType string

// The admin commands (DESIGN §5a, seed 004 §6.3).
const (
	CmdTenantProvision   AdminCommandType = "tenant.provision"
	CmdTenantSuspend     AdminCommandType = "tenant.suspend"
	CmdTenantResume      AdminCommandType = "tenant.resume"
	CmdTenantConfigSet   AdminCommandType = "tenant.config_set"
	CmdUserBan           AdminCommandType = "user.ban"
	CmdUserUnban         AdminCommandType = "user.unban"
	CmdUserKick          AdminCommandType = "user.kick"
	CmdUserRevokeTokens  AdminCommandType = "user.revoke_tokens"
	CmdUserResetPassword AdminCommandType = "user.reset_password"
	// CmdUserErase erases a user's account for good (DESIGN §7a).
	CmdUserErase         AdminCommandType = "user.erase"
	CmdGroupDissolve     AdminCommandType = "group.dissolve"
	CmdGroupMuteAll      AdminCommandType = "group.mute_all"
	CmdGroupRemoveMember AdminCommandType = "group.remove_member"
	CmdGroupTransfer     AdminCommandType = "group.transfer_owner"
	CmdGroupAnnounce     AdminCommandType = "group.set_announcement"
	CmdMessageRecall     AdminCommandType = "message.recall"
	CmdMessageBroadcast  AdminCommandType = "message.broadcast"
)

// AdminCommandVersion is the envelope version admin commands are written in; the consumer
// refuses others.
const AdminCommandVersion = 1

// Admin command payloads. Ids are strings on the wire, named as the REST API names them.

// TenantProvisionPayload creates the tenant named by the envelope's tenant_id, with optional
// initial settings.
type TenantProvisionPayload struct {
	Settings map[string]json.RawMessage `json:"settings,omitempty"`
}

// TenantSuspendPayload suspends the envelope's tenant.
type TenantSuspendPayload struct {
	Reason string `json:"reason,omitempty"`
}

// TenantResumePayload resumes the envelope's suspended tenant.
type TenantResumePayload struct{}

// TenantConfigSetPayload changes settings: each key a setting name, its value the new value or
// null to return to the node default.
type TenantConfigSetPayload struct {
	Settings map[string]json.RawMessage `json:"settings"`
}

// UserReasonPayload names a user and an optional reason (ban, unban, kick, revoke_tokens, erase).
type UserReasonPayload struct {
	UserID UserID `json:"user_id"`
	Reason string `json:"reason,omitempty"`
}

// UserResetPasswordPayload sets a user's password. The password is a Secret: sealed to the
// node on the wire, redacted wherever the command is stored or re-published.
type UserResetPasswordPayload struct {
	UserID   UserID `json:"user_id"`
	Password Secret `json:"password"`
}

// GroupPayload names a group (dissolve).
type GroupPayload struct {
	GroupID GroupID `json:"group_id"`
	Reason  string  `json:"reason,omitempty"`
}

// GroupMuteAllPayload turns mute-all on or off.
type GroupMuteAllPayload struct {
	GroupID GroupID `json:"group_id"`
	MuteAll bool    `json:"mute_all"`
}

// GroupRemoveMemberPayload removes a member, optionally banning them from the group.
type GroupRemoveMemberPayload struct {
	GroupID GroupID `json:"group_id"`
	UserID  UserID  `json:"user_id"`
	Ban     bool    `json:"ban,omitempty"`
}

// GroupTransferPayload hands a group to member To.
type GroupTransferPayload struct {
	GroupID GroupID `json:"group_id"`
	To      UserID  `json:"to"`
}

// GroupAnnouncementPayload sets (empty text: clears) a group's announcement.
type GroupAnnouncementPayload struct {
	GroupID GroupID `json:"group_id"`
	Text    string  `json:"text"`
}

// MessageRecallPayload recalls any message by moderation.
type MessageRecallPayload struct {
	Topic  string `json:"topic"`
	Seq    int64  `json:"seq,string"`
	Reason string `json:"reason"`
}

// MessageBroadcastPayload sends a system message to a group (GroupID set) or to every online
// user of the tenant (GroupID absent).
type MessageBroadcastPayload struct {
	GroupID GroupID         `json:"group_id,omitempty"`
	Content json.RawMessage `json:"content"`
}

// AdminCommandInfo describes an admin command type.
type AdminCommandInfo struct {
	Type AdminCommandType
	// Summary says what the command does, for the schema and docs/admin.md.
	Summary string
	// Payload returns a pointer to a new payload value.
	Payload func() any
	// CreatesTenant: the envelope's tenant need not exist yet.
	CreatesTenant bool
	// Platform: only a platform-wide producer key may send it (it creates a tenant or changes
	// what the platform grants one), never a key scoped to a tenant.
	Platform bool

	secrets []string // JSON names of the payload's Secret fields
}

var adminCommands = map[AdminCommandType]AdminCommandInfo{}

func registerAdmin(info AdminCommandInfo) {
	if _, dup := adminCommands[info.Type]; dup {
		panic("domain: admin command registered twice: " + string(info.Type))
	}
	info.secrets = secretFieldsOf(reflect.TypeOf(info.Payload()))
	adminCommands[info.Type] = info
}

// LookupAdminCommand returns the description of t.
func LookupAdminCommand(t AdminCommandType) (AdminCommandInfo, bool) {
	info, ok := adminCommands[t]
	return info, ok
}

// AdminCommands lists every admin command type, sorted by name.
func AdminCommands() []AdminCommandInfo {
	out := make([]AdminCommandInfo, 0, len(adminCommands))
	for _, i := range adminCommands {
		out = append(out, i)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// AdminCommand is a command of the admin plane as it travels on im.admin.command: the event
// envelope of seed 004 §8 with the command type as event_type and its payload. tenant_id is kept
// as text so a malformed one is answered with a reason rather than dropped.
type AdminCommand struct {
	EventID        uuid.UUID       `json:"event_id"`
	ParentEventID  *uuid.UUID      `json:"parent_event_id,omitempty"`
	TraceID        string          `json:"trace_id,omitempty"`
	TenantID       string          `json:"tenant_id"`
	SourceService  string          `json:"source_service"`
	TargetService  string          `json:"target_service,omitempty"`
	EventType      string          `json:"event_type"`
	BizType        string          `json:"biz_type,omitempty"`
	BizID          string          `json:"biz_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Version        int             `json:"version"`
	OccurredAt     time.Time       `json:"occurred_at"`
	Actor          Actor           `json:"actor"`
	Payload        json.RawMessage `json:"payload"`
}

// The statuses of an admin command result.
const (
	AdminSucceeded = "succeeded"
	AdminRejected  = "rejected"
	AdminFailed    = "failed"
)

// AdminResult is the answer to one admin command on im.admin.command.result, keyed like the
// command. Status is succeeded, rejected (with a stable Reason, nothing changed) or failed (the
// command was retried, then dead-lettered; it may be replayed). Actor is who the command ran as:
// the identity of the producer key it was verified with, with that key's id (the envelope's
// actor, without a key id, for an unsigned command the embedded broker accepted); it is absent
// on a record refused before its producer was established, whose event_id proves nothing.
type AdminResult struct {
	CommandEventID string          `json:"command_event_id"`
	ParentEventID  string          `json:"parent_event_id,omitempty"`
	TenantID       string          `json:"tenant_id"`
	EventType      string          `json:"event_type"`
	TraceID        string          `json:"trace_id,omitempty"`
	Status         string          `json:"status"`
	Reason         string          `json:"reason,omitempty"`
	Details        map[string]any  `json:"details,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	ConsumerGroup  string          `json:"consumer_group"`
	SourceService  string          `json:"source_service"`
	OccurredAt     time.Time       `json:"occurred_at"`
	Actor          *Actor          `json:"actor,omitempty"`
}

func init() {
	for _, i := range []AdminCommandInfo{
		{Type: CmdTenantProvision, CreatesTenant: true, Platform: true, Payload: func() any { return &TenantProvisionPayload{} },
			Summary: "Create the tenant named by tenant_id (its MySQL database and its registry entry) with optional settings; an existing tenant is unchanged."},
		{Type: CmdTenantSuspend, Platform: true, Payload: func() any { return &TenantSuspendPayload{} },
			Summary: "Suspend the tenant: its logins, tokens, REST and WebSocket are refused and its open sessions end; tokens issued before stay refused after a resume."},
		{Type: CmdTenantResume, Platform: true, Payload: func() any { return &TenantResumePayload{} },
			Summary: "Resume a suspended tenant."},
		{Type: CmdTenantConfigSet, Platform: true, Payload: func() any { return &TenantConfigSetPayload{} },
			Summary: "Change tenant settings (registration_open, max_content_bytes, register_requires_code, login_requires_code, rate_limits, retention_months); null returns a setting to the node default."},
		{Type: CmdUserBan, Payload: func() any { return &UserReasonPayload{} },
			Summary: "Ban a user: logins and tokens are refused and open sessions end on every node."},
		{Type: CmdUserUnban, Payload: func() any { return &UserReasonPayload{} },
			Summary: "Lift a ban; tokens issued before the ban stay refused."},
		{Type: CmdUserKick, Payload: func() any { return &UserReasonPayload{} },
			Summary: "End every session of a user on every node; the user may log in again."},
		{Type: CmdUserRevokeTokens, Payload: func() any { return &UserReasonPayload{} },
			Summary: "Refuse every token of a user issued before now, on every node, and end the sessions opened with them."},
		{Type: CmdUserResetPassword, Payload: func() any { return &UserResetPasswordPayload{} },
			Summary: "Set a user's password and revoke the user's tokens issued before now."},
		{Type: CmdUserErase, Payload: func() any { return &UserReasonPayload{} },
			Summary: "Erase a user for good: their data keys are destroyed, so their messages, profile and file names read as erased everywhere; the login name is freed and every session ends on every node. The reason is not recorded."},
		{Type: CmdGroupDissolve, Payload: func() any { return &GroupPayload{} },
			Summary: "Dissolve a group on behalf of its owner."},
		{Type: CmdGroupMuteAll, Payload: func() any { return &GroupMuteAllPayload{} },
			Summary: "Turn a group's mute-all on or off."},
		{Type: CmdGroupRemoveMember, Payload: func() any { return &GroupRemoveMemberPayload{} },
			Summary: "Remove a member (not the owner) from a group, optionally with a ban."},
		{Type: CmdGroupTransfer, Payload: func() any { return &GroupTransferPayload{} },
			Summary: "Hand a group to another member."},
		{Type: CmdGroupAnnounce, Payload: func() any { return &GroupAnnouncementPayload{} },
			Summary: "Set or clear a group's announcement."},
		{Type: CmdMessageRecall, Payload: func() any { return &MessageRecallPayload{} },
			Summary: "Recall any message by moderation, with a recorded reason."},
		{Type: CmdMessageBroadcast, Payload: func() any { return &MessageBroadcastPayload{} },
			Summary: "Send a system message to a group, or to every online user of the tenant."},
	} {
		registerAdmin(i)
	}
}
