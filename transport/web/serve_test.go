package web_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
)

// The imledger binary the tests that need a whole node run: built once per test process from
// this checkout (go build caches the work between runs).
var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// imledgerBinary builds cmd/imledger into a directory of this process and returns its path.
func imledgerBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "imledger-web-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "imledger")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/imledger").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/imledger: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestMain removes the binary imledgerBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// servedNode is a whole `imledger serve` process, as a deployment runs it (the per-user channel,
// the account self-service and its login-sessions projection, the access notices that end
// signed-out sessions), on its own PostgreSQL database, MySQL databases, Redis key prefix and
// embedded Kafka broker, all dropped at cleanup.
type servedNode struct {
	url  string
	cmd  *exec.Cmd
	logs *strings.Builder
	mu   sync.Mutex
}

// startServed starts a servedNode and waits until /readyz answers 200; it is stopped at cleanup.
func startServed(t *testing.T) *servedNode {
	t.Helper()
	bin := imledgerBinary(t)
	pg := testenv.Postgres(t)
	testenv.MySQLServer(t)
	template := testenv.UniqueName("webs")
	testenv.DropMySQLDatabasesAtCleanup(t, template)
	_, prefix := testenv.Redis(t)
	port := freePort(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`node_id: %s
shutdown_timeout: 10s
log: {level: warn, format: json}
http: {addr: "127.0.0.1:%d", login_per_ip: 100000, login_per_name_ip: 100000, login_per_name: 100000, register_per_ip: 100000}
rate_limit: {send_per_user: 1000000, send_per_topic: 1000000, rest_per_user: 1000000, ws_connect_per_ip: 1000000}
postgres: {url: %q}
mysql: {server_dsn: %q, database_template: "%s_{tenant}"}
redis: {addr: %q, key_prefix: %q}
kafka: {embedded: {addr: "127.0.0.1:0", data_dir: %q}}
auth: {keys: [{id: t1, secret: %q}]}
account: {password: {memory: 1024, time: 1, threads: 1, salt_len: 16, key_len: 32}}
relay: {min_poll: 1ms, max_poll: 20ms}
projections: {lag_interval: 1s, close_timeout: 5s, nack_resend_sleep: 50ms, retry: {initial_interval: 10ms, max_interval: 200ms}}
files: {dir: %q}
`, strings.ReplaceAll(template, "_", "-"), port, pg, testenv.MySQLDSN, template,
		testenv.RedisAddr, prefix, filepath.Join(dir, "kafka"), strings.Repeat("web-served-key-", 3), filepath.Join(dir, "files"))
	file := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &servedNode{url: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &strings.Builder{}}
	n.cmd = exec.Command(bin, "serve", "--config", file)
	n.cmd.Stdout, n.cmd.Stderr = n, n
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- n.cmd.Wait() }()
	t.Cleanup(func() {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = n.cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		if resp, err := http.Get(n.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("serve exited before it was ready: %v\n%s", err, n.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready after 90 s\n%s", n.tail())
		}
	}
}

// Write collects the process's output (io.Writer of its stdout and stderr).
func (n *servedNode) Write(b []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.logs.Write(b)
}

// tail is the end of the process's output.
func (n *servedNode) tail() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.logs.String()
	return s[max(0, len(s)-4000):]
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
