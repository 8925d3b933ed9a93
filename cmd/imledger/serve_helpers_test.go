package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/internal/testenv"
)

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testShredKey is the shred.local_key of the test deployments with real brokers: 32 bytes in
// base64, not secret.
const testShredKey = "dGhlIGtleSBvZiB0ZXN0cywgMzIgYnl0ZXMsIG5vdCE="

// testSecret is the token signing secret of the test deployments that configure keys.
var testSecret = strings.Repeat("imledger-test-key-", 3)

// serveEnv is what the nodes of one test share: a PostgreSQL database that serve creates, a
// Redis key prefix, a MySQL database name template (so the demo tenant's database is the
// test's own), Kafka (the embedded broker of each node when brokers is empty) and, with keys, the
// token signing key.
type serveEnv struct {
	dbURL, prefix, template string
	brokers                 []string
	keys                    bool
	relay                   string // the relay section, YAML flow style
	extra                   string // more top-level YAML for every node
	defaultDataDir          bool   // leave kafka.embedded.data_dir to its default
	embeddedAddr            string // kafka.embedded.addr; default a free port per node
	mysqlDSN                string // default testenv.MySQLDSN

	// The admin keys of every node and of the tools run against them: a platform producer key
	// acting as admin/ops-1 (the tools sign with it) and a command-secrets key (the tools seal to
	// its public half).
	adminSigning, adminProducer, adminSecrets string
	noAdminKeys                               bool // configure no admin keys at all
}

// adminYAML is the admin section of the nodes' configuration.
func (e *serveEnv) adminYAML() string {
	if e.noAdminKeys {
		return "{}"
	}
	return fmt.Sprintf(`{signing_key: %q, producer_keys: [%q], command_secret_keys: [%q]}`, e.adminSigning, e.adminProducer, e.adminSecrets)
}

func newServeEnv(t *testing.T, brokers []string, keys bool) *serveEnv {
	t.Helper()
	_, prefix := testenv.Redis(t)
	testenv.MySQLServer(t)
	template := testenv.UniqueName("ims")
	testenv.DropMySQLDatabasesAtCleanup(t, template+"_")
	g, err := admintrust.GenerateProducerKey(admintrust.AlgEd25519, "ops-1", admintrust.PlatformScope, domain.Actor{Type: domain.ActorAdmin, ID: "ops-1"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := admintrust.GenerateSecretsKey("cs-1")
	if err != nil {
		t.Fatal(err)
	}
	return &serveEnv{dbURL: missingDatabaseURL(t), prefix: prefix, template: template, brokers: brokers, keys: keys,
		relay: "{min_poll: 1ms, max_poll: 20ms}", adminSigning: g.Signer, adminProducer: g.Producer, adminSecrets: s.Open}
}

func (e *serveEnv) mysql() string {
	if e.mysqlDSN != "" {
		return e.mysqlDSN
	}
	return testenv.MySQLDSN
}

// config writes the configuration file of node nodeID listening on addr.
func (e *serveEnv) config(t *testing.T, nodeID, addr string) string {
	t.Helper()
	embedded := e.embeddedAddr
	if embedded == "" {
		embedded = "127.0.0.1:0"
	}
	kafkaYAML := fmt.Sprintf(`{embedded: {addr: %q, data_dir: %q}}`, embedded, filepath.Join(t.TempDir(), "kafka"))
	if e.defaultDataDir {
		kafkaYAML = fmt.Sprintf(`{embedded: {addr: %q}}`, embedded)
	}
	if len(e.brokers) > 0 {
		b, _ := json.Marshal(e.brokers)
		kafkaYAML = fmt.Sprintf(`{brokers: %s, topic_prefix: "e2e.", partitions: 4}`, b)
	}
	if len(e.brokers) > 0 && !strings.Contains(e.extra, "verify:") {
		kafkaYAML += "\nverify: {hash_key: \"a test key of 32 bytes, not secret\"}"
	}
	if len(e.brokers) > 0 && !strings.Contains(e.extra, "shred:") {
		kafkaYAML += "\nshred: {local_key: \"" + testShredKey + "\"}"
	}
	authYAML := "{}"
	if e.keys {
		authYAML = fmt.Sprintf(`{keys: [{id: t1, secret: %q}]}`, testSecret)
	}
	yaml := fmt.Sprintf(`
node_id: %s
shutdown_timeout: 15s
log: {level: warn, format: json}
http: {addr: %q, login_per_ip: 1000, login_per_name: 1000, register_per_ip: 1000}
rate_limit: {send_per_user: 1000000, send_per_topic: 1000000, rest_per_user: 1000000, ws_connect_per_ip: 1000000}
postgres: {url: %q}
mysql: {server_dsn: %q, database_template: "%s_{tenant}"}
redis: {key_prefix: %q}
kafka: %s
auth: %s
admin: %s
account: {password: {memory: 1024, time: 1, threads: 1, salt_len: 16, key_len: 32}}
relay: %s
projections: {lag_interval: 1s, close_timeout: 5s, nack_resend_sleep: 50ms, retry: {initial_interval: 10ms, max_interval: 200ms}}
%s
`, nodeID, addr, e.dbURL, e.mysql(), e.template, e.prefix, kafkaYAML, authYAML, e.adminYAML(), e.relay, e.extra)
	file := filepath.Join(t.TempDir(), nodeID+".yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// served is a running `imledger serve`.
type served struct {
	base   string // http://host:port
	file   string // its configuration file
	stdout *syncBuffer
	stop   func() error // cancels the command, as SIGTERM does, and returns its error
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs `imledger serve --config <file>` in-process as node nodeID and waits until /readyz
// answers 200.
func (e *serveEnv) start(t *testing.T, nodeID string) *served {
	t.Helper()
	addr := freeAddr(t)
	s := &served{base: "http://" + addr, file: e.config(t, nodeID, addr), stdout: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	logs := &syncBuffer{}
	root.SetOut(s.stdout)
	root.SetErr(logs)
	root.SetArgs([]string{"serve", "--config", s.file})
	errc := make(chan error, 1)
	go func() { errc <- root.ExecuteContext(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("%s: serve exited before it was ready: %v\n%s", nodeID, err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("%s: serve not ready after 60s (last error %v)\n%s", nodeID, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-errc:
			case <-time.After(25 * time.Second):
				stopErr = fmt.Errorf("%s: serve did not stop within 25s\n%s", nodeID, logs.String())
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = s.stop() })
	return s
}

// answer is a decoded REST answer.
type answer struct {
	status  int
	header  http.Header
	Code    int            `json:"code"`
	Reason  string         `json:"reason"`
	Data    map[string]any `json:"data"`
	Details map[string]any `json:"details"`
	raw     string
}

// call sends a REST request with token (none when empty) and, for writes, idemKey as the
// Idempotency-Key; body "" sends none.
func call(t *testing.T, method, url, token, idemKey, body string) answer {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s %s: %d %v: %s", method, url, resp.StatusCode, err, raw)
	}
	return a
}

// user is a registered, logged-in user of the demo tenant.
type user struct {
	id, token string
}

// signUp registers login in the demo tenant through base and logs in.
func signUp(t *testing.T, base, login string) user {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":"demo","login":%q,"password":"correct horse battery"}`, login)
	if a := call(t, http.MethodPost, base+"/v1/im/auth/register", "", "", body); a.status != http.StatusCreated {
		t.Fatalf("register %s: %d %s", login, a.status, a.raw)
	}
	a := call(t, http.MethodPost, base+"/v1/im/auth/login", "", "", body)
	token, _ := a.Data["token"].(string)
	id, _ := a.Data["user_id"].(string)
	if a.status != http.StatusOK || token == "" || id == "" {
		t.Fatalf("login %s: %d %s", login, a.status, a.raw)
	}
	return user{id: id, token: token}
}

// createGroup creates a group owned by u and returns its id.
func createGroup(t *testing.T, base string, u user, name string) string {
	t.Helper()
	a := call(t, http.MethodPost, base+"/v1/im/groups", u.token, "create-"+name, fmt.Sprintf(`{"name":%q}`, name))
	gid, _ := a.Data["group_id"].(string)
	if a.status != http.StatusCreated || gid == "" {
		t.Fatalf("create group %s: %d %s", name, a.status, a.raw)
	}
	return gid
}

// joinGroup makes u join group gid.
func joinGroup(t *testing.T, base string, u user, gid string) {
	t.Helper()
	a := call(t, http.MethodPost, base+"/v1/im/groups/"+gid+"/join", u.token, "join-"+gid+"-"+u.id, "")
	if a.status/100 != 2 {
		t.Fatalf("user %s joins group %s: %d %s", u.id, gid, a.status, a.raw)
	}
}

// sendREST sends content to topic as u with client_msg_id cmid (also the Idempotency-Key).
func sendREST(t *testing.T, base string, u user, topic, cmid, content string) answer {
	t.Helper()
	body := fmt.Sprintf(`{"client_msg_id":%q,"content":%s}`, cmid, content)
	return call(t, http.MethodPost, base+"/v1/im/topics/"+topic+"/messages", u.token, "send-"+cmid, body)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitMetric polls /metrics until it holds line.
func waitMetric(t *testing.T, base, line string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := get(t, base+"/metrics")
		if strings.Contains(body, line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed %s", line)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runCLI runs the binary's root command with args and returns its output and error.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCmd()
	var out, errOut strings.Builder
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}
