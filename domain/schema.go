package domain

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"
)

// EventSchema returns the JSON Schema (draft 2020-12) of an event type's payload, generated from
// its registered Go payload type with the wire conventions of this package: encoding.TextMarshaler
// types (ids, topics) and numbers tagged `,string` are strings, time.Time is an RFC 3339 string,
// json.RawMessage (message content) is any JSON value. The schemas are checked in under
// domain/schemas/ so analysts can validate a stream without the Go code.
func EventSchema(info EventInfo) ([]byte, error) {
	if info.Payload == nil {
		return nil, fmt.Errorf("event type %s has no payload type", info.Type)
	}
	t := reflect.TypeOf(info.Payload())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := schemaOf(t, false)
	s["$schema"] = schemaDialect
	s["$id"] = "imledger:event:" + string(info.Type)
	s["title"] = string(info.Type)
	desc := fmt.Sprintf("Payload of %s (schema version %d, category %s, biz_type %s).",
		info.Type, info.SchemaVersion, info.Category, info.BizType)
	if cur := CurrentType(info.Type); cur != info.Type {
		for _, u := range Upcasters() {
			if u.From == info.Type {
				desc += fmt.Sprintf(" Superseded by %s, which readers upcast it to: %s.", u.To, u.Note)
			}
		}
	}
	s["description"] = desc
	return json.MarshalIndent(s, "", "  ")
}

// schemaDialect is the JSON Schema version of every schema here.
const schemaDialect = "https://json-schema.org/draft/2020-12/schema"

// EnvelopeSchemaName is the file name of the envelope's schema among the checked-in schemas.
const EnvelopeSchemaName = "envelope.json"

// EnvelopeSchema returns the JSON Schema (draft 2020-12) of the envelope, generated from Envelope
// with the conventions of EventSchema. The payload is an object described by the schema of the
// envelope's event_type.
func EnvelopeSchema() ([]byte, error) {
	s := structSchema(reflect.TypeFor[Envelope]())
	props := s["properties"].(map[string]any)
	props["event_type"] = map[string]any{"type": "string", "pattern": `^[a-z][a-z_]*(\.[a-z][a-z_]*)*\.v[1-9][0-9]*$`,
		"description": "explicit, versioned name of the payload's type; never a Go type name"}
	props["version"] = map[string]any{"type": "integer", "minimum": 1,
		"description": "schema version of the payload: the number after the last .v of event_type"}
	props["payload"] = map[string]any{"type": "object",
		"description": "the event's data, described by the schema of event_type"}
	props["position"].(map[string]any)["description"] = "global append order in the event store (not commit order)"
	props["stream_version"].(map[string]any)["description"] = "version of stream_id; the message seq for a conversation's message stream"
	s["$schema"] = schemaDialect
	s["$id"] = "imledger:envelope"
	s["title"] = "envelope"
	s["description"] = "An imledger event: the Kafka record value on every event topic, a line of a JSON Lines " +
		"export. 64-bit numbers are strings."
	return json.MarshalIndent(s, "", "  ")
}

var (
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	uuidType      = reflect.TypeFor[uuid.UUID]()
)

// schemaOf describes t; asString is set for fields tagged `,string`.
func schemaOf(t reflect.Type, asString bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == secretType:
		return secretSchema()
	case t == rawType:
		return map[string]any{"description": "any JSON value"}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == uuidType:
		return map[string]any{"type": "string", "format": "uuid"}
	case t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler):
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if asString {
			return map[string]any{"type": "string", "pattern": "^-?[0-9]+$"}
		}
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), false)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), false)}
	case reflect.Struct:
		return structSchema(t)
	}
	return map[string]any{}
}

// secretSchema describes a Secret: a sealed secret, the redaction marker, or (accepted only
// where unsigned commands are) a plain string.
func secretSchema() map[string]any {
	sealed := structSchema(reflect.TypeFor[SealedSecret]())
	sealed["additionalProperties"] = false
	sealed["description"] = "sealed with HPKE to the node's command-secrets key key_id (enc and ciphertext standard base64)"
	sealed["properties"].(map[string]any)["sealed"] = map[string]any{"const": "hpke-x25519-sha256-aes256gcm"}
	return map[string]any{
		"description": "a secret: sealed to the node; {\"redacted\": true} in stored and re-published copies; " +
			"a plain string only where the node accepts unsigned commands (the embedded broker)",
		"oneOf": []any{
			sealed,
			map[string]any{"type": "object", "properties": map[string]any{"redacted": map[string]any{"const": true}},
				"required": []string{"redacted"}, "additionalProperties": false},
			map[string]any{"type": "string"},
		},
	}
}

// structSchema describes the exported fields of a struct by their json tags. Fields without
// omitempty or omitzero are required: encoding/json leaves the others out when they are empty.
func structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = schemaOf(f.Type, strings.Contains(opts, "string"))
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// AdminCommandSchema returns the JSON Schema (draft 2020-12) of an admin command's payload,
// generated from its Go payload type with the conventions of EventSchema. The schemas are
// checked in under domain/schemas/commands/.
func AdminCommandSchema(info AdminCommandInfo) ([]byte, error) {
	if info.Payload == nil {
		return nil, fmt.Errorf("admin command %s has no payload type", info.Type)
	}
	return typeSchema(reflect.TypeOf(info.Payload()), "imledger:command:"+string(info.Type), string(info.Type),
		fmt.Sprintf("Payload of the admin command %s (envelope version %d): %s", info.Type, AdminCommandVersion, info.Summary))
}

// AdminEnvelopeSchemas returns the JSON Schemas of the admin command envelope and of its result,
// named admin.command and admin.command.result.
func AdminEnvelopeSchemas() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, v := range map[string]struct {
		t    reflect.Type
		desc string
	}{
		"admin.command": {reflect.TypeFor[AdminCommand](),
			"An admin command on im.admin.command (seed 004 §8 envelope); event_type is the command type, payload its payload."},
		"admin.command.result": {reflect.TypeFor[AdminResult](),
			"The answer to an admin command on im.admin.command.result, keyed like the command."},
	} {
		b, err := typeSchema(v.t, "imledger:"+name, name, v.desc)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// typeSchema describes t as a top-level schema.
func typeSchema(t reflect.Type, id, title, desc string) ([]byte, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := schemaOf(t, false)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = id
	s["title"] = title
	s["description"] = desc
	return json.MarshalIndent(s, "", "  ")
}
