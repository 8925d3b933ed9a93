package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/replay/export"
)

// The analysts' commands against a running node: replay --verify of messages-hot passes on the
// live tenant and fails naming the topic after a hot-message key is altered by hand; the schemas
// are served; export and republish take the tenant's history out.
func TestAnalystCommandsOnALiveNode(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	env := newServeEnv(t, brokers, true)
	s := env.start(t, "analysts")
	alice, bob := signUp(t, s.base, "alice"), signUp(t, s.base, "bob")
	gid := createGroup(t, s.base, alice, "analysts")
	joinGroup(t, s.base, bob, gid)
	topic := "grp" + gid
	for i, u := range []user{alice, bob, alice} {
		if a := sendREST(t, s.base, u, topic, "m-"+string(rune('1'+i)), `{"text":"hello"}`); a.status != http.StatusCreated {
			t.Fatalf("send: %d %s", a.status, a.raw)
		}
	}
	if a := call(t, http.MethodPost, s.base+"/v1/im/topics/"+topic+"/messages/2/recall", bob.token, "recall-2", ""); a.status/100 != 2 {
		t.Fatalf("recall: %d %s", a.status, a.raw)
	}
	checkHistory(t, s.base, alice, topic, 3)

	verifyHot := func() (string, error) {
		out, _, err := runCLI(t, "replay", "--config", s.file, "--projection", "messages-hot", "--tenant", "demo", "--verify")
		return out, err
	}
	var out string
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if out, err = verifyHot(); err == nil || time.Now().After(deadline) {
			break // the hot projector may still be applying the recall
		}
	}
	if err != nil || !strings.Contains(out, "messages-hot matches the log") {
		t.Fatalf("replay --verify messages-hot on the live tenant: %v\n%s", err, out)
	}
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr})
	defer rdb.Close()
	key := env.prefix + "demo:topic:{" + topic + "}:hot_msg:3"
	if err := rdb.HSet(t.Context(), key, "c", `{"text":"forged"}`).Err(); err != nil {
		t.Fatal(err)
	}
	out, err = verifyHot()
	if err == nil || !strings.Contains(out, topic+": seq 3: content differs") || !strings.Contains(err.Error(), "demo") {
		t.Fatalf("replay --verify after a hot message was altered: %v\n%s", err, out)
	}
	if out, _, err := runCLI(t, "replay", "--config", s.file, "--projection", "sessions-mysql", "--tenant", "demo", "--verify"); err != nil {
		t.Errorf("replay --verify sessions-mysql: %v\n%s", err, out)
	}

	if code, body := get(t, s.base+"/v1/schemas/"); code != http.StatusOK || !strings.Contains(body, `"member.muted.v2"`) {
		t.Errorf("GET /v1/schemas/: %d", code)
	}
	if out, _, err := runCLI(t, "schema", "show", "envelope"); err != nil || !strings.Contains(out, `"imledger:envelope"`) {
		t.Errorf("schema show envelope: %v", err)
	}

	// Export: Parquet into a file, then nothing new from its cursor file.
	dir := t.TempDir()
	file := filepath.Join(dir, "demo.parquet")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, _, err = runCLI(t, "export", "--config", s.file, "--tenant", "demo", "--format", "parquet", "--out", file, "--types", "message.*")
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		rows, err := parquet.ReadFile[export.Row](file)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 4 || time.Now().After(deadline) { // three sends and a recall, once the commit horizon passed them
			if len(rows) != 4 {
				t.Fatalf("the export holds %d message events, want 4\n%s", len(rows), out)
			}
			break
		}
	}
	if !strings.Contains(out, "cursor: ") {
		t.Errorf("export printed no cursor:\n%s", out)
	}
	out, _, err = runCLI(t, "export", "--config", s.file, "--tenant", "demo", "--types", "message.*", "--out", "-", "--from-cursor", file+".cursor")
	if err != nil || out != "" {
		t.Errorf("export from the cursor file wrote %q (%v), want nothing new", out, err)
	}

	// Republish to the default replay topic; the live topics are refused.
	out, _, err = runCLI(t, "republish", "--config", s.file, "--tenant", "demo", "--checkpoint", filepath.Join(dir, "replay.cursor"))
	if err != nil || !strings.Contains(out, "to e2e.im.replay.demo") {
		t.Fatalf("republish: %v\n%s", err, out)
	}
	if recs := consume(t, brokers, "e2e.im.replay.demo", 4); len(recs) < 4 {
		t.Errorf("the replay topic holds %d records", len(recs))
	}
	if _, err := os.Stat(filepath.Join(dir, "replay.cursor")); err != nil {
		t.Errorf("republish left no checkpoint: %v", err)
	}
	if _, _, err := runCLI(t, "republish", "--config", s.file, "--topic", "e2e.im.business.event"); err == nil || !strings.Contains(err.Error(), "live topic") {
		t.Errorf("republish to a live topic: %v", err)
	}
}
