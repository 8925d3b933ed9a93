package wsbench

import (
	"testing"
)

func TestParseFrameReadsCtrlAndData(t *testing.T) {
	t.Parallel()
	ctrl := []byte(`{"ctrl":{"id":"p7","code":202,"text":"accepted","params":{"seq":"9","note":"a } \" { b"},"ts":"x"}}`)
	f, err := parseFrame(ctrl)
	if err != nil || !f.isCtrl || f.isData || string(f.id) != "p7" || f.code != 202 {
		t.Errorf("ctrl: %+v, %v", f, err)
	}
	content := `{"bench_ts": 5, "from": 1, "k": 2, "pad": "<&>[{"}`
	data := []byte(` { "data" : {"topic":"grp1","seq":"3","from":"42","head":{"mentions":["1"]},"ts":"t","content":` + content + `} } `)
	f, err = parseFrame(data)
	if err != nil || !f.isData || string(f.from) != "42" || string(f.content) != content {
		t.Errorf("data: from %q content %q, %v", f.from, f.content, err)
	}
	refused := []byte(`{"ctrl":{"id":"p8","code":403,"reason":"not_member"}}`)
	if f, err := parseFrame(refused); err != nil || f.code != 403 || string(f.reason) != "not_member" {
		t.Errorf("refusal: %+v, %v", f, err)
	}
	for _, bad := range []string{``, `[]`, `{"ctrl":`, `{"ctrl":{"id":"p1"}`, `{"data":{"from":"1"`, `{"a" 1}`, `{"a":"unterminated}`} {
		if _, err := parseFrame([]byte(bad)); err == nil {
			t.Errorf("parseFrame(%q) succeeded", bad)
		}
	}
}
