package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
)

// TestEveryReadModelIsRebuiltFromTheLog drives a live node through every kind of write (messages,
// groups, push devices and mutes, an invite link spent, a file uploaded and sent, API keys created
// and revoked), then, for every read model replay knows, checks that --verify matches, that a
// rebuild succeeds and that --verify matches the rebuild; and the export carries the events of the
// writes that used to be table writes.
func TestEveryReadModelIsRebuiltFromTheLog(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, true)
	env.extra = fmt.Sprintf("files: {dir: %q}", filepath.Join(t.TempDir(), "files"))
	s := env.start(t, "everywrite")
	alice, bob := signUp(t, s.base, "alice"), signUp(t, s.base, "bob")
	gid := createGroup(t, s.base, alice, "every")
	topic := "grp" + gid
	if a := sendREST(t, s.base, alice, topic, "hello", `"hello"`); a.status != http.StatusCreated {
		t.Fatalf("send: %d %s", a.status, a.raw)
	}

	// Push settings: two devices, one removed; a mute, and a mute undone.
	for _, c := range []struct{ method, path, body, key string }{
		{http.MethodPut, "/v1/im/push/devices/phone", `{"provider":"jpush","token":"reg-phone"}`, "d1"},
		{http.MethodPut, "/v1/im/push/devices/tablet", `{"provider":"webhook","token":"https://example.com/t","platform":"web"}`, "d2"},
		{http.MethodDelete, "/v1/im/push/devices/tablet", "", "d3"},
		{http.MethodPut, "/v1/im/push/mutes/" + topic, "", "m1"},
		{http.MethodPut, "/v1/im/push/mutes/p2p" + alice.id + "_" + bob.id, "", "m2"},
		{http.MethodDelete, "/v1/im/push/mutes/p2p" + alice.id + "_" + bob.id, "", "m3"},
	} {
		if a := call(t, c.method, s.base+c.path, alice.token, c.key, c.body); a.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", c.method, c.path, a.status, a.raw)
		}
	}

	// Action tokens: an invite link issued by alice and spent by bob, who joins.
	a := call(t, http.MethodPost, s.base+"/v1/im/action-tokens", alice.token, "link", fmt.Sprintf(`{"action":"join_group","subject":%q}`, topic))
	link, _ := a.Data["token"].(string)
	if a.status != http.StatusCreated || link == "" {
		t.Fatalf("issue an invite link: %d %s", a.status, a.raw)
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/action-tokens/consume", bob.token, "spend",
		fmt.Sprintf(`{"action":"join_group","token":%q}`, link)); a.status != http.StatusOK {
		t.Fatalf("spend the invite link: %d %s", a.status, a.raw)
	}

	// A file uploaded and sent in the group.
	a = call(t, http.MethodPost, s.base+"/v1/im/files", alice.token, "f1", `{"name":"a.txt","content_type":"text/plain","size":"5"}`)
	fileID, _ := a.Data["file_id"].(string)
	if a.status != http.StatusCreated || fileID == "" {
		t.Fatalf("register a file: %d %s", a.status, a.raw)
	}
	upload(t, s.base, alice, fileID, "hello")
	if a := call(t, http.MethodPost, s.base+"/v1/im/topics/"+topic+"/messages", alice.token, "withfile",
		fmt.Sprintf(`{"client_msg_id":"withfile","content":"see","head":{"files":[%q]}}`, fileID)); a.status != http.StatusCreated {
		t.Fatalf("send the file: %d %s", a.status, a.raw)
	}

	// API keys: another key for the demo tenant, then revoked by its id.
	out, errOut, err := runCLI(t, "tenant", "create", "demo", "--config", s.file)
	m := regexp.MustCompile(`api_key: (imk_\S+)`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("tenant create demo: %v\n%s\n%s", err, out, errOut)
	}
	keyID := keyIDOf(t, s.file, m[1])
	if out, errOut, err := runCLI(t, "tenant", "key", "revoke", "demo", keyID, "--config", s.file); err != nil {
		t.Fatalf("revoke key %s: %v\n%s\n%s", keyID, err, out, errOut)
	}

	// What each verification after the rebuild must have compared: the writes above, not empty
	// tables.
	holds := map[string]string{
		"messages-mysql":  "1 topics match a rebuild from 2 events",
		"messages-hot":    "matches the log in 1 topics",
		"business-mysql":  "im_group_members rows=2",
		"sessions-mysql":  "sessions-mysql matches",
		"files-refs":      "im_files rows=1",
		"push-settings":   "im_push_devices rows=2",
		"action-tokens":   "im_action_tokens rows=1",
		"tenant-api-keys": "from 2 events (1 keys",
	}
	for _, projection := range replayable {
		verifyEventually(t, s.file, projection)
		out, errOut, err := runCLI(t, "replay", "--config", s.file, "--projection", projection, "--tenant", "demo")
		if err != nil || !strings.Contains(out, projection+": tenant demo:") {
			t.Fatalf("replay %s: %v\n%s\n%s", projection, err, out, errOut)
		}
		out, _, err = runCLI(t, "replay", "--config", s.file, "--projection", projection, "--tenant", "demo", "--verify")
		if err != nil || !strings.Contains(out, holds[projection]) {
			t.Errorf("replay --verify %s after its rebuild: %v, want it to hold %q\n%s", projection, err, holds[projection], out)
		}
	}

	out, _, err = runCLI(t, "export", "--config", s.file, "--tenant", "demo", "--out", "-",
		"--types", "push.*,action_token.*,tenant.api_key_*,file.*")
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			EventType string `json:"event_type"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		seen[e.EventType] = true
	}
	for _, want := range []string{"push.device_registered.v1", "push.device_removed.v1", "push.conversation_muted.v1",
		"push.conversation_unmuted.v1", "action_token.issued.v1", "action_token.consumed.v1", "tenant.api_key_created.v1",
		"tenant.api_key_revoked.v1", "file.created.v1", "file.uploaded.v1"} {
		if !seen[want] {
			t.Errorf("the export lacks %s (it holds %v)", want, seen)
		}
	}
	if strings.Contains(out, m[1]) || strings.Contains(out, link) {
		t.Error("the export holds an API key or an action token")
	}
}

// verifyEventually runs replay --verify of projection for the demo tenant until it matches: the
// projectors (and the file check) may still be applying the last writes.
func verifyEventually(t *testing.T, file, projection string) {
	t.Helper()
	var out string
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if out, _, err = runCLI(t, "replay", "--config", file, "--projection", projection, "--tenant", "demo", "--verify"); err == nil {
			return
		}
	}
	t.Fatalf("replay --verify %s never matched: %v\n%s", projection, err, out)
}

// keyIDOf returns the id of key, after checking that `tenant key list demo` lists it as valid.
func keyIDOf(t *testing.T, file, key string) string {
	t.Helper()
	out, _, err := runCLI(t, "tenant", "key", "list", "demo", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	id := account.APIKeyID(key)
	if !regexp.MustCompile(`(?m)^` + id + `\s+\S+\s+-\s*$`).MatchString(out) {
		t.Fatalf("key %s is not listed as valid:\n%s", id, out)
	}
	return id
}

// upload puts body as the bytes of file id of u.
func upload(t *testing.T, base string, u user, id, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, base+"/v1/im/files/"+id+"/content", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Idempotency-Key", "up-"+id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
}
