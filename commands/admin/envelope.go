package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// Stable reasons of rejected commands, besides the refusal reasons of the command handlers
// (domain.Deny reasons such as group_dissolved, cannot_remove_owner, already_recalled). Admin
// systems may switch on them; they are never renamed.
const (
	// ReasonInvalidEnvelope: the record is not a command envelope (not UTF-8 JSON, no event_id
	// or event_type, a string with control characters or past MaxEnvelopeString, a target_service
	// other than imledger, no source_service, occurred_at or payload).
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
	// ReasonEventIDReused: the event_id names a command this consumer group already took, for
	// another tenant, command type or payload; nothing ran and the other command's result is not
	// shown.
	ReasonEventIDReused = "event_id_reused"
	// ReasonPermanentFailure: a store refused the command's data (an SQL data or constraint error
	// retrying cannot fix); status failed, recorded and dead-lettered after one attempt.
	ReasonPermanentFailure = "permanent_failure"
	// ReasonResultTooLarge: the command's result did not fit Config.MaxResultBytes; it was
	// replaced by this small failed result, whose details keep the original status and reason.
	ReasonResultTooLarge = "result_too_large"

	// The refusals of the trust checks (DESIGN §7a). A record refused so is answered without
	// being claimed or written anywhere; its result has no actor, and its command_event_id is
	// only what the record claims.

	// ReasonSignatureRequired: the record is not signed (none of the headers im-key-id,
	// im-signed-at, im-signature) and the consumer does not accept unsigned commands.
	ReasonSignatureRequired = "signature_required"
	// ReasonSignatureInvalid: the signature headers are incomplete, repeated or malformed, or the
	// signature does not verify over the record (its value or key changed, or another key made it).
	ReasonSignatureInvalid = "signature_invalid"
	// ReasonUnknownKey: no producer key of the consumer has the record's key id.
	ReasonUnknownKey = "unknown_key"
	// ReasonStaleCommand: the signing time is older than the replay window, or later than the
	// clock leeway allows; produce the command again, signed now (a new event_id if it ran).
	ReasonStaleCommand = "stale_command"
	// ReasonKeyScope: the key is scoped to another tenant, or the command (tenant.*) needs a
	// platform-wide key.
	ReasonKeyScope = "key_scope"
	// ReasonActorMismatch: the envelope's actor names someone other than the signing key's
	// identity, or claims a key id it was not verified with.
	ReasonActorMismatch = "actor_mismatch"
	// ReasonSecretNotSealed: a secret field (a password) is plain text and the consumer accepts
	// only sealed secrets.
	ReasonSecretNotSealed = "secret_not_sealed"
	// ReasonSecretRedacted: a secret field holds the redaction marker: the command is a redacted
	// copy (of a failure or a dead letter); send it again with its secret.
	ReasonSecretRedacted = "secret_redacted"
	// ReasonSecretUnreadable: a sealed secret field names no command-secrets key of the node, or
	// does not open for this command and field.
	ReasonSecretUnreadable = "secret_unreadable"
)

// MaxEnvelopeString bounds every string of a command envelope (trace_id, tenant_id,
// source_service, target_service, event_type, biz_type, biz_id, idempotency_key and the actor's
// type and id), in bytes. A longer one is invalid_envelope; a result never echoes more of one.
const MaxEnvelopeString = 256

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
// a rejection and a nil id; a value that is not UTF-8 or has an envelope string that is not
// clean text (see screen) fails with a rejection and its id. Other envelope faults are reported
// by check. A record that fails here is answered at once: nothing of it is written anywhere.
func decodeCommand(value []byte) (domain.AdminCommand, error) {
	var cmd domain.AdminCommand
	if err := json.Unmarshal(value, &cmd); err != nil {
		var id struct {
			EventID uuid.UUID `json:"event_id"`
		}
		_ = json.Unmarshal(value, &id)
		cmd.EventID = id.EventID
		return cmd, reject(ReasonInvalidEnvelope, "not a command envelope: "+echo(err.Error()), nil)
	}
	if cmd.EventID == uuid.Nil {
		return cmd, reject(ReasonInvalidEnvelope, "event_id is required", map[string]any{"field": "event_id"})
	}
	if !utf8.Valid(value) {
		// encoding/json turned the bad bytes into U+FFFD; PostgreSQL would refuse them.
		return cmd, reject(ReasonInvalidEnvelope, "the record is not UTF-8", map[string]any{"reason": "bad_format"})
	}
	return cmd, screen(cmd)
}

// screen refuses an envelope string that PostgreSQL, a Kafka header or a log line should not
// take: a control character (NUL included) or more than MaxEnvelopeString bytes.
func screen(cmd domain.AdminCommand) error {
	for _, f := range [...]struct{ name, v string }{
		{"event_type", cmd.EventType}, {"tenant_id", cmd.TenantID}, {"trace_id", cmd.TraceID},
		{"source_service", cmd.SourceService}, {"target_service", cmd.TargetService}, {"biz_type", cmd.BizType},
		{"biz_id", cmd.BizID}, {"idempotency_key", cmd.IdempotencyKey}, {"actor.type", cmd.Actor.Type}, {"actor.id", cmd.Actor.ID},
	} {
		reason, detail := "", ""
		switch {
		case len(f.v) > MaxEnvelopeString:
			reason, detail = "too_long", fmt.Sprintf("%d bytes, at most %d", len(f.v), MaxEnvelopeString)
		case !utf8.ValidString(f.v) || strings.IndexFunc(f.v, unicode.IsControl) >= 0:
			reason, detail = "bad_format", "control characters are not allowed"
		default:
			continue
		}
		return reject(ReasonInvalidEnvelope, f.name+": "+detail, map[string]any{"field": f.name, "reason": reason})
	}
	return nil
}

// echo is s as a result, a header or a log may repeat it: s itself when it is clean text of at
// most MaxEnvelopeString bytes, else a prefix of it with control characters and bad bytes
// replaced by U+FFFD and an ellipsis.
func echo(s string) string {
	if len(s) <= MaxEnvelopeString && utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	const keep = 64
	cut := len(s) > keep
	if cut {
		s = s[:keep]
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
	if cut {
		s += "…"
	}
	return s
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
		return c, reject(ReasonUnknownCommand, echo(cmd.EventType), map[string]any{"event_type": echo(cmd.EventType)})
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
		return c, reject(ReasonInvalidEnvelope, "target_service "+echo(cmd.TargetService), map[string]any{"field": "target_service"})
	}
	// The other fields admin.command.json requires (event_id, event_type, version, tenant_id and
	// actor are checked on their own).
	for _, f := range [...]struct {
		name    string
		missing bool
	}{{"source_service", cmd.SourceService == ""}, {"occurred_at", cmd.OccurredAt.IsZero()}, {"payload", len(cmd.Payload) == 0}} {
		if f.missing {
			return c, reject(ReasonInvalidEnvelope, f.name+" is required", map[string]any{"field": f.name, "reason": "required"})
		}
	}
	if (cmd.Actor.Type != domain.ActorAdmin && cmd.Actor.Type != domain.ActorSystem) || !actorIDRe.MatchString(cmd.Actor.ID) {
		return c, reject(ReasonActorForbidden, fmt.Sprintf("actor %q/%q", echo(cmd.Actor.Type), echo(cmd.Actor.ID)),
			map[string]any{"field": "actor"})
	}
	if len(allowedSources) > 0 && !slices.Contains(allowedSources, cmd.SourceService) {
		return c, reject(ReasonActorForbidden, "source_service "+echo(cmd.SourceService), map[string]any{"field": "source_service"})
	}
	return c, nil
}

// decodePayload unmarshals the payload strictly into the command's payload type: unknown fields,
// ids in the wrong form and a missing or null required field (one its schema requires: a field
// of the payload type without omitempty, see domain.AdminCommandSchema) are invalid_payload.
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
		return nil, &domain.ValidationError{Field: "payload", Reason: "bad_json", Detail: echo(err.Error())}
	}
	if req := requiredFields(reflect.TypeOf(p)); len(req) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, &domain.ValidationError{Field: "payload", Reason: "bad_json", Detail: echo(err.Error())}
		}
		for _, name := range req {
			if v, ok := fields[name]; !ok || string(bytes.TrimSpace(v)) == "null" {
				return nil, &domain.ValidationError{Field: name, Reason: "required"}
			}
		}
	}
	return p, nil
}

var requiredCache sync.Map // reflect.Type → []string

// requiredFields lists the JSON names of the fields of struct type t (or *t) that its schema
// requires: those whose json tag has neither omitempty nor omitzero, the rule
// domain.AdminCommandSchema writes the schemas with.
func requiredFields(t reflect.Type) []string {
	if v, ok := requiredCache.Load(t); ok {
		return v.([]string)
	}
	st := t
	for st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	var out []string
	if st.Kind() == reflect.Struct {
		for i := range st.NumField() {
			f := st.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				out = append(out, name)
			}
		}
	}
	requiredCache.Store(t, out)
	return out
}
