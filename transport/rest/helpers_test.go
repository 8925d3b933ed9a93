package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/pushsettings"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/login"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/readmodels/tokendb"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/rest"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

const signingSecret = "0123456789abcdef0123456789abcdef-test"

// stack is an API server over the real handlers: a fresh PostgreSQL database, its own Redis key
// prefix, and with reads a provisioned MySQL tenant database.
type stack struct {
	srv      *httptest.Server
	api      *rest.API
	pool     *pgxpool.Pool
	store    *eventstore.Store
	rdb      *redis.Client
	prefix   string
	accounts *account.Service
	signer   *auth.Signer
	tenant   domain.TenantID // provisioned in MySQL when reads are on

	msgs   *msgstore.Store
	biz    *business.Store
	router *tenantdb.Router

	files     *files.Service // with files: over a bucket in a temporary directory
	fileDB    *filedb.Store
	fileQueue *checkQueue

	self *selfParts // with self: the account self-service's collaborators
}

type stackOpts struct {
	reads   bool                     // MySQL read models, history, unread and business reads
	more    bool                     // with reads: push settings and action tokens too
	gateFor func(s *stack) rest.Gate // optional: the gate, built over the stack's stores
	files   bool                     // with reads: the file endpoints and the send path's head.files check
	s3      bool                     // with files: an S3-compatible bucket that signs direct URLs
	groups  group.Config             // the group handlers' configuration
	// tokens, when set, wraps the action token service (more) the API uses.
	tokens func(rest.ActionTokenService) rest.ActionTokenService
	// self, with reads, adds the account self-service, verification codes sent to a
	// real HTTP gateway, the login session list and the real gate over the tenant registry
	// (the tenant is provisioned there); codeTTL is the codes' lifetime (default 5 min).
	self    bool
	codeTTL time.Duration
}

func newStack(t testing.TB, cfg rest.Config, o stackOpts) *stack {
	t.Helper()
	ctx := testCtx(t)
	s := &stack{tenant: domain.MustTenantID(testenv.UniqueName("rest"))}
	s.pool, s.store = eventStore(t)
	s.rdb, s.prefix = testenv.Redis(t)
	var err error
	s.accounts, err = account.New(account.Deps{Pool: s.pool, Store: s.store},
		account.Config{Password: passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	s.signer = newSigner(t, time.Now)
	ops, err := message.NewMessageOpsHandler(message.MessageOpsDeps{Store: s.store}, message.MessageOpsConfig{MaxContentBytes: cfg.MaxContentBytes})
	if err != nil {
		t.Fatal(err)
	}
	// The group handlers fold their commits into the loader the policy reads, as serve's do.
	loader, err := group.NewLoader(s.store, group.LoaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := group.New(group.Deps{Store: s.store, Loader: loader}, o.groups)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(policy.Deps{Loader: loader}, policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	idem, err := rest.NewPostgresIdempotency(s.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	pres, err := presence.New(presence.Deps{Redis: s.rdb}, presence.Config{KeyPrefix: s.prefix + "pres:", NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RateLimitPrefix == "" {
		cfg.RateLimitPrefix = s.prefix + "rl:"
	}
	h := rest.Handlers{MessageOps: ops, Groups: groups, Presence: pres, PresencePolicy: pol, Accounts: s.accounts,
		Tokens: s.signer, APIKeys: s.accounts, Idempotency: idem, Redis: s.rdb}
	if o.gateFor != nil {
		h.Gate = o.gateFor(s)
	}
	if o.reads {
		s.withReads(t, ctx, &h, o)
	} else {
		h.ReadPolicy = anyReader{}
	}
	if o.self {
		s.withSelf(t, &h, o)
	}
	sendDeps := message.SendMessageDeps{Store: s.store, Redis: s.rdb}
	if o.files {
		sendDeps.Files = s.withFiles(t, &h, o.s3)
	}
	send, err := message.NewSendMessageHandler(sendDeps,
		message.SendMessageConfig{Partitions: 2, MaxContentBytes: cfg.MaxContentBytes, Seq: seq.Config{KeyPrefix: s.prefix}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = send.Close() })
	h.Send = send
	s.serve(t, cfg, h)
	return s
}

func (s *stack) serve(t testing.TB, cfg rest.Config, h rest.Handlers) {
	t.Helper()
	mux := http.NewServeMux()
	api, err := rest.New(mux, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	s.api = api
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
}

// withReads provisions the tenant's MySQL database and adds the read-side handlers.
func (s *stack) withReads(t testing.TB, ctx context.Context, h *rest.Handlers, o stackOpts) {
	t.Helper()
	testenv.MySQLServer(t)
	router, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Close() })
	s.router = router
	testenv.DropMySQLDatabasesAtCleanup(t, router.DatabaseName(s.tenant))
	if err := router.Provision(ctx, s.tenant); err != nil {
		t.Fatal(err)
	}
	s.msgs = msgstore.NewStore(router)
	if s.biz, err = business.NewStore(router, s.rdb, business.Config{KeyPrefix: s.prefix + "biz:"}); err != nil {
		t.Fatal(err)
	}
	reader := query.NewReader(s.msgs, nil, nil)
	conv := query.NewConversationReader(reader, s.biz)
	h.History, h.Unread, h.Business = reader, conv, s.biz
	h.Conversations, h.FriendRequests, h.Search = conv, s.biz, s.biz
	h.ReadPolicy = rest.MemberReadPolicy{Members: s.biz}
	if o.more {
		if h.Push, err = pushsettings.New(pushsettings.Deps{Store: s.store, PreLog: pushdb.New(router)}); err != nil {
			t.Fatal(err)
		}
		if h.ActionTokens, err = actiontoken.New(actiontoken.Config{KeyPrefix: s.prefix + "at:"},
			actiontoken.Deps{Redis: s.rdb, Events: s.store, Rows: tokendb.New(router)}); err != nil {
			t.Fatal(err)
		}
		if o.tokens != nil {
			h.ActionTokens = o.tokens(h.ActionTokens)
		}
	}
}

// withFiles adds the file endpoints over a bucket in a temporary directory (or, with s3, an
// S3-compatible store with direct URLs on) and returns the send path's head.files check, as
// serve wires them. It needs withReads first.
func (s *stack) withFiles(t testing.TB, h *rest.Handlers, s3 bool) message.FileAccess {
	t.Helper()
	var bucket *blob.Bucket
	if s3 {
		bucket = testenv.S3Bucket(t)
	} else {
		b, err := fileblob.OpenBucket(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		bucket = b
	}
	s.fileDB, s.fileQueue = filedb.New(s.router), &checkQueue{}
	var err error
	if s.files, err = files.New(files.Deps{Bucket: bucket, Records: s.fileDB, Events: s.store, Queue: s.fileQueue},
		files.Config{DirectURLs: s3}); err != nil {
		t.Fatal(err)
	}
	h.Files, h.FileRefs, h.FileURLs = s.files, s.fileDB, rest.FileURLSigner{Key: []byte("file-url-key"), TTL: time.Minute}
	access, err := files.NewAccess(s.fileDB, h.ReadPolicy)
	if err != nil {
		t.Fatal(err)
	}
	return access
}

// checkFiles runs the security checks queued so far, as the check consumer would.
func (s *stack) checkFiles(t testing.TB) {
	t.Helper()
	for _, task := range s.fileQueue.take() {
		if err := s.files.Check(testCtx(t), task); err != nil {
			t.Fatal(err)
		}
	}
}

// project applies every event of the stack's tenant to the MySQL read models, as the
// projectors would.
func (s *stack) project(t testing.TB) {
	t.Helper()
	ctx := testCtx(t)
	evs, err := s.store.ReadAll(ctx, eventstore.Filter{Tenant: s.tenant}, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.msgs.Apply(ctx, s.tenant, "test.messages", msgstore.DefaultTables(), evs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.biz.Apply(ctx, s.tenant, "test.business", business.DefaultTables(), evs); err != nil {
		t.Fatal(err)
	}
	if s.fileDB != nil {
		if _, err := s.fileDB.Apply(ctx, s.tenant, evs); err != nil {
			t.Fatal(err)
		}
	}
	if s.self != nil {
		if _, err := s.self.logins.ApplyBatch(ctx, s.tenant, login.DefaultTables(), evs); err != nil {
			t.Fatal(err)
		}
	}
}

// eventStore migrates a fresh database and returns a pool of pgx's default size and a store.
func eventStore(t testing.TB) (*pgxpool.Pool, *eventstore.Store) {
	t.Helper()
	return storetest.EventStore(t, 0)
}

func newSigner(t testing.TB, now func() time.Time) *auth.Signer {
	t.Helper()
	s, err := auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "k1", Secret: signingSecret}}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// token issues a token for user of tenant.
func (s *stack) token(t testing.TB, tenant domain.TenantID, user domain.UserID) string {
	t.Helper()
	tok, err := s.signer.Issue(tenant, user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// answer is a decoded API answer.
type answer struct {
	Status int
	Header http.Header
	Body   struct {
		Code       int             `json:"code"`
		Data       json.RawMessage `json:"data"`
		Reason     string          `json:"reason"`
		Message    string          `json:"message"`
		Details    map[string]any  `json:"details"`
		RequestID  string          `json:"request_id"`
		ServerTime string          `json:"server_time"`
	}
	Raw string
}

// data decodes the answer's data into a map.
func (a answer) data(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Body.Data, &m); err != nil {
		t.Fatalf("data of %s: %v", a.Raw, err)
	}
	return m
}

// req describes a request; empty header values are left out.
type req struct {
	method, path, body string
	token              string
	key                string // Idempotency-Key
	headers            map[string]string
	noType             bool // send the body without a Content-Type
}

func (s *stack) do(t testing.TB, r req) answer {
	t.Helper()
	hr, err := http.NewRequestWithContext(testCtx(t), r.method, s.srv.URL+r.path, bytes.NewBufferString(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" && !r.noType {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.key != "" {
		hr.Header.Set(rest.HeaderIdempotencyKey, r.key)
	}
	for k, v := range r.headers {
		if v != "" {
			hr.Header.Set(k, v)
		}
	}
	resp, err := s.srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	if err := json.Unmarshal(raw, &a.Body); err != nil {
		t.Fatalf("%s %s: answer is not the JSON envelope: %v: %s", r.method, r.path, err, raw)
	}
	if a.Body.Code != a.Status || a.Body.RequestID == "" || a.Body.ServerTime == "" {
		t.Fatalf("%s %s: envelope fields missing or inconsistent (status %d): %s", r.method, r.path, a.Status, raw)
	}
	if _, err := time.Parse(time.RFC3339Nano, a.Body.ServerTime); err != nil {
		t.Fatalf("server_time: %v", err)
	}
	return a
}

// expect fails unless a has status and reason.
func expect(t testing.TB, what string, a answer, status int, reason string) {
	t.Helper()
	if a.Status != status || a.Body.Reason != reason {
		t.Fatalf("%s: got %d %s, want %d %s", what, a.Status, a.Raw, status, reason)
	}
}

func (s *stack) count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(testCtx(t), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// anyReader lets everyone read every topic: for tests without read models, where the read
// policy is not what is tested.
type anyReader struct{}

func (anyReader) CanRead(context.Context, domain.TenantID, domain.UserID, domain.Topic) error {
	return nil
}
