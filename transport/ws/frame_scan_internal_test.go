package ws

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestSplitFrame(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, typ, body string
		err           error
	}{
		{in: `{"ping":{"id":"1"}}`, typ: "ping", body: `{"id":"1"}`},
		{in: " \n{ \"ping\" : {\"id\":\"1\"} }\r\n", typ: "ping", body: `{"id":"1"}`},
		{in: `{"pub":{"id":"1","content":{"a":[1,"}",{"b":"\"]"}]}}}`, typ: "pub", body: `{"id":"1","content":{"a":[1,"}",{"b":"\"]"}]}}`},
		{in: `{"p\u0069ng":{}}`, typ: "ping", body: `{}`},
		{in: `{"ping":7}`, typ: "ping", body: `7`},
		{in: `{"ping":{"id":"1"},"ping":{"id":"2"}}`, body: `{"id":"1"}`, err: errDuplicateKey},
		{in: `{"ping":{"id":"1"},"p\u0069ng":{"id":"2"}}`, body: `{"id":"1"}`, err: errDuplicateKey},
		{in: `{"ping":{"id":"1"},"pong":{}}`, err: errNotOneKey},
		{in: `{}`, err: errNotOneKey},
		{in: `[1]`, err: errNotOneKey},
		{in: `{"ping":{"id":"1"}}x`, err: errNotOneKey},
		{in: `{"ping":{"id":"1"}`, err: errNotOneKey},
		{in: `{"ping" {"id":"1"}}`, err: errNotOneKey},
		{in: "{\"pi\x01ng\":{}}", err: errNotOneKey},
		{in: `{"ping":{"id":"1"},}`, err: errNotOneKey},
	}
	for _, tt := range tests {
		typ, body, err := splitFrame([]byte(tt.in))
		if typ != tt.typ || string(body) != tt.body || !errors.Is(err, tt.err) {
			t.Errorf("splitFrame(%s) = %q, %s, %v; want %q, %s, %v", tt.in, typ, body, err, tt.typ, tt.body, tt.err)
		}
	}
}

func TestCheckKeys(t *testing.T) {
	t.Parallel()
	fields := frameFields["get"]
	tests := []struct {
		in  string
		err error
	}{
		{in: `{"id":"1","topic":"grp1","after_seq":"5","limit":3,"extra":{"topic":1,"topic":2}}`},
		{in: `{"id":"1","topic":"grp1","topic":"grp2"}`, err: errDuplicateKey},
		{in: `{"extra":1,"extra":2}`, err: errDuplicateKey},
		{in: `{"id":"1","Topic":"grp1"}`, err: errKeyCase},
		{in: `{"AFTER_SEQ":"1"}`, err: errKeyCase},
		{in: `{"after_ſeq":"1"}`, err: errKeyCase}, // encoding/json would take it for after_seq
		{in: `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"a":11}`, err: errDuplicateKey},
		{in: `"not an object"`},
	}
	for _, tt := range tests {
		if err := checkKeys([]byte(tt.in), fields); !errors.Is(err, tt.err) {
			t.Errorf("checkKeys(%s) = %v, want %v", tt.in, err, tt.err)
		}
	}
}

// pubPayload is a typical pub frame.
var pubPayload = []byte(`{"pub":{"id":"42","topic":"grp386180055182376960","client_msg_id":"c-01a2264d-82b3",` +
	`"content":{"text":"hello <b>world</b>, how are you doing today? Lunch at noon?","n":1},"head":{"mentions":["43"]}}}`)

// BenchmarkDecodePub decodes a pub frame as handle and decode do: "map" as before splitFrame
// and checkKeys (a one-key map of raw bodies, then the body), "scan" as now.
func BenchmarkDecodePub(b *testing.B) {
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var env map[string]json.RawMessage
			if err := json.Unmarshal(pubPayload, &env); err != nil || len(env) != 1 {
				b.Fatal(err)
			}
			for _, body := range env {
				var f pubFrame
				if err := json.Unmarshal(body, &f); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			typ, body, err := splitFrame(pubPayload)
			if err != nil {
				b.Fatal(err)
			}
			if err := checkKeys(body, frameFields[typ]); err != nil {
				b.Fatal(err)
			}
			var f pubFrame
			if err := json.Unmarshal(body, &f); err != nil {
				b.Fatal(err)
			}
		}
	})
}
