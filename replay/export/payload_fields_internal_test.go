package export

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestReadMessageFieldsMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		`{"seq": "7", "to": "9", "from": "42", "head": {}, "topic": "p2p9_42", "content": {"topic": "fake", "seq": "1", "x": [1, {"a": "}"}]}, "sent_at": "2026-12-01T15:41:21.123456Z", "msg_type": "text", "message_id": "m"}`,
		`{"topic":"grp1","seq":"3","from":"5","msg_type":"image","sent_at":"2026-01-01T00:00:00Z","content":"say \"hi\" {"}`,
		`{"topic": "grp1", "seq": "3", "by": "5", "content": [true, null, 1.5e3], "edited_at": "2026-01-01T00:00:00Z"}`,
		`{"topic": "grp\u0031", "seq": "3"}`,
		`{}`,
		`{"seq": 3}`,
		`[1]`,
		`{"topic": "grp1", "seq": "x"}`,
	} {
		var want messageFields
		wantErr := json.Unmarshal([]byte(p), &want)
		var got messageFields
		err := readMessageFields([]byte(p), &got)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", p, got, err, want, wantErr)
		}
	}
}

func BenchmarkReadMessageFields(b *testing.B) {
	p := []byte(`{"seq": "7", "to": "9", "from": "42", "head": {}, "topic": "p2p9_42", "content": "benchmark message with a little bit of text in it", "sent_at": "2026-12-01T15:41:21.123456Z", "msg_type": "text", "message_id": "grp1-7", "client_msg_id": "b7"}`)
	for b.Loop() {
		var m messageFields
		_ = readMessageFields(p, &m)
	}
}

func BenchmarkUnmarshalMessageFields(b *testing.B) {
	p := []byte(`{"seq": "7", "to": "9", "from": "42", "head": {}, "topic": "p2p9_42", "content": "benchmark message with a little bit of text in it", "sent_at": "2026-12-01T15:41:21.123456Z", "msg_type": "text", "message_id": "grp1-7", "client_msg_id": "b7"}`)
	for b.Loop() {
		var m messageFields
		_ = json.Unmarshal(p, &m)
	}
}
