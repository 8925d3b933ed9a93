package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// Stable reasons of rejected commands, besides the refusal reasons of the command handlers
// (domain.Deny reasons such as group_dissolved, cannot_remove_owner, already_recalled). Admin
// systems may switch on them; they are never renamed.
const (
	// ReasonInvalidEnvelope: the record is not a command envelope (not JSON, no event_id or
	// event_type, a target_service other than imledger).
	ReasonInvalidEnvelope = "invalid_envelope"
	// ReasonUnknownCommand: event_type names no admin command.
	ReasonUnknownCommand = "unknown_command"
	// ReasonUnsupportedVersion: the envelope version is not domain.AdminCommandVersion.
	ReasonUnsupportedVersion = "unsupported_version"
	// ReasonActorForbidden: the actor is not an administrator ({type: admin|system, id}) or the
	// source_service is not allowed.
	ReasonActorForbidden = "actor_forbidden"
	// ReasonInvalidPayload: the payload does not fit the command's schema; details name the field.
	ReasonInvalidPayload = "invalid_payload"
	// ReasonNotFound: the group, message or user acted on does not exist.
	ReasonNotFound = "not_found"
	// ReasonConflict: the state changed while the command was decided; look again and resend.
	ReasonConflict = "conflict"
	// ReasonRetriesExhausted: the command failed transiently on every attempt (status failed).
	ReasonRetriesExhausted = "retries_exhausted"
)

// rejection is a command refused before it ran, with its reason and details.
type rejection struct {
	reason  string
	detail  string
	details map[string]any
}

func (r *rejection) Error() string {
	if r.detail == "" {
		return "rejected: " + r.reason
	}
	return "rejected: " + r.reason + ": " + r.detail
}

func reject(reason, detail string, details map[string]any) error {
	return &rejection{reason: reason, detail: detail, details: details}
}

// decodeCommand parses a record value. A value that is not JSON or lacks an event id fails with
// a rejection and a nil id; other envelope faults are reported by check.
func decodeCommand(value []byte) (domain.AdminCommand, error) {
	var cmd domain.AdminCommand
	if err := json.Unmarshal(value, &cmd); err != nil {
		var id struct {
			EventID uuid.UUID `json:"event_id"`
		}
		_ = json.Unmarshal(value, &id)
		cmd.EventID = id.EventID
		return cmd, reject(ReasonInvalidEnvelope, "not a command envelope: "+err.Error(), nil)
	}
	if cmd.EventID == uuid.Nil {
		return cmd, reject(ReasonInvalidEnvelope, "event_id is required", map[string]any{"field": "event_id"})
	}
	return cmd, nil
}

var actorIDRe = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,64}$`)

// checked is a command that passed the envelope checks.
type checked struct {
	domain.AdminCommand
	tenant domain.TenantID
	info   domain.AdminCommandInfo
}

// check validates the envelope: event type, version, tenant id, target, actor and source. The
// tenant's existence is checked by the consumer.
func check(cmd domain.AdminCommand, allowedSources []string) (checked, error) {
	c := checked{AdminCommand: cmd}
	if cmd.EventType == "" {
		return c, reject(ReasonInvalidEnvelope, "event_type is required", map[string]any{"field": "event_type"})
	}
	info, ok := domain.LookupAdminCommand(domain.AdminCommandType(cmd.EventType))
	if !ok {
		return c, reject(ReasonUnknownCommand, cmd.EventType, map[string]any{"event_type": cmd.EventType})
	}
	c.info = info
	if cmd.Version != domain.AdminCommandVersion {
		return c, reject(ReasonUnsupportedVersion, fmt.Sprint(cmd.Version),
			map[string]any{"version": cmd.Version, "supported": domain.AdminCommandVersion})
	}
	t, err := domain.NewTenantID(cmd.TenantID)
	if err != nil {
		return c, reject(ReasonInvalidEnvelope, "tenant_id: "+err.Error(), map[string]any{"field": "tenant_id"})
	}
	c.tenant = t
	if cmd.TargetService != "" && cmd.TargetService != domain.SourceService {
		return c, reject(ReasonInvalidEnvelope, "target_service "+cmd.TargetService, map[string]any{"field": "target_service"})
	}
	if (cmd.Actor.Type != domain.ActorAdmin && cmd.Actor.Type != domain.ActorSystem) || !actorIDRe.MatchString(cmd.Actor.ID) {
		return c, reject(ReasonActorForbidden, fmt.Sprintf("actor %q/%q", cmd.Actor.Type, cmd.Actor.ID),
			map[string]any{"field": "actor"})
	}
	if len(allowedSources) > 0 && !slices.Contains(allowedSources, cmd.SourceService) {
		return c, reject(ReasonActorForbidden, "source_service "+cmd.SourceService, map[string]any{"field": "source_service"})
	}
	return c, nil
}

// decodePayload unmarshals the payload strictly into the command's payload type: unknown fields
// and ids in the wrong form are invalid_payload.
func decodePayload(c checked) (any, error) {
	p := c.info.Payload()
	raw := c.Payload
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			return nil, err
		}
		return nil, &domain.ValidationError{Field: "payload", Reason: "bad_json", Detail: err.Error()}
	}
	return p, nil
}
