package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/internal/testenv"
)

// TestWebSocketFramesMatchTheAsyncAPIDocument drives real sessions of a real serve through every
// frame kind of the protocol, refusals and ended sessions included, and holds every frame to the
// AsyncAPI document the node serves at /asyncapi.json: each frame the test sends fits its client
// message (or, when it breaks the protocol on purpose, does not), each frame the server sends
// matches a server message of the document (one that matches none fails the test), the answer to
// each request is the message the document names for it, and every server message of the
// document is seen at least once.
func TestWebSocketFramesMatchTheAsyncAPIDocument(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.extra = fmt.Sprintf("files: {dir: %q}\nws: {sub_burst: 4, sub_rate: 1}", filepath.Join(t.TempDir(), "files"))
	node := env.start(t, "docs")
	doc := fetchAsyncDoc(t, node.base)
	alice, bob, carol := signUp(t, node.base, "alice"), signUp(t, node.base, "bob"), signUp(t, node.base, "carol")

	a := dialDoc(t, node.base, doc, "alice")
	a.requestAs("pub", `{"pub":{"id":%q,"topic":"grp1","client_msg_id":"early","content":"x"}}`, "ctrlError", true)
	a.request("login", `{"login":{"id":%q,"token":"not-a-token"}}`, "ctrlError")
	a.login(alice.token)
	if f := a.request("login", `{"login":{"id":%q,"token":`+jsonString(bob.token)+`}}`, "ctrlError"); f.str("ctrl", "reason") != "already_authenticated" {
		t.Fatalf("login as another user: %s", f.raw)
	}
	b := dialDoc(t, node.base, doc, "bob")
	b.login(bob.token)

	grp := "grp" + createGroup(t, node.base, alice, "docs")
	joinGroup(t, node.base, bob, strings.TrimPrefix(grp, "grp"))
	a.subscribe(grp)
	b.subscribe(grp)
	a.awaitMessage("pres", func(f docFrame) bool { return f.str("pres", "what") == "on" && f.str("pres", "src") == bob.id })

	seq := docMessages(t, a, b, grp, bob)
	docRefusals(t, a, grp, carol, node.base)
	docChanges(t, node.base, a, b, grp, seq, alice, bob)
	docDirect(t, node.base, a, b, alice, bob)
	docLimitsAndEndings(t, node, doc, a, carol)
	docNotice(t, node.base, doc, carol)
	docChannel(t, node.base, doc)

	if missing := doc.unseen(); len(missing) > 0 {
		t.Errorf("server messages of the document no frame matched: %v", missing)
	}
}

// docMessages sends messages and reads them back: acks, live data frames, a duplicate, typing,
// history pages. It returns the seq of the first message.
func docMessages(t *testing.T, a, b *docClient, grp string, bob user) string {
	t.Helper()
	pub := `{"pub":{"id":%q,"topic":"` + grp + `","client_msg_id":"m-1","content":{"text":"hello <b>world</b>","n":1},"head":{"mentions":["` + bob.id + `"],"mention_all":false}}}`
	ack := a.request("pub", pub, "ctrlAccepted")
	seq, _ := ack.body("ctrl")["params"].(map[string]any)["seq"].(string)
	b.awaitMessage("dataLive", func(f docFrame) bool { return f.str("data", "seq") == seq })
	a.awaitMessage("dataLive", func(f docFrame) bool { return f.str("data", "seq") == seq })
	if again := a.request("pub", pub, "ctrlAccepted"); !strings.Contains(again.raw, `"duplicate":true`) {
		t.Fatalf("a resend: %s", again.raw)
	}
	a.request("pub", `{"pub":{"id":%q,"topic":"`+grp+`","client_msg_id":"m-2","msg_type":"image","content":{"url":"https://example.com/a.png"}}}`, "ctrlAccepted")
	b.request("pub", `{"pub":{"id":%q,"topic":"`+grp+`","client_msg_id":"m-3","content":"plain"}}`, "ctrlAccepted")
	b.send("note", `{"note":{"topic":"`+grp+`","what":"kp"}}`, true)
	a.awaitMessage("infoNote", func(f docFrame) bool { return f.str("info", "what") == "kp" })

	// History trails the commits: ask until the page holds all three messages.
	deadline := time.Now().Add(30 * time.Second)
	for {
		page := a.request("get", `{"get":{"id":%q,"topic":"`+grp+`","after_seq":"0","limit":10}}`, "ctrlPage")
		if n, _ := page.body("ctrl")["params"].(map[string]any)["count"].(float64); n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history never held 3 messages: %s", page.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.awaitMessage("dataHistory", func(f docFrame) bool { return f.str("data", "seq") == seq })
	a.request("get", `{"get":{"id":%q,"topic":"`+grp+`","before_seq":5}}`, "ctrlPage") // a number is taken for a seq
	a.request("ping", `{"ping":{"id":%q}}`, "ctrlPong")
	return seq
}

// docRefusals sends frames the server refuses, each answered with ctrlError.
func docRefusals(t *testing.T, a *docClient, grp string, carol user, base string) {
	t.Helper()
	other := "grp" + createGroup(t, base, carol, "not-alice's")
	for _, c := range []struct {
		msg, frame string
		fitting    bool
		reason     string
	}{
		{"sub", `{"sub":{"id":%q,"topic":"` + other + `"}}`, true, "not_member"},
		{"sub", `{"sub":{"id":%q,"topic":"grp0"}}`, false, "invalid"},
		{"pub", `{"pub":{"id":%q,"topic":"` + other + `","client_msg_id":"nope","content":"x"}}`, true, "not_member"},
		{"pub", `{"pub":{"id":%q,"topic":"` + grp + `","content":"x"}}`, false, "invalid"},
		{"pub", `{"pub":{"id":%q,"topic":"` + grp + `","client_msg_id":"bad type","content":"x"}}`, false, "invalid"},
		{"pub", `{"pub":{"id":%q,"topic":"` + grp + `","client_msg_id":"null","content":null}}`, false, "invalid"},
		{"get", `{"get":{"id":%q,"topic":"` + other + `","after_seq":"-1"}}`, false, "invalid"},
		{"get", `{"get":{"id":%q,"topic":"` + other + `","after_seq":"0"}}`, true, "not_member"},
		{"ping", `{"ping":{"id":%q},"ping":{"id":"second"}}`, true, "bad_frame"},
		{"sub", `{"sub":{"id":%q,"TOPIC":"grp1"}}`, false, "bad_frame"},
		{"get", `{"get":{"id":%q,"topic":"grp1","limit":"ten"}}`, false, "bad_frame"},
	} {
		f := a.requestAs(c.msg, c.frame, "ctrlError", c.fitting)
		if got := f.str("ctrl", "reason"); got != c.reason {
			t.Errorf("%s: reason %q, want %q", c.frame, got, c.reason)
		}
	}
	// Frames no client message describes: an unknown type, not JSON, an unknown note.
	a.write(`{"frob":{"id":"frob-1"}}`)
	if f := a.answer("frob-1", "ctrlError"); f.str("ctrl", "reason") != "unknown_frame" {
		t.Errorf("unknown frame: %s", f.raw)
	}
	a.write(`{"sub":`)
	a.awaitMessage("ctrlError", func(f docFrame) bool { return f.str("ctrl", "id") == "" && f.str("ctrl", "reason") == "bad_frame" })
	a.send("note", `{"note":{"topic":"grp1","what":"shout"}}`, false)
	a.awaitMessage("ctrlError", func(f docFrame) bool {
		p, _ := f.body("ctrl")["params"].(map[string]any)
		return f.str("ctrl", "id") == "" && p["field"] == "what"
	})
}

// docChanges changes the group and its first message over REST: an edit and a recall reach the
// sessions as info frames and history shows the recall; a leave announces pres off; a role
// change and a member leaving the group are info frames of the topic.
func docChanges(t *testing.T, base string, a, b *docClient, grp, seq string, alice, bob user) {
	t.Helper()
	msg := base + "/v1/im/topics/" + grp + "/messages/" + seq
	if r := call(t, http.MethodPatch, msg, alice.token, "edit-1", `{"version":"1","content":{"text":"hello again"}}`); r.status != http.StatusOK {
		t.Fatalf("edit: %d %s", r.status, r.raw)
	}
	b.awaitMessage("infoMessageChange", func(f docFrame) bool { return f.str("info", "what") == "edit" })
	if r := call(t, http.MethodPost, msg+"/recall", alice.token, "recall-1", ""); r.status != http.StatusOK {
		t.Fatalf("recall: %d %s", r.status, r.raw)
	}
	b.awaitMessage("infoMessageChange", func(f docFrame) bool { return f.str("info", "what") == "recall" })
	deadline := time.Now().Add(30 * time.Second)
	for !b.has("dataHistory", func(f docFrame) bool { return f.str("data", "seq") == seq && f.str("data", "status") == "recalled" }) {
		if time.Now().After(deadline) {
			t.Fatal("history never showed the recall")
		}
		n, _ := strconv.Atoi(seq)
		b.request("get", fmt.Sprintf(`{"get":{"id":%%q,"topic":%q,"before_seq":"%d","limit":1}}`, grp, n+1), "ctrlPage")
		time.Sleep(100 * time.Millisecond)
	}

	b.request("leave", `{"leave":{"id":%q,"topic":"`+grp+`"}}`, "ctrlTopic")
	a.awaitMessage("pres", func(f docFrame) bool { return f.str("pres", "what") == "off" && f.str("pres", "src") == bob.id })
	gid := strings.TrimPrefix(grp, "grp")
	if r := call(t, http.MethodPut, base+"/v1/im/groups/"+gid+"/members/"+bob.id+"/role", alice.token, "role-1", `{"role":"admin"}`); r.status != http.StatusOK {
		t.Fatalf("role: %d %s", r.status, r.raw)
	}
	a.awaitMessage("infoTopicChange", func(f docFrame) bool { return f.str("info", "what") == "role" && f.str("info", "src") == bob.id })
	if r := call(t, http.MethodPost, base+"/v1/im/groups/"+gid+"/leave", bob.token, "leave-1", ""); r.status != http.StatusOK {
		t.Fatalf("leave: %d %s", r.status, r.raw)
	}
	a.awaitMessage("infoTopicChange", func(f docFrame) bool { return f.str("info", "what") == "left" && f.str("info", "src") == bob.id })
}

// docDirect chats 1:1: a read receipt reaches the other party, a block ends the blocked
// party's subscription with an info frame.
func docDirect(t *testing.T, base string, a, b *docClient, alice, bob user) {
	t.Helper()
	p2p := directTopicOf(alice.id, bob.id)
	a.subscribe(p2p)
	b.subscribe(p2p)
	ack := b.request("pub", `{"pub":{"id":%q,"topic":"`+p2p+`","client_msg_id":"d-1","content":"psst"}}`, "ctrlAccepted")
	seq, _ := ack.body("ctrl")["params"].(map[string]any)["seq"].(string)
	a.awaitMessage("dataLive", func(f docFrame) bool { return f.str("data", "topic") == p2p })
	a.send("note", `{"note":{"topic":"`+p2p+`","what":"read","seq":"`+seq+`"}}`, true)
	b.awaitMessage("infoNote", func(f docFrame) bool { return f.str("info", "what") == "read" && f.str("info", "seq") == seq })
	if r := call(t, http.MethodPost, base+"/v1/im/blocks", bob.token, "block-1", `{"user_id":"`+alice.id+`"}`); r.status/100 != 2 {
		t.Fatalf("block: %d %s", r.status, r.raw)
	}
	a.awaitMessage("infoTopicChange", func(f docFrame) bool { return f.str("info", "what") == "blocked" && f.str("info", "topic") == p2p })
}

// directTopicOf is the 1:1 topic of two user ids.
func directTopicOf(x, y string) string {
	if len(x) > len(y) || len(x) == len(y) && x > y {
		x, y = y, x
	}
	return "p2p" + x + "_" + y
}

// docLimitsAndEndings provokes the limits and the ends of sessions: a sub/leave flood answered
// 429, a message over max_frame_size answered 413 then closed 1009, a broadcast to the tenant,
// a token that expires (its session ends with a ctrl, then 1008; a login with it is refused) and
// a kick.
func docLimitsAndEndings(t *testing.T, node *served, doc *asyncDoc, a *docClient, carol user) {
	t.Helper()
	c := dialDoc(t, node.base, doc, "carol")
	c.login(carol.token)
	own := "grp" + createGroup(t, node.base, carol, "carol's")
	c.subscribe(own)
	for i := 0; ; i++ {
		msg := "leave"
		if i%2 == 1 {
			msg = "sub"
		}
		f := c.request(msg, `{"`+msg+`":{"id":%q,"topic":"`+own+`"}}`, "")
		if f.is("ctrlError") && f.str("ctrl", "reason") == "rate_limited" {
			break
		}
		if i > 20 {
			t.Fatalf("20 subs and leaves at once were never limited: %s", f.raw)
		}
	}

	big := dialDoc(t, node.base, doc, "big")
	big.write(`{"ping":{"id":"big","pad":"` + strings.Repeat("x", 70<<10) + `"}}`)
	big.awaitMessage("ctrlError", func(f docFrame) bool { return f.str("ctrl", "reason") == "frame_too_large" })
	big.closedWith(websocket.StatusMessageTooBig)

	mustAdmin(t, node, "message.broadcast", "demo", `{"content":{"text":"all hands"}}`)
	a.awaitMessage("infoBroadcast", nil)

	out, errOut, err := runCLI(t, "token", "issue", "--config", node.file, "--tenant", "demo", "--user", carol.id, "--ttl", "2s")
	if err != nil {
		t.Fatalf("token issue: %v\n%s", err, errOut)
	}
	short := strings.TrimSpace(out)
	e := dialDoc(t, node.base, doc, "expiring")
	e.login(short)
	e.awaitMessage("ctrlSessionEnded", func(f docFrame) bool { return f.str("ctrl", "reason") == "token_expired" })
	e.closedWith(websocket.StatusPolicyViolation)
	late := dialDoc(t, node.base, doc, "late")
	if f := late.request("login", `{"login":{"id":%q,"token":`+jsonString(short)+`}}`, "ctrlError"); f.str("ctrl", "reason") != "token_expired" {
		t.Fatalf("login with an expired token: %s", f.raw)
	}

	mustAdmin(t, node, "user.kick", "demo", `{"user_id":"`+carol.id+`","reason":"docs"}`)
	c.awaitMessage("ctrlSessionEnded", func(f docFrame) bool { return f.str("ctrl", "reason") == "kicked" })
	c.closedWith(websocket.StatusPolicyViolation)
}

// docNotice uploads bytes of another kind than declared: the security check rejects the file
// and the uploader's session hears of it.
func docNotice(t *testing.T, base string, doc *asyncDoc, carol user) {
	t.Helper()
	carol.token = signUpLogin(t, base, "carol")
	c := dialDoc(t, base, doc, "carol again")
	c.login(carol.token)
	html := "<!doctype html><html><script>alert(1)</script></html>"
	r := call(t, http.MethodPost, base+"/v1/im/files", carol.token, "file-1",
		fmt.Sprintf(`{"name":"cat.png","content_type":"image/png","size":"%d"}`, len(html)))
	id, _ := r.Data["file_id"].(string)
	if r.status != http.StatusCreated || id == "" {
		t.Fatalf("register file: %d %s", r.status, r.raw)
	}
	req, _ := http.NewRequest(http.MethodPut, base+"/v1/im/files/"+id+"/content", strings.NewReader(html))
	req.Header.Set("Authorization", "Bearer "+carol.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Idempotency-Key", "upload-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("upload: %d", resp.StatusCode)
	}
	c.awaitMessage("infoNotice", func(f docFrame) bool { return strings.Contains(f.raw, id) })
}

// docChannel follows a user's channel (sub of me): a new 1:1 chat is an item, a later message of
// it a conversation frame; a get of me reads the items back, a get from another epoch is answered
// 205; signing the login session out from another one logs an account item, then ends the
// session with session_revoked.
func docChannel(t *testing.T, base string, doc *asyncDoc) {
	t.Helper()
	xena, yuri := signUp(t, base, "xena"), signUp(t, base, "yuri")
	x := dialDoc(t, base, doc, "xena")
	x.login(xena.token)
	head := x.request("sub", `{"sub":{"id":%q,"topic":"me"}}`, "ctrlTopic")
	params, _ := head.body("ctrl")["params"].(map[string]any)
	if params["topic"] != "me" || params["last_seq"] == nil {
		t.Fatalf("sub of me: %s", head.raw)
	}
	p2p := directTopicOf(xena.id, yuri.id)
	for i, text := range []string{"first", "second"} {
		body := fmt.Sprintf(`{"client_msg_id":"ch-%d","content":{"text":%q}}`, i, text)
		if r := call(t, http.MethodPost, base+"/v1/im/topics/"+p2p+"/messages", yuri.token, fmt.Sprintf("ch-%d", i), body); r.status/100 != 2 {
			t.Fatalf("send %s: %d %s", text, r.status, r.raw)
		}
		if i == 0 {
			x.awaitMessage("meItem", func(f docFrame) bool { return f.str("me", "what") == "conv" && f.str("me", "topic") == p2p })
		}
	}
	item := x.awaitMessage("meItem", func(f docFrame) bool { return f.str("me", "what") == "conv" })
	x.awaitMessage("meConversation", func(f docFrame) bool { return f.str("me", "what") == "msg" && f.str("me", "msg_seq") == "2" })
	epoch := item.str("me", "epoch")
	page := x.request("get", `{"get":{"id":%q,"topic":"me","epoch":`+jsonString(epoch)+`}}`, "ctrlPage")
	if n, _ := page.body("ctrl")["params"].(map[string]any)["count"].(float64); n < 1 {
		t.Fatalf("get of me: %s", page.raw)
	}
	x.request("get", `{"get":{"id":%q,"topic":"me","epoch":"not-the-epoch","after_seq":"1"}}`, "ctrlResync")

	again := call(t, http.MethodPost, base+"/v1/im/auth/login", "", "", `{"tenant":"demo","login":"xena","password":"correct horse battery"}`)
	other, _ := again.Data["token"].(string)
	sid := sessionOf(t, base, xena.token)
	if r := call(t, http.MethodDelete, base+"/v1/im/account/sessions/"+sid, other, "sign-out-1", ""); r.status != http.StatusOK {
		t.Fatalf("sign out: %d %s", r.status, r.raw)
	}
	x.awaitMessage("meItem", func(f docFrame) bool {
		return f.str("me", "what") == "account" && f.str("me", "reason") == "session_revoked"
	})
	x.awaitMessage("ctrlSessionEnded", func(f docFrame) bool { return f.str("ctrl", "reason") == "session_revoked" })
	x.closedWith(websocket.StatusPolicyViolation)
}

// sessionOf is the login session of token, as the session list marks it current.
func sessionOf(t *testing.T, base, token string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := call(t, http.MethodGet, base+"/v1/im/account/sessions", token, "", "")
		list, _ := r.Data["sessions"].([]any)
		for _, s := range list {
			if m, _ := s.(map[string]any); m["current"] == true {
				return m["session_id"].(string)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token's session was never listed: %d %s", r.status, r.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
