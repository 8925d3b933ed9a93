package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
)

// serveProcess is `imledger serve` running as a child process.
type serveProcess struct {
	cmd  *exec.Cmd
	logs *syncBuffer
}

// startProcess runs bin serve with file and extra environment, and waits until base is ready.
func startProcess(t *testing.T, bin, file, base string, env []string) *serveProcess {
	t.Helper()
	p := &serveProcess{cmd: exec.Command(bin, "serve", "--config", file), logs: &syncBuffer{}}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("serve logs:\n%s", p.logs.String())
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if p.cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("serve not ready within 90s\n%s", p.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// acked is a send the server acknowledged.
type acked struct {
	seq  int64
	cmid string
}

// load sends messages to topic as u from workers goroutines until stop is closed, and returns
// the sends acknowledged with 201. Failures (the server died) are not errors here.
func load(base string, u user, topic string, workers int, stop <-chan struct{}) func() []acked {
	var (
		mu  sync.Mutex
		out []acked
		wg  sync.WaitGroup
		n   atomic.Int64
	)
	client := &http.Client{Timeout: 5 * time.Second}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cmid := fmt.Sprintf("w%d-%d", w, n.Add(1))
				body := fmt.Sprintf(`{"client_msg_id":%q,"content":{"n":%q}}`, cmid, cmid)
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/im/topics/"+topic+"/messages", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+u.token)
				req.Header.Set("Idempotency-Key", "k-"+cmid)
				resp, err := client.Do(req)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				var a struct {
					Data struct {
						Seq string `json:"seq"`
					} `json:"data"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					seq, _ := strconv.ParseInt(a.Data.Seq, 10, 64)
					mu.Lock()
					out = append(out, acked{seq: seq, cmid: cmid})
					mu.Unlock()
				}
			}
		}()
	}
	return func() []acked {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// countRows returns the acknowledged sends of acks that MySQL does not hold (yet).
func countRows(t *testing.T, db *sql.DB, topic string, acks []acked) (missing []acked) {
	t.Helper()
	for _, a := range acks {
		var cmid sql.NullString
		err := db.QueryRow("SELECT client_msg_id FROM im_group_messages WHERE topic = ? AND seqid = ?", topic, a.seq).Scan(&cmid)
		if err != nil || cmid.String != a.cmid {
			missing = append(missing, a)
		}
	}
	return missing
}

// TestAckedMessagesSurviveKill9OfServe builds the binary, runs `imledger serve` with the default
// embedded broker (its log in the default data directory, here under a private XDG_STATE_HOME),
// kills it with SIGKILL in the middle of a load of sends, and starts it again: every send that
// was acknowledged reaches the MySQL read model, and replay --verify finds the read model equal
// to a rebuild from the event store.
func TestAckedMessagesSurviveKill9OfServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "imledger")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := newServeEnv(t, nil, true)
	env.defaultDataDir = true
	env.relay = "{min_poll: 1ms, max_poll: 20ms, gap_deadline: 1s}"
	addr := freeAddr(t)
	base := "http://" + addr
	file := env.config(t, "crash", addr)
	procEnv := []string{"XDG_STATE_HOME=" + filepath.Join(dir, "state")}

	first := startProcess(t, bin, file, base, procEnv)
	alice := signUp(t, base, "alice")
	topic := "grp" + createGroup(t, base, alice, "crash")
	stop := make(chan struct{})
	wait := load(base, alice, topic, 8, stop)

	db, err := sql.Open("mysql", testenv.MySQLDSN+env.template+"_demo")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		_ = db.QueryRow("SELECT COUNT(*) FROM im_group_messages WHERE topic = ?", topic).Scan(&n)
		if n >= 300 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	close(stop)
	acks := wait()
	if len(acks) < 300 {
		t.Fatalf("only %d sends acknowledged before the kill", len(acks))
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "state", "imledger", "kafka", "crash")); len(entries) == 0 {
		t.Fatal("the embedded broker kept nothing in its default data directory")
	}

	startProcess(t, bin, file, base, procEnv)
	var missing []acked
	deadline = time.Now().Add(90 * time.Second)
	for {
		if missing = countRows(t, db, topic, acks); len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged sends never reached MySQL after the restart (first: %+v)", len(missing), len(acks), missing[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d sends acknowledged before kill -9; all of them in MySQL after the restart", len(acks))

	// Once every seq the killed process allocated is final (its uncommitted sends given up by the
	// relay), the read model equals a rebuild from the event store.
	waitFinal(t, env, db, topic)
	out, errOut, err := runCLI(t, "replay", "--config", file, "--projection", "messages-mysql", "--tenant", "demo", "--verify")
	if err != nil || !strings.Contains(out, "match") {
		t.Fatalf("replay --verify: %v\n%s\n%s", err, out, errOut)
	}
}

// waitFinal waits until topic's MySQL watermark reaches the highest seq the event store holds.
func waitFinal(t *testing.T, env *serveEnv, db *sql.DB, topic string) {
	t.Helper()
	conn := pgConn(t, env)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var top, w int64
		if err := conn.QueryRow(context.Background(), "SELECT coalesce(max(stream_version), 0) FROM events WHERE tenant_id = 'demo' AND stream_id = $1", topic).Scan(&top); err != nil {
			t.Fatal(err)
		}
		_ = db.QueryRow("SELECT watermark FROM im_topic_watermarks WHERE topic = ?", topic).Scan(&w)
		if w == top && top > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("watermark %d never reached the last seq %d", w, top)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
