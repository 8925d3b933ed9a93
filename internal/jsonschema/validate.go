package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Schema is a compiled schema. It is safe for concurrent use.
type Schema struct {
	root map[string]any
	mu   sync.Mutex
	res  map[string]*regexp.Regexp
}

// Compile parses a schema document and checks that it uses only the supported keywords.
func Compile(doc []byte) (*Schema, error) {
	var root map[string]any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("jsonschema: parse schema: %w", err)
	}
	s := &Schema{root: root, res: map[string]*regexp.Regexp{}}
	if err := s.check(root, "#"); err != nil {
		return nil, err
	}
	return s, nil
}

// known lists the supported keywords; annotations are accepted and ignored.
var known = map[string]bool{
	"$schema": true, "$id": true, "title": true, "description": true, "type": true, "properties": true,
	"required": true, "additionalProperties": true, "items": true, "enum": true, "const": true,
	"minimum": true, "pattern": true, "format": true,
}

func (s *Schema) check(node map[string]any, path string) error {
	for k, v := range node {
		if !known[k] {
			return fmt.Errorf("jsonschema: %s: unsupported keyword %q", path, k)
		}
		switch k {
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("jsonschema: %s/properties: not an object", path)
			}
			for name, p := range props {
				sub, ok := p.(map[string]any)
				if !ok {
					return fmt.Errorf("jsonschema: %s/properties/%s: not a schema", path, name)
				}
				if err := s.check(sub, path+"/properties/"+name); err != nil {
					return err
				}
			}
		case "items", "additionalProperties":
			if sub, ok := v.(map[string]any); ok {
				if err := s.check(sub, path+"/"+k); err != nil {
					return err
				}
			}
		case "pattern":
			p, ok := v.(string)
			if !ok {
				return fmt.Errorf("jsonschema: %s/pattern: not a string", path)
			}
			if _, err := s.regexp(p); err != nil {
				return fmt.Errorf("jsonschema: %s/pattern: %w", path, err)
			}
		}
	}
	return nil
}

func (s *Schema) regexp(p string) (*regexp.Regexp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if re, ok := s.res[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	s.res[p] = re
	return re, nil
}

// Validate checks doc, a JSON document, against the schema and returns every violation found,
// each naming its JSON pointer, joined into one error; nil when doc conforms.
func (s *Schema) Validate(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("jsonschema: not JSON: %w", err)
	}
	var errs []error
	s.validate(s.root, v, "", &errs)
	return errors.Join(errs...)
}

func (s *Schema) validate(node map[string]any, v any, ptr string, errs *[]error) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: %s", pointer(ptr), fmt.Sprintf(format, args...)))
	}
	if t, ok := node["type"]; ok && !typeMatches(t, v) {
		fail("is %s, want type %v", typeName(v), t)
		return
	}
	if want, ok := node["const"]; ok && !equal(want, v) {
		fail("is %v, want %v", v, want)
	}
	if enum, ok := node["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			found = found || equal(e, v)
		}
		if !found {
			fail("is %v, want one of %v", v, enum)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		s.validateObject(node, x, ptr, errs)
	case []any:
		if items, ok := node["items"].(map[string]any); ok {
			for i, e := range x {
				s.validate(items, e, fmt.Sprintf("%s/%d", ptr, i), errs)
			}
		}
	case string:
		if p, ok := node["pattern"].(string); ok {
			if re, err := s.regexp(p); err == nil && !re.MatchString(x) {
				fail("%q does not match %s", x, p)
			}
		}
		if f, ok := node["format"].(string); ok && !formatMatches(f, x) {
			fail("%q is not a %s", x, f)
		}
	case json.Number:
		if m, ok := node["minimum"].(float64); ok {
			if n, err := x.Float64(); err == nil && n < m {
				fail("is %s, below the minimum %v", x, m)
			}
		}
	}
}

func (s *Schema) validateObject(node map[string]any, obj map[string]any, ptr string, errs *[]error) {
	props, _ := node["properties"].(map[string]any)
	if req, ok := node["required"].([]any); ok {
		for _, r := range req {
			if name, _ := r.(string); name != "" {
				if _, has := obj[name]; !has {
					*errs = append(*errs, fmt.Errorf("%s: required property %q is missing", pointer(ptr), name))
				}
			}
		}
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		child := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		if sub, ok := props[k].(map[string]any); ok {
			s.validate(sub, obj[k], child, errs)
			continue
		}
		switch ap := node["additionalProperties"].(type) {
		case bool:
			if !ap {
				*errs = append(*errs, fmt.Errorf("%s: property %q is not allowed", pointer(ptr), k))
			}
		case map[string]any:
			s.validate(ap, obj[k], child, errs)
		}
	}
}

func pointer(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func typeMatches(t any, v any) bool {
	switch tt := t.(type) {
	case string:
		return oneType(tt, v)
	case []any:
		for _, x := range tt {
			if name, _ := x.(string); oneType(name, v) {
				return true
			}
		}
	}
	return false
}

func oneType(name string, v any) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	}
	return false
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func formatMatches(f, s string) bool {
	switch f {
	case "date-time":
		_, err := time.Parse(time.RFC3339Nano, s)
		return err == nil
	case "uuid":
		_, err := uuid.Parse(s)
		return err == nil && len(s) == 36
	}
	return true
}

// equal compares two decoded JSON values; numbers by their value.
func equal(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
