package actiontoken

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
)

// Action is what a token allows.
type Action string

// The actions.
const (
	ActionResetPassword   Action = "reset_password"
	ActionJoinGroup       Action = "join_group"
	ActionEnterpriseLogin Action = "enterprise_login"
)

// ParseAction returns the action named s; an unknown one is a *domain.ValidationError.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case ActionResetPassword, ActionJoinGroup, ActionEnterpriseLogin:
		return a, nil
	}
	return "", &domain.ValidationError{Field: "action", Reason: "unknown", Detail: "reset_password, join_group or enterprise_login"}
}

// Stable refusal reasons (*domain.DeniedError, answered 403).
const (
	// ReasonTokenInvalid: no such token, or a token of another action.
	ReasonTokenInvalid = "action_token_invalid"
	// ReasonTokenUsed: the token was consumed or revoked.
	ReasonTokenUsed = "action_token_used"
	// ReasonTokenExpired: the token's time ran out.
	ReasonTokenExpired = "action_token_expired"
)

// States of a token's MySQL row.
const (
	StateActive   = "active"
	StateConsumed = "consumed"
	StateRevoked  = "revoked"
)

// MaxSubjectLen bounds a token's subject.
const MaxSubjectLen = 128

// Config configures a Service.
type Config struct {
	// KeyPrefix starts every Redis key: <KeyPrefix><tenant>:atoken:<sha256>. Default "im:".
	KeyPrefix string `koanf:"key_prefix"`
	// DefaultTTL is a token's lifetime when Issue is given none. Default 24 h.
	DefaultTTL time.Duration `koanf:"default_ttl"`
	// MaxTTL bounds a token's lifetime. Default 30 days.
	MaxTTL time.Duration `koanf:"max_ttl"`
}

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = 24 * time.Hour
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = 30 * 24 * time.Hour
	}
}

// Validate reports every problem of c, with defaults applied.
func (c Config) Validate() error {
	c.setDefaults()
	if c.DefaultTTL < time.Second || c.MaxTTL < c.DefaultTTL {
		return errors.New("actiontoken: DefaultTTL must be at least 1s and MaxTTL at least DefaultTTL")
	}
	return nil
}

// TenantDBs opens a tenant's MySQL database (*tenantdb.Router).
type TenantDBs interface {
	DB(ctx context.Context, tenant domain.TenantID) (*sql.DB, error)
}

// Service issues, consumes and revokes tokens. It is safe for concurrent use.
type Service struct {
	cfg Config
	rdb redis.UniversalClient
	dbs TenantDBs
	now func() time.Time
}

// New returns a Service; rdb and dbs are required.
func New(cfg Config, rdb redis.UniversalClient, dbs TenantDBs) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil || dbs == nil {
		return nil, errors.New("actiontoken: Redis and the tenant databases are required")
	}
	cfg.setDefaults()
	return &Service{cfg: cfg, rdb: rdb, dbs: dbs, now: time.Now}, nil
}

// Issue is a request for a token.
type Issue struct {
	Tenant  domain.TenantID
	Action  Action
	Subject string        // what the action applies to: a group topic, a user id, an enterprise code
	By      domain.UserID // who issues it; 0 for the system
	TTL     time.Duration // 0: Config.DefaultTTL
}

// Issued is a token issued; Token is shown once and never stored.
type Issued struct {
	Token     string
	TokenID   string
	ExpiresAt time.Time
}

// Consumed is a token consumed.
type Consumed struct {
	TokenID    string
	Action     Action
	Subject    string
	IssuedBy   domain.UserID // who issued it; 0 for the system
	ConsumedAt time.Time
}

// hot is what Redis keeps of an active token.
type hot struct {
	ID      string `json:"id"`
	Action  Action `json:"action"`
	Subject string `json:"subject"`
	By      *int64 `json:"by,omitempty"` // the issuer; absent in entries cached before it was kept
	Exp     int64  `json:"exp"`          // unix ms
}

// Issue creates a token: MySQL first (the final word), then Redis. Bad input is a
// *domain.ValidationError; a store failing is a retryable error and the token is never shown.
func (s *Service) Issue(ctx context.Context, in Issue) (Issued, error) {
	if _, err := ParseAction(string(in.Action)); err != nil {
		return Issued{}, err
	}
	if in.Subject == "" || len(in.Subject) > MaxSubjectLen || strings.ContainsAny(in.Subject, "\x00\r\n") {
		return Issued{}, &domain.ValidationError{Field: "subject", Reason: "bad_format", Detail: "1..128 bytes, one line"}
	}
	ttl := in.TTL
	if ttl == 0 {
		ttl = s.cfg.DefaultTTL
	}
	if ttl < time.Second || ttl > s.cfg.MaxTTL {
		return Issued{}, &domain.ValidationError{Field: "ttl_seconds", Reason: "out_of_range", Detail: fmt.Sprintf("1..%d", int(s.cfg.MaxTTL.Seconds()))}
	}
	db, err := s.dbs.DB(ctx, in.Tenant)
	if err != nil {
		return Issued{}, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Issued{}, fmt.Errorf("actiontoken: random: %w", err)
	}
	token := "at_" + base64.RawURLEncoding.EncodeToString(raw)
	id, err := uuid.NewV7()
	if err != nil {
		return Issued{}, fmt.Errorf("actiontoken: id: %w", err)
	}
	now := s.now()
	exp := now.Add(ttl)
	hash := hashOf(token)
	if _, err := db.ExecContext(ctx, `INSERT INTO im_action_tokens
		(token_hash, token_id, action, subject, state, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		hash, id.String(), string(in.Action), in.Subject, StateActive, int64(in.By), now.UTC(), exp.UTC()); err != nil {
		return Issued{}, domain.Retryable("action token", err)
	}
	by := int64(in.By)
	v, _ := json.Marshal(hot{ID: id.String(), Action: in.Action, Subject: in.Subject, By: &by, Exp: exp.UnixMilli()})
	if err := s.rdb.Set(ctx, s.key(in.Tenant, hash), v, ttl).Err(); err != nil {
		_, _ = db.ExecContext(ctx, `UPDATE im_action_tokens SET state = ?, finished_at = ? WHERE token_hash = ?`, StateRevoked, now.UTC(), hash)
		return Issued{}, domain.Retryable("action token", err)
	}
	return Issued{Token: token, TokenID: id.String(), ExpiresAt: exp}, nil
}

// Consume uses token for action, once. Redis answers the hot check (a token it does not hold is
// looked up in MySQL, so a Redis restart loses none); the conditional update of the MySQL row from
// active to consumed decides, so of any number of concurrent consumers exactly one succeeds.
// Refusals (*domain.DeniedError): action_token_invalid, action_token_used, action_token_expired.
// Redis down: a retryable error, nothing consumed (fail closed).
func (s *Service) Consume(ctx context.Context, tenant domain.TenantID, token string, action Action, by domain.UserID) (Consumed, error) {
	return s.ConsumeIf(ctx, tenant, token, action, by, nil)
}

// ConsumeIf is Consume with a precondition: check (when not nil) is given the token, found
// active and unexpired, before it is consumed; an error from check is returned and the token
// stays active. What the token is for can so be refused without spending it.
func (s *Service) ConsumeIf(ctx context.Context, tenant domain.TenantID, token string, action Action, by domain.UserID,
	check func(Consumed) error) (Consumed, error) {
	if !strings.HasPrefix(token, "at_") || len(token) > 64 {
		return Consumed{}, domain.Deny(ReasonTokenInvalid)
	}
	db, err := s.dbs.DB(ctx, tenant)
	if err != nil {
		return Consumed{}, err
	}
	hash := hashOf(token)
	key := s.key(tenant, hash)
	raw, err := s.rdb.Get(ctx, key).Bytes()
	var h hot
	switch {
	case errors.Is(err, redis.Nil):
		if h, err = s.load(ctx, db, hash); err != nil {
			return Consumed{}, err
		}
	case err != nil:
		return Consumed{}, domain.Retryable("action token", err)
	default:
		if err := json.Unmarshal(raw, &h); err != nil {
			return Consumed{}, fmt.Errorf("actiontoken: cached token: %w", err)
		}
		if h.By == nil {
			if h, err = s.load(ctx, db, hash); err != nil {
				return Consumed{}, err
			}
		}
	}
	now := s.now()
	if h.Action != action {
		return Consumed{}, domain.Deny(ReasonTokenInvalid)
	}
	if now.UnixMilli() >= h.Exp {
		return Consumed{}, domain.Deny(ReasonTokenExpired)
	}
	c := Consumed{TokenID: h.ID, Action: h.Action, Subject: h.Subject, IssuedBy: domain.UserID(*h.By)}
	if check != nil {
		if err := check(c); err != nil {
			return Consumed{}, err
		}
	}
	res, err := db.ExecContext(ctx, `UPDATE im_action_tokens SET state = ?, consumed_by = ?, finished_at = ?
		WHERE token_hash = ? AND state = ? AND expires_at > ?`, StateConsumed, int64(by), now.UTC(), hash, StateActive, now.UTC())
	if err != nil {
		return Consumed{}, domain.Retryable("action token", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return Consumed{}, domain.Deny(ReasonTokenUsed)
	}
	// The row decided; the cache only stops serving the token. A failure here costs a MySQL read
	// on the next try, which the row refuses.
	_ = s.rdb.Del(ctx, key).Err()
	c.ConsumedAt = now
	return c, nil
}

// Unconsume gives back a token that user by consumed (tokenID is Consumed.TokenID) when what it was
// spent on did not happen: a join on an invite link refused when it was written, after the
// precondition had passed. The row goes from consumed by by back to active, so the token serves
// the next consumer until it expires (Redis no longer holds it: a consume reads it from MySQL).
// domain.ErrNotFound when no such consumed token exists; a store failure is retryable.
func (s *Service) Unconsume(ctx context.Context, tenant domain.TenantID, tokenID string, by domain.UserID) error {
	db, err := s.dbs.DB(ctx, tenant)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, `UPDATE im_action_tokens SET state = ?, consumed_by = NULL, finished_at = NULL
		WHERE token_id = ? AND state = ? AND consumed_by = ?`, StateActive, tokenID, StateConsumed, int64(by))
	if err != nil {
		return domain.Retryable("action token", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return domain.Retryable("action token", err)
	}
	if n != 1 {
		return domain.ErrNotFound
	}
	return nil
}

// load reads a token Redis does not hold from MySQL, refusing one that is not active.
func (s *Service) load(ctx context.Context, db *sql.DB, hash string) (hot, error) {
	var (
		h     hot
		state string
		exp   time.Time
		by    int64
	)
	err := db.QueryRowContext(ctx, `SELECT token_id, action, subject, state, created_by, expires_at FROM im_action_tokens WHERE token_hash = ?`, hash).
		Scan(&h.ID, &h.Action, &h.Subject, &state, &by, &exp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return hot{}, domain.Deny(ReasonTokenInvalid)
	case err != nil:
		return hot{}, domain.Retryable("action token", err)
	case state != StateActive:
		return hot{}, domain.Deny(ReasonTokenUsed)
	}
	h.Exp, h.By = exp.UnixMilli(), &by
	return h, nil
}

// Revoke ends an active token by its id. domain.ErrNotFound when there is no active token with
// that id.
func (s *Service) Revoke(ctx context.Context, tenant domain.TenantID, tokenID string) error {
	db, err := s.dbs.DB(ctx, tenant)
	if err != nil {
		return err
	}
	var hash string
	if err := db.QueryRowContext(ctx, `SELECT token_hash FROM im_action_tokens WHERE token_id = ? AND state = ?`, tokenID, StateActive).Scan(&hash); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return domain.ErrNotFound
		}
		return domain.Retryable("action token", err)
	}
	if err := s.rdb.Del(ctx, s.key(tenant, hash)).Err(); err != nil {
		return domain.Retryable("action token", err)
	}
	res, err := db.ExecContext(ctx, `UPDATE im_action_tokens SET state = ?, finished_at = ? WHERE token_hash = ? AND state = ?`,
		StateRevoked, s.now().UTC(), hash, StateActive)
	if err != nil {
		return domain.Retryable("action token", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return domain.ErrNotFound
	}
	return nil
}

func (s *Service) key(tenant domain.TenantID, hash string) string {
	return s.cfg.KeyPrefix + tenant.String() + ":atoken:" + hash
}

func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
