package jsonschema_test

import (
	"strings"
	"testing"

	"github.com/imledger/imledger/internal/jsonschema"
)

const schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "id": {"type": "string", "format": "uuid"},
    "at": {"type": "string", "format": "date-time"},
    "seq": {"type": "string", "pattern": "^-?[0-9]+$"},
    "n": {"type": "integer", "minimum": 1},
    "kind": {"type": "string", "enum": ["a", "b"]},
    "tags": {"type": "array", "items": {"type": "string"}},
    "any": {"description": "any JSON value"},
    "inner": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"], "additionalProperties": false}
  },
  "required": ["id", "seq"]
}`

func TestValidate(t *testing.T) {
	t.Parallel()
	s, err := jsonschema.Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	ok := `{"id":"0190c0de-0000-7000-8000-000000000001","at":"2026-01-02T03:04:05.123Z","seq":"42","n":3,
		"kind":"a","tags":["x"],"any":[1,{"y":null}],"inner":{"x":true},"extra":1}`
	if err := s.Validate([]byte(ok)); err != nil {
		t.Fatalf("valid document refused: %v", err)
	}
	for _, c := range []struct{ doc, want string }{
		{`{"seq":"1"}`, `required property "id"`},
		{`{"id":"nope","seq":"1"}`, "/id"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":1}`, "/seq: is a number"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"x1"}`, "does not match"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"1","at":"yesterday"}`, "date-time"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"1","n":0}`, "minimum"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"1","n":1.5}`, "integer"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"1","kind":"c"}`, "one of"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"1","tags":[1]}`, "/tags/0"},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"1","inner":{"x":true,"y":1}}`, `"y" is not allowed`},
		{`{"id":"0190c0de-0000-7000-8000-000000000001","seq":"1","inner":{}}`, `"x" is missing`},
	} {
		err := s.Validate([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%s) = %v, want an error containing %q", c.doc, err, c.want)
		}
	}
}

func TestCompileRefusesUnknownKeywords(t *testing.T) {
	t.Parallel()
	if _, err := jsonschema.Compile([]byte(`{"type":"object","oneOf":[]}`)); err == nil {
		t.Fatal("a schema with oneOf compiled; unsupported keywords must not be ignored")
	}
}
