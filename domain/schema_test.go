package domain_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
)

// TestCheckedInSchemasMatch keeps domain/schemas/ equal to the schemas generated from the Go
// payload types. Regenerate with IM_UPDATE_SCHEMAS=1 go test ./domain -run CheckedInSchemas.
func TestCheckedInSchemasMatch(t *testing.T) {
	update := os.Getenv("IM_UPDATE_SCHEMAS") == "1"
	want := map[string]bool{}
	type generated struct {
		name   string
		schema func() ([]byte, error)
	}
	all := []generated{{domain.EnvelopeSchemaName, domain.EnvelopeSchema}}
	for _, info := range domain.EventTypes() {
		all = append(all, generated{string(info.Type) + ".json", func() ([]byte, error) { return domain.EventSchema(info) }})
	}
	for _, g := range all {
		gen, err := g.schema()
		if err != nil {
			t.Fatal(err)
		}
		gen = append(gen, '\n')
		name := g.name
		want[name] = true
		path := filepath.Join("schemas", name)
		if update {
			if err := os.MkdirAll("schemas", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, gen, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (regenerate with IM_UPDATE_SCHEMAS=1)", path, err)
			continue
		}
		if !bytes.Equal(got, gen) {
			t.Errorf("%s differs from the Go payload type (regenerate with IM_UPDATE_SCHEMAS=1)", path)
		}
	}
	entries, _ := os.ReadDir("schemas")
	for _, e := range entries {
		if !want[e.Name()] && strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("schemas/%s belongs to no registered event type", e.Name())
		}
	}
}

func TestSchemaFollowsWireConventions(t *testing.T) {
	t.Parallel()
	info, _ := domain.LookupEventType(domain.EventGroupMessageSent)
	raw, err := domain.EventSchema(info)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	for field, typ := range map[string]string{"seq": "string", "from": "string", "group_id": "string", "sent_at": "string", "head": "object"} {
		if s.Properties[field]["type"] != typ {
			t.Errorf("%s: type %v, want %s", field, s.Properties[field]["type"], typ)
		}
	}
	if _, ok := s.Properties["content"]["type"]; ok {
		t.Errorf("content must accept any JSON value, got %v", s.Properties["content"])
	}
	req := strings.Join(s.Required, ",")
	if !strings.Contains(req, "seq") || strings.Contains(req, "group_id") {
		t.Errorf("required = %v: seq is required, group_id is optional", s.Required)
	}
}

// TestCheckedInCommandSchemasMatch keeps domain/schemas/commands/ equal to the schemas generated
// from the admin command payload types and the command envelope and result. Regenerate with
// IM_UPDATE_SCHEMAS=1 go test ./domain -run CheckedInCommandSchemas.
func TestCheckedInCommandSchemasMatch(t *testing.T) {
	update := os.Getenv("IM_UPDATE_SCHEMAS") == "1"
	gen := map[string][]byte{}
	for _, info := range domain.AdminCommands() {
		b, err := domain.AdminCommandSchema(info)
		if err != nil {
			t.Fatal(err)
		}
		gen[string(info.Type)+".json"] = b
	}
	envs, err := domain.AdminEnvelopeSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range envs {
		gen[name+".json"] = b
	}
	dir := filepath.Join("schemas", "commands")
	for name, b := range gen {
		b = append(b, '\n')
		path := filepath.Join(dir, name)
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (regenerate with IM_UPDATE_SCHEMAS=1)", path, err)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s differs from the Go payload type (regenerate with IM_UPDATE_SCHEMAS=1)", path)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ok := gen[e.Name()]; !ok && strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("schemas/commands/%s belongs to no admin command", e.Name())
		}
	}
}

func TestCommandSchemaIDsAreStrings(t *testing.T) {
	t.Parallel()
	info, _ := domain.LookupAdminCommand(domain.CmdGroupRemoveMember)
	raw, err := domain.AdminCommandSchema(info)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"group_id", "user_id"} {
		if s.Properties[f]["type"] != "string" {
			t.Errorf("%s: type %v, want string", f, s.Properties[f]["type"])
		}
	}
	if strings.Join(s.Required, ",") != "group_id,user_id" {
		t.Errorf("required = %v, want group_id and user_id (ban is optional)", s.Required)
	}
}
