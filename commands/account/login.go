package account

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/domain"
)

// Login checks a tenant's login name and password and returns the account's user id.
//
// Every refusal is ErrInvalidCredentials: a malformed or unknown login, a wrong or empty
// password, an account whose registration never completed. An unknown login is verified against
// a dummy hash of the same cost, so it takes as long as a wrong password and the answer does not
// tell which logins exist. A hash made with other parameters than Config.Password is replaced
// after a successful login (best effort). Other errors: domain.ErrRetryable when PostgreSQL
// failed or when no hashing slot came free within Config.HashWait (ErrHashingBusy), ctx's error
// when it ended while waiting for one.
func (s *Service) Login(ctx context.Context, tenant domain.TenantID, login, password string) (domain.UserID, error) {
	name, err := domain.NewLogin(login)
	if err != nil || tenant.IsZero() {
		return 0, s.refuseLogin(ctx, password)
	}
	var (
		uid       int64
		hash      string
		confirmed bool
	)
	err = s.pool.QueryRow(ctx, `SELECT user_id, password_hash, confirmed FROM credentials WHERE tenant_id = $1 AND login = $2`,
		tenant.String(), name.String()).Scan(&uid, &hash, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, s.refuseLogin(ctx, password)
	}
	if err != nil {
		return 0, dbErr("read credential", err)
	}
	switch err := s.verifyPassword(ctx, password, hash); {
	case errors.Is(err, passhash.ErrMismatch):
		return 0, ErrInvalidCredentials
	case errors.Is(err, passhash.ErrMalformed):
		return 0, fmt.Errorf("login: stored hash of user %d: %w", uid, err)
	case err != nil:
		return 0, fmt.Errorf("login: %w", err)
	}
	user := domain.UserID(uid)
	if !confirmed {
		ok, err := s.registered(ctx, tenant, user)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, ErrInvalidCredentials
		}
		s.confirm(ctx, tenant, name, user)
	}
	if passhash.NeedsRehash(hash, s.cfg.Password) {
		s.rehash(ctx, tenant, name, password, hash)
	}
	return user, nil
}

// refuseLogin answers a login that names no account after verifying password against the dummy
// hash, the work a wrong password costs: ErrInvalidCredentials, or the error of waiting for a
// hashing slot, which a wrong password would meet as well.
func (s *Service) refuseLogin(ctx context.Context, password string) error {
	if err := s.verifyPassword(ctx, password, s.dummyHash); err != nil && !errors.Is(err, passhash.ErrMismatch) {
		return fmt.Errorf("login: %w", err)
	}
	return ErrInvalidCredentials
}

// rehash replaces old with a hash of password under the current parameters, unless the stored
// hash changed meanwhile. Failures are logged; the old hash keeps working.
func (s *Service) rehash(ctx context.Context, tenant domain.TenantID, login domain.Login, password, old string) {
	h, err := s.hashPassword(ctx, password)
	if err == nil {
		_, err = s.pool.Exec(ctx, `UPDATE credentials SET password_hash = $3 WHERE tenant_id = $1 AND login = $2 AND password_hash = $4`,
			tenant.String(), login.String(), h, old)
	}
	if err != nil {
		s.log.WarnContext(ctx, "could not rehash a password", "tenant_id", tenant.String(), "err", err)
	}
}
