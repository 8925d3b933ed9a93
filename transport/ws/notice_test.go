package ws_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/imledger/imledger/transport/ws"
)

// TestFileRejectedNoticeReachesUploaderOnly: the notice of a rejected file, broadcast from one
// node, reaches every session of the uploader on both nodes as an info frame file_rejected with
// the file and the reason, and no other user's session.
func TestFileRejectedNoticeReachesUploaderOnly(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b := c.node(t, "a", nodeOpts{}), c.node(t, "b", nodeOpts{})
	upA, upB, other := dial(t, a, "u1@a", dialOpts{}), dial(t, b, "u1@b", dialOpts{}), dial(t, b, "u2@b", dialOpts{})
	upA.login(c, 1)
	upB.login(c, 1)
	other.login(c, 2)
	if err := a.fan.Broadcast(testCtx(t), ws.FileRejectedNotice(acme, 1, "0190f0c4-7d3a-7b1e-9c2d-1a2b3c4d5e6f", "type_mismatch")); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{upA, upB} {
		cl.waitFor("file_rejected", func(fs []serverFrame) bool {
			for _, f := range fs {
				if f.Info == nil || f.Info.What != "file_rejected" {
					continue
				}
				var raw map[string]string
				if err := json.Unmarshal(f.Info.Content, &raw); err != nil {
					t.Fatalf("content %s: %v", f.Info.Content, err)
				}
				return raw["file_id"] == "0190f0c4-7d3a-7b1e-9c2d-1a2b3c4d5e6f" && raw["reason"] == "type_mismatch"
			}
			return false
		})
	}
	time.Sleep(100 * time.Millisecond)
	for _, f := range other.snapshot() {
		if f.Info != nil {
			t.Fatalf("another user's session got %+v", f.Info)
		}
	}
}
