package verify

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
)

// Stable refusal reasons of verification codes (*domain.DeniedError, answered 403).
const (
	// ReasonCodeInvalid: the code is wrong; a few more tries are left.
	ReasonCodeInvalid = "code_invalid"
	// ReasonCodeLocked: too many wrong codes; this code is dead, create a new one.
	ReasonCodeLocked = "code_locked"
	// ReasonCodeNotFound: no active code for the scene and target (never created, expired,
	// consumed or locked).
	ReasonCodeNotFound = "code_not_found"
	// ReasonCodeUsed: the code was verified already.
	ReasonCodeUsed = "code_used"
	// ReasonCodeRequired: the tenant requires a verification code for this request.
	ReasonCodeRequired = "code_required"
)

// Rate-limit names of code creation (*domain.RateLimitedError, answered 429 rate_limited).
const (
	// LimitCodeCreate: more than Config.CreatePerHour codes for one scene and target this hour.
	LimitCodeCreate domain.RateLimitKind = "code_create"
	// LimitCodeResend: a code for the scene and target was created less than
	// Config.ResendInterval ago.
	LimitCodeResend domain.RateLimitKind = "code_resend"
)

// The states of a code in the tenant's im_verification_codes.
const (
	StateIssued      = "issued"
	StateConsumed    = "consumed"
	StateExpired     = "expired"
	StateLocked      = "locked"
	StateSuperseded  = "superseded"  // a resend replaced it
	StateUndelivered = "undelivered" // the sender failed; it was withdrawn
)

var (
	//go:embed lua/create.lua
	createLua    string
	createScript = redis.NewScript(createLua)
	//go:embed lua/check.lua
	checkLua    string
	checkScript = redis.NewScript(checkLua)
)

// TenantDBs opens a tenant's MySQL database (*tenantdb.Router).
type TenantDBs interface {
	DB(ctx context.Context, tenant domain.TenantID) (*sql.DB, error)
}

// Service issues and checks codes. It is safe for concurrent use.
type Service struct {
	cfg    Config
	rdb    redis.UniversalClient
	dbs    TenantDBs
	sender Sender
	now    func() time.Time
}

// New returns a Service; rdb, dbs and sender are required.
func New(cfg Config, rdb redis.UniversalClient, dbs TenantDBs, sender Sender) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil || dbs == nil || sender == nil {
		return nil, errors.New("verify: Redis, the tenant databases and a sender are required")
	}
	cfg.setDefaults()
	return &Service{cfg: cfg, rdb: rdb, dbs: dbs, sender: sender, now: time.Now}, nil
}

// Issued is a code sent.
type Issued struct {
	CodeID    string
	ExpiresAt time.Time
	ResendAt  time.Time // no new code for the scene and target before this
	Resent    bool      // it replaced an active code
}

// Active describes the active code of a scene and target, without the code.
type Active struct {
	CodeID       string
	ExpiresAt    time.Time
	ResendAt     time.Time
	AttemptsLeft int
	Verified     bool
}

// TargetHash returns the keyed hash of target, as stored in Redis keys and MySQL rows.
func (s *Service) TargetHash(target Target) string {
	return s.mac("target:" + string(target.channel) + ":" + target.value)
}

func (s *Service) mac(msg string) string {
	m := hmac.New(sha256.New, s.cfg.HashKey)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *Service) codeMAC(tenant domain.TenantID, scene Scene, hash, code string) string {
	return s.mac("code:" + tenant.String() + ":" + string(scene) + ":" + hash + ":" + code)
}

func (s *Service) keys(tenant domain.TenantID, scene Scene, hash string) (active, counter string) {
	base := s.cfg.KeyPrefix + tenant.String() + ":vcode:{" + string(scene) + ":" + hash + "}:"
	return base + "active", base + "created"
}

// Create issues a new code for scene and target and sends it; an active code of the same scene
// and target is replaced (a resend). Refusals: *domain.RateLimitedError code_resend (within the
// resend window) or code_create (over Config.CreatePerHour this hour). Redis, MySQL or the sender
// failing is a retryable error and leaves no active code.
func (s *Service) Create(ctx context.Context, tenant domain.TenantID, scene Scene, target Target) (Issued, error) {
	if target.IsZero() {
		return Issued{}, &domain.ValidationError{Field: "phone", Reason: "required", Detail: "a phone or an email"}
	}
	db, err := s.dbs.DB(ctx, tenant)
	if err != nil {
		return Issued{}, err
	}
	hash := s.TargetHash(target)
	code, err := newCode(s.cfg.CodeLength)
	if err != nil {
		return Issued{}, fmt.Errorf("verify: new code: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Issued{}, fmt.Errorf("verify: code id: %w", err)
	}
	now := s.now()
	active, counter := s.keys(tenant, scene, hash)
	res, err := createScript.Run(ctx, s.rdb, []string{active, counter}, now.UnixMilli(), id.String(),
		s.codeMAC(tenant, scene, hash, code), s.cfg.TTL.Milliseconds(), s.cfg.ResendInterval.Milliseconds(),
		s.cfg.CreatePerHour).StringSlice()
	if err != nil {
		return Issued{}, domain.Retryable("verification code", err)
	}
	wait, _ := strconv.ParseInt(res[1], 10, 64)
	switch res[0] {
	case "resend_too_soon":
		return Issued{}, &domain.RateLimitedError{Limit: LimitCodeResend, RetryAfter: time.Duration(wait) * time.Millisecond}
	case "too_many":
		return Issued{}, &domain.RateLimitedError{Limit: LimitCodeCreate, RetryAfter: time.Duration(max(wait, 1)) * time.Millisecond}
	}
	old := res[2]
	iss := Issued{CodeID: id.String(), ExpiresAt: now.Add(s.cfg.TTL), ResendAt: now.Add(s.cfg.ResendInterval), Resent: old != ""}
	// A code that did not go out is withdrawn even when the caller is gone (its request ended
	// while the gateway was slow): else it would stay active, unreceived, and refuse the next
	// try as code_resend.
	withdraw := func(undelivered bool) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
		defer cancel()
		_, _ = checkAndDelete(wctx, s.rdb, active, id.String())
		if undelivered {
			_ = s.finish(wctx, db, id.String(), StateUndelivered, 0)
		}
	}
	if err := s.record(ctx, db, scene, hash, target.channel, id.String(), old, now, iss.ExpiresAt); err != nil {
		withdraw(false)
		return Issued{}, err
	}
	if err := s.sender.Send(ctx, Delivery{Tenant: tenant, Scene: scene, Channel: target.channel, To: target.value,
		TargetHash: hash, Code: code, TTL: s.cfg.TTL}); err != nil {
		withdraw(true)
		return Issued{}, domain.Retryable("verification code delivery", err)
	}
	return iss, nil
}

// record inserts the new code's audit row, marks the code it replaced superseded and the codes of
// the scene and target whose time ran out expired.
func (s *Service) record(ctx context.Context, db *sql.DB, scene Scene, hash string, ch Channel, id, old string, now, exp time.Time) error {
	if _, err := db.ExecContext(ctx, `UPDATE im_verification_codes SET state = ?, finished_at = ?
		WHERE scene = ? AND target_hash = ? AND state = ? AND expires_at <= ?`,
		StateExpired, now.UTC(), string(scene), hash, StateIssued, now.UTC()); err != nil {
		return domain.Retryable("verification code audit", err)
	}
	if old != "" {
		if _, err := db.ExecContext(ctx, `UPDATE im_verification_codes SET state = ?, finished_at = ? WHERE code_id = ? AND state = ?`,
			StateSuperseded, now.UTC(), old, StateIssued); err != nil {
			return domain.Retryable("verification code audit", err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO im_verification_codes
		(code_id, scene, target_hash, channel, state, attempts, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?)`,
		id, string(scene), hash, string(ch), StateIssued, now.UTC(), exp.UTC()); err != nil {
		return domain.Retryable("verification code audit", err)
	}
	return nil
}

func (s *Service) finish(ctx context.Context, db *sql.DB, id, state string, attempts int) error {
	if _, err := db.ExecContext(ctx, `UPDATE im_verification_codes SET state = ?, attempts = GREATEST(attempts, ?), finished_at = ?
		WHERE code_id = ? AND state = ?`, state, attempts, s.now().UTC(), id, StateIssued); err != nil {
		return domain.Retryable("verification code audit", err)
	}
	return nil
}

// GetActive returns the active code of scene and target (the resend window's hot read).
// domain.ErrNotFound when there is none; a retryable error when Redis does not answer.
func (s *Service) GetActive(ctx context.Context, tenant domain.TenantID, scene Scene, target Target) (Active, error) {
	active, _ := s.keys(tenant, scene, s.TargetHash(target))
	v, err := s.rdb.HMGet(ctx, active, "id", "attempts", "resend_at", "expires_at", "verified").Result()
	if err != nil {
		return Active{}, domain.Retryable("verification code", err)
	}
	id, _ := v[0].(string)
	if id == "" {
		return Active{}, domain.ErrNotFound
	}
	num := func(x any) int64 {
		str, _ := x.(string)
		n, _ := strconv.ParseInt(str, 10, 64)
		return n
	}
	verified, _ := v[4].(string)
	return Active{CodeID: id, AttemptsLeft: max(s.cfg.MaxAttempts-int(num(v[1])), 0),
		ResendAt: time.UnixMilli(num(v[2])), ExpiresAt: time.UnixMilli(num(v[3])), Verified: verified == "1"}, nil
}

// Verify checks code against the active code of scene and target and marks it verified, keeping
// it active for Consume. Of concurrent verifications of one code exactly one succeeds; the others
// are refused code_used. Refusals (*domain.DeniedError): code_not_found, code_invalid (a wrong
// try, counted), code_locked (the wrong try that killed the code), code_used.
func (s *Service) Verify(ctx context.Context, tenant domain.TenantID, scene Scene, target Target, code string) error {
	return s.check(ctx, tenant, scene, target, code, false)
}

// Consume checks code like Verify and ends the code: it can never be used again, and its audit
// row turns consumed. Of concurrent consumptions exactly one succeeds; the others are refused
// code_not_found.
func (s *Service) Consume(ctx context.Context, tenant domain.TenantID, scene Scene, target Target, code string) error {
	return s.check(ctx, tenant, scene, target, code, true)
}

func (s *Service) check(ctx context.Context, tenant domain.TenantID, scene Scene, target Target, code string, consume bool) error {
	if target.IsZero() {
		return &domain.ValidationError{Field: "phone", Reason: "required", Detail: "a phone or an email"}
	}
	if !digits(code, s.cfg.CodeLength) {
		// Refused before Redis: a code no Create could have made is not a wrong try, and never
		// brings the active code nearer its lock.
		return &domain.ValidationError{Field: "code", Reason: "bad_format", Detail: strconv.Itoa(s.cfg.CodeLength) + " digits"}
	}
	db, err := s.dbs.DB(ctx, tenant)
	if err != nil {
		return err
	}
	hash := s.TargetHash(target)
	active, _ := s.keys(tenant, scene, hash)
	mode := "0"
	if consume {
		mode = "1"
	}
	res, err := checkScript.Run(ctx, s.rdb, []string{active}, s.codeMAC(tenant, scene, hash, code), s.cfg.MaxAttempts, mode).StringSlice()
	if err != nil {
		return domain.Retryable("verification code", err)
	}
	attempts, _ := strconv.Atoi(res[2])
	switch res[0] {
	case "no_code":
		return domain.Deny(ReasonCodeNotFound)
	case "wrong":
		_, _ = db.ExecContext(ctx, `UPDATE im_verification_codes SET attempts = GREATEST(attempts, ?) WHERE code_id = ?`, attempts, res[1])
		return domain.Deny(ReasonCodeInvalid)
	case "locked":
		if err := s.finish(ctx, db, res[1], StateLocked, attempts); err != nil {
			return err
		}
		return domain.Deny(ReasonCodeLocked)
	case "used":
		return domain.Deny(ReasonCodeUsed)
	case "consumed":
		// The code is gone from Redis, so it is consumed whatever the audit write does; a failed
		// write leaves the row issued until a later Create of the target marks it expired.
		_ = s.finish(ctx, db, res[1], StateConsumed, attempts)
	}
	return nil
}

// digits reports whether code is exactly n ASCII decimal digits, the only form newCode makes.
func digits(code string, n int) bool {
	if len(code) != n {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}

// withdrawTimeout bounds withdrawing a code that did not go out, which outlives its request.
const withdrawTimeout = 5 * time.Second

// checkAndDelete deletes the active code key when it still holds code id (a withdrawn code).
func checkAndDelete(ctx context.Context, rdb redis.UniversalClient, key, id string) (bool, error) {
	n, err := withdrawScript.Run(ctx, rdb, []string{key}, id).Int()
	return n == 1, err
}

var withdrawScript = redis.NewScript(`if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// newCode returns n uniformly random decimal digits.
func newCode(n int) (string, error) {
	b := make([]byte, n)
	ten := big.NewInt(10)
	for i := range b {
		d, err := rand.Int(rand.Reader, ten)
		if err != nil {
			return "", err
		}
		b[i] = byte('0' + d.Int64())
	}
	return string(b), nil
}
