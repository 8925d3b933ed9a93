package domain

import (
	"encoding/json"
	"time"
)

// Superseded versions of business event types. Their events stay in the store as they were
// written and are published as stored; Upcast turns them into the current version on read, so
// nothing but the upcasters below and the stream contract deals with them. The types and their
// upcasters are listed in registry.go.

// EventMemberMutedV1 is the first version of member.muted, superseded by EventMemberMuted.
const EventMemberMutedV1 EventType = "member.muted.v1"

// MemberMutedV1 is the payload of member.muted.v1: User may not post before Until; a zero Until
// (omitted in JSON) lifts the mute.
type MemberMutedV1 struct {
	GroupID GroupID   `json:"group_id"`
	User    UserID    `json:"user"`
	Until   time.Time `json:"until,omitzero"`
	By      UserID    `json:"by"`
	MutedAt time.Time `json:"muted_at"`
}

// upcastMemberMutedV1 adds what v1 said by omission: an event with until mutes, one without lifts.
func upcastMemberMutedV1(env Envelope) (json.RawMessage, error) {
	var v1 MemberMutedV1
	if err := json.Unmarshal(env.Payload, &v1); err != nil {
		return nil, err
	}
	return json.Marshal(MemberMuted{GroupID: v1.GroupID, User: v1.User, Muted: !v1.Until.IsZero(),
		Until: v1.Until, By: v1.By, MutedAt: v1.MutedAt})
}
