package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/domain"
)

// Register asks for a new account of a tenant.
type Register struct {
	Tenant   domain.TenantID
	Login    string // 3..32 of [a-z0-9_.-]; upper-case ASCII is folded to lower case
	Password string // at least Config.MinPasswordLen bytes, at most passhash.MaxPasswordLen
	// Nickname, Avatar and Signature are the first public profile; an empty nickname becomes
	// the login name.
	Nickname, Avatar, Signature string
	TraceID                     string
}

// Registered is a committed registration.
type Registered struct {
	User         domain.UserID
	Login        domain.Login
	RegisteredAt time.Time
}

const constraintUserID = "credentials_tenant_id_user_id_key"

// errIDTaken means a drawn user id already belongs to an account.
var errIDTaken = errors.New("user id taken")

// Register creates an account: it claims the login name in the credentials table, then appends
// user.registered.v1 and user.profile_updated.v1 to the new user's stream (expected version 0),
// then marks the credential confirmed.
//
// The event store offers no transaction to share, so the two writes are ordered to fail safe:
// when the append fails, the claim is deleted again; when the process dies between the two, an
// unconfirmed claim remains, which Login refuses and which a registration of the same name
// reclaims after Config.PendingTimeout. Should a registration stall for longer than that between
// its two writes, a second registration may reclaim the name and both accounts' events exist;
// the stalled one then reports success for an account that cannot log in (its claim is gone).
// A failed confirmation is repaired by the next Login or Register of the name, which find the
// event.
//
// Errors: *domain.ValidationError for a bad tenant, login, password or profile;
// *domain.DeniedError login_taken; domain.ErrInProgress while another registration of the name
// is between its two writes; domain.ErrRetryable when PostgreSQL failed or when no hashing slot
// came free within Config.HashWait (ErrHashingBusy); ctx's error when it ended while waiting for
// one.
func (s *Service) Register(ctx context.Context, cmd Register) (Registered, error) {
	login, profile, hash, err := s.prepare(ctx, cmd)
	if err != nil {
		return Registered{}, err
	}
	for draw := 1; ; draw++ {
		uid, err := s.ids.NewUserID(ctx)
		if err != nil {
			return Registered{}, domain.Retryable("draw user id", err)
		}
		if uid <= 0 {
			return Registered{}, fmt.Errorf("register: id generator drew %d", uid)
		}
		res, err := s.registerAs(ctx, cmd, login, profile, hash, uid)
		if errors.Is(err, errIDTaken) && draw < s.cfg.MaxIDDraws {
			continue
		}
		if errors.Is(err, errIDTaken) {
			return Registered{}, domain.Retryable("register", err)
		}
		return res, err
	}
}

// CheckRegister reports the *domain.ValidationError Register would answer cmd with before it
// writes anything (a bad tenant, login, password or profile), without hashing or I/O; nil when
// cmd is well formed. A caller that spends something on a registration (a verification code)
// checks first, so bad input spends nothing.
func (s *Service) CheckRegister(cmd Register) error {
	_, _, err := s.validate(cmd)
	return err
}

// validate checks cmd and returns its login and first profile.
func (s *Service) validate(cmd Register) (domain.Login, domain.UserProfile, error) {
	if cmd.Tenant.IsZero() {
		return domain.Login{}, domain.UserProfile{}, &domain.ValidationError{Field: "tenant_id", Reason: "required"}
	}
	login, err := domain.NewLogin(cmd.Login)
	if err != nil {
		return domain.Login{}, domain.UserProfile{}, err
	}
	nickname := cmd.Nickname
	if strings.TrimSpace(nickname) == "" {
		nickname = login.String()
	}
	profile, err := domain.NewUserProfile(nickname, cmd.Avatar, cmd.Signature)
	if err != nil {
		return domain.Login{}, domain.UserProfile{}, err
	}
	if err := s.checkPassword(cmd.Password); err != nil {
		return domain.Login{}, domain.UserProfile{}, err
	}
	return login, profile, nil
}

// prepare validates cmd and hashes the password.
func (s *Service) prepare(ctx context.Context, cmd Register) (domain.Login, domain.UserProfile, string, error) {
	login, profile, err := s.validate(cmd)
	if err != nil {
		return domain.Login{}, domain.UserProfile{}, "", err
	}
	hash, err := s.hashPassword(ctx, cmd.Password)
	if err != nil {
		return domain.Login{}, domain.UserProfile{}, "", err
	}
	return login, profile, hash, nil
}

// checkPassword checks a new password: what passhash.Check accepts, at least
// Config.MinPasswordLen bytes, and text (bad_text otherwise): valid UTF-8 without U+0000 or
// U+FFFD. U+FFFD is what a lossy decoder makes of bytes it cannot read, so a password holding it
// may stand for many different inputs; the REST API refuses such bytes before decoding, and this
// keeps any other path (an admin command, a client that decoded lossily) from setting one.
func (s *Service) checkPassword(password string) error {
	if err := passhash.Check(password); err != nil {
		return err
	}
	if !utf8.ValidString(password) || strings.ContainsAny(password, "\x00\uFFFD") {
		return &domain.ValidationError{Field: "password", Reason: domain.ReasonBadText,
			Detail: "valid UTF-8 without U+0000 or U+FFFD"}
	}
	if len(password) < s.cfg.MinPasswordLen {
		return &domain.ValidationError{Field: "password", Reason: "too_short",
			Detail: fmt.Sprintf("at least %d bytes", s.cfg.MinPasswordLen)}
	}
	return nil
}

// registerAs registers with user id uid; errIDTaken when uid already has an account.
func (s *Service) registerAs(ctx context.Context, cmd Register, login domain.Login, profile domain.UserProfile, hash string, uid domain.UserID) (Registered, error) {
	if err := s.claim(ctx, cmd.Tenant, login, uid, hash); err != nil {
		return Registered{}, err
	}
	now := s.now().UTC()
	events, err := domain.Register(cmd.Tenant, uid, login, profile, now)
	if err == nil {
		err = s.appendRegistration(ctx, cmd, uid, events)
	}
	if err != nil {
		s.release(ctx, cmd.Tenant, login, uid)
		if errors.Is(err, domain.ErrConcurrency) {
			return Registered{}, fmt.Errorf("register: stream of user %d is not empty: %w", uid, errIDTaken)
		}
		return Registered{}, err
	}
	s.confirm(ctx, cmd.Tenant, login, uid)
	return Registered{User: uid, Login: login, RegisteredAt: now}, nil
}

func (s *Service) appendRegistration(ctx context.Context, cmd Register, uid domain.UserID, events []domain.PendingEvent) error {
	events, err := domain.SealPersonal(ctx, s.sealer, cmd.Tenant, events)
	if err != nil {
		return err
	}
	envs, err := domain.NewEnvelopes(cmd.Tenant, domain.Actor{Type: domain.ActorUser, ID: uid.String()}, events)
	if err != nil {
		return err
	}
	stream := domain.ProfileStreamID(uid)
	for i := range envs {
		envs[i].TraceID, envs[i].BizID = cmd.TraceID, stream
	}
	if _, err := s.store.Append(ctx, cmd.Tenant, stream, 0, envs); err != nil {
		if errors.Is(err, domain.ErrConcurrency) || errors.Is(err, domain.ErrRetryable) {
			return err
		}
		return domain.Retryable("append registration", err)
	}
	return nil
}

// claim inserts the unconfirmed credential. A name already claimed is login_taken when its
// account exists, reclaimed when its claim was abandoned, and ErrInProgress otherwise.
func (s *Service) claim(ctx context.Context, tenant domain.TenantID, login domain.Login, uid domain.UserID, hash string) error {
	for attempt := 0; attempt < 2; attempt++ {
		tag, err := s.pool.Exec(ctx, `INSERT INTO credentials (tenant_id, login, user_id, password_hash, created_at)
			VALUES ($1, $2, $3, $4, now()) ON CONFLICT (tenant_id, login) DO NOTHING`,
			tenant.String(), login.String(), int64(uid), hash)
		switch {
		case uniqueViolation(err, constraintUserID):
			return errIDTaken
		case err != nil:
			return dbErr("claim login", err)
		case tag.RowsAffected() == 1:
			return nil
		}
		reclaim, err := s.existingClaim(ctx, tenant, login)
		if err != nil || !reclaim {
			return err
		}
	}
	return fmt.Errorf("register %s: %w", login, domain.ErrInProgress)
}

// existingClaim decides about a login name that is already claimed: an error when it is taken
// or being registered, true when an abandoned claim was deleted and the name is free again.
func (s *Service) existingClaim(ctx context.Context, tenant domain.TenantID, login domain.Login) (bool, error) {
	var (
		uid       int64
		confirmed bool
		stale     bool
	)
	err := s.pool.QueryRow(ctx, `SELECT user_id, confirmed, created_at < now() - make_interval(secs => $3)
		FROM credentials WHERE tenant_id = $1 AND login = $2`,
		tenant.String(), login.String(), s.cfg.PendingTimeout.Seconds()).Scan(&uid, &confirmed, &stale)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil // released meanwhile: try again
	}
	if err != nil {
		return false, dbErr("read claim", err)
	}
	if confirmed {
		return false, domain.Deny(ReasonLoginTaken)
	}
	registered, err := s.registered(ctx, tenant, domain.UserID(uid))
	if err != nil {
		return false, err
	}
	if registered {
		s.confirm(ctx, tenant, login, domain.UserID(uid))
		return false, domain.Deny(ReasonLoginTaken)
	}
	if !stale {
		return false, fmt.Errorf("register %s: %w", login, domain.ErrInProgress)
	}
	_, err = s.pool.Exec(ctx, `DELETE FROM credentials WHERE tenant_id = $1 AND login = $2 AND user_id = $3 AND NOT confirmed`,
		tenant.String(), login.String(), uid)
	return err == nil, dbErr("reclaim login", err)
}

// registered reports whether uid's user stream holds its registration.
func (s *Service) registered(ctx context.Context, tenant domain.TenantID, uid domain.UserID) (bool, error) {
	v, err := s.store.LastVersion(ctx, tenant, domain.ProfileStreamID(uid))
	if err != nil {
		if errors.Is(err, domain.ErrRetryable) {
			return false, err
		}
		return false, domain.Retryable("read user stream", err)
	}
	return v > 0, nil
}

// release deletes an unconfirmed claim after a failed append. A failure is logged: the claim
// is reclaimed after Config.PendingTimeout.
func (s *Service) release(ctx context.Context, tenant domain.TenantID, login domain.Login, uid domain.UserID) {
	ctx, cancel := detached(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `DELETE FROM credentials WHERE tenant_id = $1 AND login = $2 AND user_id = $3 AND NOT confirmed`,
		tenant.String(), login.String(), int64(uid))
	if err != nil {
		s.log.WarnContext(ctx, "could not release a login claim; it frees itself after the pending timeout",
			"tenant_id", tenant.String(), "user_id", uid.String(), "err", err)
	}
}

// confirm marks a claim whose registration is committed. A failure is logged: Login and
// Register confirm it later from the event store.
func (s *Service) confirm(ctx context.Context, tenant domain.TenantID, login domain.Login, uid domain.UserID) {
	ctx, cancel := detached(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `UPDATE credentials SET confirmed = true WHERE tenant_id = $1 AND login = $2 AND user_id = $3`,
		tenant.String(), login.String(), int64(uid))
	if err != nil {
		s.log.WarnContext(ctx, "could not confirm a registered login; the next login confirms it",
			"tenant_id", tenant.String(), "user_id", uid.String(), "err", err)
	}
}
