package main

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/imledger/imledger/internal/testenv"
)

// TestSubscriptionsFollowBlocksAndDissolution checks serve's WebSocket policy: a user the peer
// blocks may not subscribe to their 1:1 topic, and nobody may subscribe to a dissolved group.
func TestSubscriptionsFollowBlocksAndDissolution(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	a := env.start(t, "node-a")
	alice := signUp(t, a.base, "alice")
	bob := signUp(t, a.base, "bob")
	gid := createGroup(t, a.base, alice, "doomed")
	joinGroup(t, a.base, bob, gid)
	aliceID, _ := strconv.ParseInt(alice.id, 10, 64)
	bobID, _ := strconv.ParseInt(bob.id, 10, 64)
	direct := fmt.Sprintf("p2p%d_%d", min(aliceID, bobID), max(aliceID, bobID))

	c := dialWS(t, a.base, bob, "bob")
	c.sub("grp" + gid)
	c.sub(direct)

	if r := call(t, http.MethodPost, a.base+"/v1/im/blocks", alice.token, "block-1", `{"user_id":"`+bob.id+`"}`); r.status != http.StatusOK {
		t.Fatalf("block: %d %s", r.status, r.raw)
	}
	// The block reaches the gateway through the group handlers' realtime notifier.
	c.waitFor("the block's info frame", func(fs []wsFrame) bool {
		return slices.ContainsFunc(fs, func(f wsFrame) bool {
			return f.Info != nil && f.Info.Topic == direct && f.Info.What == "blocked" && f.Info.Src == bob.id
		})
	})
	c.write(`{"sub":{"id":"again-direct","topic":"` + direct + `"}}`)
	if r := c.ctrl("again-direct"); r.Code != http.StatusForbidden {
		t.Fatalf("blocked user's sub to the 1:1 topic: %+v, want 403", r)
	}

	if r := call(t, http.MethodDelete, a.base+"/v1/im/groups/"+gid, alice.token, "dissolve-1", ""); r.status != http.StatusOK {
		t.Fatalf("dissolve: %d %s", r.status, r.raw)
	}
	c.write(`{"sub":{"id":"again-group","topic":"grp` + gid + `"}}`)
	if r := c.ctrl("again-group"); r.Code != http.StatusForbidden {
		t.Fatalf("sub to a dissolved group: %+v, want 403", r)
	}
}
