package domain

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
)

// DescribeJSONError returns what a client may be told about err, an error of encoding/json
// decoding the client's input: where and what did not fit, in the terms of JSON. It never
// carries Go's type or struct names ("Go value of type float64"), which say nothing to a client
// and tell an attacker about the server. A *ValidationError, which a type's own decoder may
// return, keeps its text.
func DescribeJSONError(err error) string {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		ve     *ValidationError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ve):
		return ve.Error()
	case errors.As(err, &syntax):
		return "malformed JSON at byte " + strconv.FormatInt(syntax.Offset, 10)
	case errors.As(err, &typ):
		what := typ.Value // "number", "number 1e3", "string", "array", "object", "bool"
		if typ.Field != "" {
			what = typ.Field + ": " + what
		}
		return what + " where " + jsonKind(typ.Type) + " is expected"
	}
	return "the JSON does not fit the expected fields and types"
}

// jsonKind names, in JSON's terms, what a Go type t decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number (no fraction or exponent) in the field's range"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number of zero or more (no fraction or exponent) in the field's range"
	case reflect.Float32, reflect.Float64:
		return "a number within the range of a double"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another value"
}
