package config

import (
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"
)

// flatten walks a configuration struct and returns its leaves keyed by dotted koanf paths. A
// field's key is its `koanf` tag, or the snake_case of its name when it has none (the form the
// component packages' Config structs get). Fields tagged `koanf:"-"`, unexported fields and
// values that are not configuration (funcs, interfaces, pointers, channels, maps) are skipped.
func flatten(v any) map[string]any {
	out := map[string]any{}
	walk(reflect.ValueOf(v), "", out)
	return out
}

var durationType = reflect.TypeFor[time.Duration]()

// excluded are component fields that are not configuration keys because the binary fills them
// from another section: the relay and the projectors use the kafka section's settings, presence,
// fanout, the session recorder and the send handler's claims the top-level node_id.
var excluded = map[string]bool{"relay.kafka": true, "projections.kafka": true, "presence.node_id": true, "fanout.node_id": true,
	"sessions.node": true, "send.seq.node_id": true}

func walk(v reflect.Value, prefix string, out map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && hasOption(f, "squash") {
			walk(v.Field(i), prefix, out)
			continue
		}
		key := fieldKey(f)
		if key == "" {
			continue
		}
		if prefix != "" {
			key = prefix + "." + key
		}
		if excluded[key] {
			continue
		}
		fv := v.Field(i)
		switch {
		case f.Type == durationType, f.Type == keyListType:
			out[key] = fv.Interface()
		case f.Type.Kind() == reflect.Struct:
			walk(fv, key, out)
		case isLeaf(f.Type):
			out[key] = fv.Interface()
		}
	}
}

func isLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	case reflect.Slice:
		return isLeaf(t.Elem())
	}
	return false
}

func hasOption(f reflect.StructField, opt string) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
	return slices.Contains(strings.Split(opts, ","), opt)
}

func fieldKey(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
	switch tag {
	case "-":
		return ""
	case "":
		return snake(f.Name)
	}
	return tag
}

// snake turns a Go field name into snake_case: BatchSize → batch_size, HTTPAddr → http_addr,
// MaxConns → max_conns.
func snake(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i > 0 && i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// matchName lets a snake_case map key match a Go field name or tag: "batch_size" matches
// BatchSize, "max_conns" matches `koanf:"max_conns"`.
func matchName(mapKey, fieldName string) bool {
	return strings.EqualFold(strings.ReplaceAll(mapKey, "_", ""), strings.ReplaceAll(fieldName, "_", ""))
}

// envName is the environment variable that sets key: IM_ + the key upper-cased with dots and
// underscores alike written as '_' (postgres.url → IM_POSTGRES_URL).
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}
