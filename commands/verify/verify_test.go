package verify_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/verify"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// gateway is a real HTTP SMS gateway (httptest) that keeps the last code per target.
type gateway struct {
	mu    sync.Mutex
	codes map[string]string
	posts int
}

func newGateway(t *testing.T) (*gateway, *httptest.Server) {
	g := &gateway{codes: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			To   string `json:"to"`
			Code string `json:"code"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Code == "" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		g.codes[body.To] = body.Code
		g.posts++
		g.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	return g, srv
}

func (g *gateway) code(to string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.codes[to]
}

type fixture struct {
	svc    *verify.Service
	gw     *gateway
	db     *sql.DB
	tenant domain.TenantID
}

func newFixture(t *testing.T, rdb redis.UniversalClient, prefix string) fixture {
	t.Helper()
	ctx := testenv.Context(t)
	testenv.MySQLServer(t)
	dbPrefix := testenv.UniqueName("imt_vc")
	testenv.DropMySQLDatabasesAtCleanup(t, dbPrefix+"_")
	router, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN, DatabaseTemplate: dbPrefix + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Close() })
	tenant := domain.MustTenantID("acme")
	if err := router.Provision(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	db, err := router.DB(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	gw, srv := newGateway(t)
	sender, err := verify.NewHTTPSender(verify.HTTPSenderConfig{URL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := verify.New(verify.Config{HashKey: []byte("0123456789abcdef0123"), KeyPrefix: prefix,
		ResendInterval: time.Millisecond, MaxAttempts: 3}, rdb, router, sender)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{svc: svc, gw: gw, db: db, tenant: tenant}
}

func (f fixture) state(t *testing.T, id string) (string, int) {
	t.Helper()
	var state string
	var attempts int
	if err := f.db.QueryRow(`SELECT state, attempts FROM im_verification_codes WHERE code_id = ?`, id).Scan(&state, &attempts); err != nil {
		t.Fatalf("audit row %s: %v", id, err)
	}
	return state, attempts
}

func denied(err error, reason string) bool {
	var d *domain.DeniedError
	return errors.As(err, &d) && d.Reason == reason
}

func target(t *testing.T, phone string) verify.Target {
	t.Helper()
	tg, err := verify.NewTarget(phone, "")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestCodeLifeCycle(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	to := target(t, "+86 138-0013-8000")

	first, err := f.svc.Create(ctx, f.tenant, verify.SceneRegister, to)
	if err != nil {
		t.Fatal(err)
	}
	if first.Resent {
		t.Fatal("the first code is not a resend")
	}
	act, err := f.svc.GetActive(ctx, f.tenant, verify.SceneRegister, to)
	if err != nil || act.CodeID != first.CodeID || act.AttemptsLeft != 3 {
		t.Fatalf("GetActive = %+v, %v; want code %s with 3 attempts", act, err, first.CodeID)
	}
	time.Sleep(5 * time.Millisecond) // past the resend window
	second, err := f.svc.Create(ctx, f.tenant, verify.SceneRegister, to)
	if err != nil || !second.Resent {
		t.Fatalf("resend = %+v, %v", second, err)
	}
	if st, _ := f.state(t, first.CodeID); st != verify.StateSuperseded {
		t.Fatalf("first code state %s, want superseded", st)
	}
	code := f.gw.code("+8613800138000")
	if len(code) != 6 {
		t.Fatalf("gateway got code %q", code)
	}
	// A code of another scene never passes.
	if err := f.svc.Consume(ctx, f.tenant, verify.SceneLogin, to, code); !denied(err, verify.ReasonCodeNotFound) {
		t.Fatalf("consume in another scene: %v, want code_not_found", err)
	}
	if err := f.svc.Verify(ctx, f.tenant, verify.SceneRegister, to, code); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := f.svc.Consume(ctx, f.tenant, verify.SceneRegister, to, code); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if st, _ := f.state(t, second.CodeID); st != verify.StateConsumed {
		t.Fatalf("consumed code state %s", st)
	}
	if err := f.svc.Consume(ctx, f.tenant, verify.SceneRegister, to, code); !denied(err, verify.ReasonCodeNotFound) {
		t.Fatalf("second consume: %v, want code_not_found", err)
	}
	if _, err := f.svc.GetActive(ctx, f.tenant, verify.SceneRegister, to); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("GetActive after consume: %v", err)
	}
	// Nothing in MySQL or Redis holds the phone number in clear.
	var n int
	if err := f.db.QueryRow(`SELECT COUNT(*) FROM im_verification_codes WHERE target_hash LIKE '%13800138000%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("clear phone in MySQL: %d, %v", n, err)
	}
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if contains(k, "13800138000") {
			t.Fatalf("clear phone in Redis key %s", k)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestSixthCreationWithinAnHourIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	to := target(t, "13900000001")
	for i := range 5 {
		if _, err := f.svc.Create(ctx, f.tenant, verify.SceneLogin, to); err != nil {
			t.Fatalf("creation %d: %v", i+1, err)
		}
		time.Sleep(3 * time.Millisecond)
	}
	_, err := f.svc.Create(ctx, f.tenant, verify.SceneLogin, to)
	var rl *domain.RateLimitedError
	if !errors.As(err, &rl) || rl.Limit != verify.LimitCodeCreate || rl.RetryAfter < 59*time.Minute {
		t.Fatalf("6th creation: %v, want code_create rate limit for about an hour", err)
	}
	// Another target and another scene have their own counters.
	if _, err := f.svc.Create(ctx, f.tenant, verify.SceneLogin, target(t, "13900000002")); err != nil {
		t.Fatalf("other target: %v", err)
	}
	if _, err := f.svc.Create(ctx, f.tenant, verify.SceneRegister, to); err != nil {
		t.Fatalf("other scene: %v", err)
	}
	if f.gw.posts != 7 {
		t.Fatalf("gateway posts %d, want 7 (the refused creation sends nothing)", f.gw.posts)
	}
}

func TestResendWithinTheWindowIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	svc, err := verify.New(verify.Config{HashKey: []byte("0123456789abcdef0123"), KeyPrefix: prefix}, rdb,
		dbsOf{f.db}, &verify.LogSender{})
	if err != nil {
		t.Fatal(err)
	}
	to := target(t, "13900000003")
	if _, err := svc.Create(ctx, f.tenant, verify.SceneLogin, to); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Create(ctx, f.tenant, verify.SceneLogin, to)
	var rl *domain.RateLimitedError
	if !errors.As(err, &rl) || rl.Limit != verify.LimitCodeResend || rl.RetryAfter > time.Minute {
		t.Fatalf("resend at once: %v, want code_resend", err)
	}
}

type dbsOf struct{ db *sql.DB }

func (d dbsOf) DB(context.Context, domain.TenantID) (*sql.DB, error) { return d.db, nil }

func TestWrongCodesLockTheCode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	to := target(t, "13900000004")
	iss, err := f.svc.Create(ctx, f.tenant, verify.SceneResetPassword, to)
	if err != nil {
		t.Fatal(err)
	}
	code := f.gw.code("13900000004")
	wrong := "000000"
	if wrong == code {
		wrong = "111111"
	}
	for i := range 2 {
		if err := f.svc.Verify(ctx, f.tenant, verify.SceneResetPassword, to, wrong); !denied(err, verify.ReasonCodeInvalid) {
			t.Fatalf("wrong try %d: %v, want code_invalid", i+1, err)
		}
	}
	if err := f.svc.Verify(ctx, f.tenant, verify.SceneResetPassword, to, wrong); !denied(err, verify.ReasonCodeLocked) {
		t.Fatalf("3rd wrong try: %v, want code_locked", err)
	}
	if err := f.svc.Consume(ctx, f.tenant, verify.SceneResetPassword, to, code); !denied(err, verify.ReasonCodeNotFound) {
		t.Fatalf("the right code after the lock: %v, want code_not_found", err)
	}
	if st, attempts := f.state(t, iss.CodeID); st != verify.StateLocked || attempts != 3 {
		t.Fatalf("audit: %s after %d attempts, want locked after 3", st, attempts)
	}
}

// TestMalformedCodesAreRefusedWithoutATry: a code that is not CodeLength digits (a letter, a
// space, a sign) is refused as invalid input and costs the active code none of its tries, so
// neither a typo nor a stranger's junk brings the owner's code nearer its lock.
func TestMalformedCodesAreRefusedWithoutATry(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	to := target(t, "13900000009")
	iss, err := f.svc.Create(ctx, f.tenant, verify.SceneLogin, to)
	if err != nil {
		t.Fatal(err)
	}
	code := f.gw.code("13900000009")
	for _, bad := range []string{"12345a", " 12345", "12345 ", "+12345", "-12345", "１２３４５６"[:6], "0x1234"} {
		for _, check := range []func(context.Context, domain.TenantID, verify.Scene, verify.Target, string) error{f.svc.Verify, f.svc.Consume} {
			err := check(ctx, f.tenant, verify.SceneLogin, to, bad)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != "code" || ve.Reason != "bad_format" {
				t.Fatalf("code %q: %v, want invalid code bad_format", bad, err)
			}
		}
	}
	act, err := f.svc.GetActive(ctx, f.tenant, verify.SceneLogin, to)
	if err != nil || act.AttemptsLeft != 3 {
		t.Fatalf("after malformed codes: %+v, %v; want all 3 attempts left", act, err)
	}
	if _, attempts := f.state(t, iss.CodeID); attempts != 0 {
		t.Fatalf("audit row counts %d attempts, want 0", attempts)
	}
	if err := f.svc.Consume(ctx, f.tenant, verify.SceneLogin, to, code); err != nil {
		t.Fatalf("the right code after malformed ones: %v", err)
	}
}

func TestConcurrentVerificationsExactlyOneSucceeds(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	for _, consume := range []bool{false, true} {
		to := target(t, "1390000001"+map[bool]string{false: "0", true: "1"}[consume])
		if _, err := f.svc.Create(ctx, f.tenant, verify.SceneChangePhone, to); err != nil {
			t.Fatal(err)
		}
		code := f.gw.code(map[bool]string{false: "13900000010", true: "13900000011"}[consume])
		const n = 2
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				if consume {
					errs[i] = f.svc.Consume(ctx, f.tenant, verify.SceneChangePhone, to, code)
				} else {
					errs[i] = f.svc.Verify(ctx, f.tenant, verify.SceneChangePhone, to, code)
				}
			})
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case denied(err, verify.ReasonCodeUsed), denied(err, verify.ReasonCodeNotFound):
			default:
				t.Fatalf("consume=%t: unexpected %v", consume, err)
			}
		}
		if ok != 1 {
			t.Fatalf("consume=%t: %d of %d concurrent checks succeeded, want exactly 1 (%v)", consume, ok, n, errs)
		}
	}
}

func TestRedisDownFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	private := testenv.StartPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: private.Addr(), MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	f := newFixture(t, rdb, "im:")
	to := target(t, "13900000020")
	if _, err := f.svc.Create(ctx, f.tenant, verify.SceneLogin, to); err != nil {
		t.Fatal(err)
	}
	code := f.gw.code("13900000020")
	private.Stop()
	for name, err := range map[string]error{
		"create": func() error {
			_, err := f.svc.Create(ctx, f.tenant, verify.SceneLogin, target(t, "13900000021"))
			return err
		}(),
		"verify":  f.svc.Verify(ctx, f.tenant, verify.SceneLogin, to, code),
		"consume": f.svc.Consume(ctx, f.tenant, verify.SceneLogin, to, code),
		"active":  func() error { _, err := f.svc.GetActive(ctx, f.tenant, verify.SceneLogin, to); return err }(),
	} {
		if !errors.Is(err, domain.ErrRetryable) {
			t.Errorf("%s with Redis down: %v, want a retryable refusal (503 retry)", name, err)
		}
	}
	if f.gw.posts != 1 {
		t.Fatalf("gateway posts %d: a creation with Redis down must send nothing", f.gw.posts)
	}
}

func TestGatewayFailureWithdrawsTheCode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "gateway down", http.StatusBadGateway)
	}))
	t.Cleanup(down.Close)
	sender, err := verify.NewHTTPSender(verify.HTTPSenderConfig{URL: down.URL})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := verify.New(verify.Config{HashKey: []byte("0123456789abcdef0123"), KeyPrefix: prefix}, rdb, dbsOf{f.db}, sender)
	if err != nil {
		t.Fatal(err)
	}
	to, err := verify.NewTarget("", "Alice@Example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, f.tenant, verify.SceneLogin, to); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("create with the gateway down: %v, want retryable", err)
	}
	if _, err := svc.GetActive(ctx, f.tenant, verify.SceneLogin, to); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a code the gateway refused is active: %v", err)
	}
	var state string
	if err := f.db.QueryRow(`SELECT state FROM im_verification_codes WHERE channel = 'email'`).Scan(&state); err != nil || state != verify.StateUndelivered {
		t.Fatalf("audit state %q, %v; want undelivered", state, err)
	}
}

// A gateway that holds the request until the caller gives up (the client went away, or its
// deadline passed): the code is withdrawn and recorded undelivered all the same, so the target is
// not left with an active code nobody received, blocking a new one for the resend interval.
func TestCallerGoneWhileGatewayHangsWithdrawsTheCode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	sender, err := verify.NewHTTPSender(verify.HTTPSenderConfig{URL: slow.URL, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := verify.New(verify.Config{HashKey: []byte("0123456789abcdef0123"), KeyPrefix: prefix}, rdb, dbsOf{f.db}, sender)
	if err != nil {
		t.Fatal(err)
	}
	to := target(t, "13900000021")
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := svc.Create(rctx, f.tenant, verify.SceneLogin, to); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("create with the caller gone: %v, want retryable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("create took %s after its caller left", d)
	}
	if act, err := svc.GetActive(ctx, f.tenant, verify.SceneLogin, to); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("a code that never went out is active: %+v, %v", act, err)
	}
	var state string
	if err := f.db.QueryRow(`SELECT state FROM im_verification_codes WHERE target_hash = ?`, svc.TargetHash(to)).Scan(&state); err != nil || state != verify.StateUndelivered {
		t.Errorf("audit state %q, %v; want undelivered", state, err)
	}
	// The gateway still hangs: a new code must be tried again, not refused code_resend.
	rctx2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	var rl *domain.RateLimitedError
	if _, err := svc.Create(rctx2, f.tenant, verify.SceneLogin, to); errors.As(err, &rl) {
		t.Errorf("a new code after an undelivered one: %v, want the gateway tried again", err)
	}
}

// A gateway that redirects is not followed: the code and the number go to the configured URL
// only (a 307/308 would post them again to wherever it points, a 302 would turn into a GET whose
// 2xx counted as delivered), and the code is withdrawn as undelivered.
func TestGatewayRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	f := newFixture(t, rdb, prefix)
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(other.Close)
	for i, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound, http.StatusMovedPermanently} {
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", status)
		}))
		t.Cleanup(redirecting.Close)
		sender, err := verify.NewHTTPSender(verify.HTTPSenderConfig{URL: redirecting.URL, Token: "gw-secret"})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := verify.New(verify.Config{HashKey: []byte("0123456789abcdef0123"), KeyPrefix: prefix}, rdb, dbsOf{f.db}, sender)
		if err != nil {
			t.Fatal(err)
		}
		to := target(t, "1390000003"+string(rune('0'+i)))
		if _, err := svc.Create(ctx, f.tenant, verify.SceneLogin, to); !errors.Is(err, domain.ErrRetryable) {
			t.Errorf("HTTP %d from the gateway: %v, want retryable", status, err)
		}
		if _, err := svc.GetActive(ctx, f.tenant, verify.SceneLogin, to); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("HTTP %d from the gateway left the code active: %v", status, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) != 0 {
		t.Errorf("the redirect target got %v", elsewhere)
	}
}
