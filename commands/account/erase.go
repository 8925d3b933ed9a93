package account

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// ChangeErased is an account erased for good (user.erased.v1): every session ends.
const ChangeErased Change = "erased"

// KeyDestroyer destroys every data key of a user (commands/shred.Keyring), so everything the
// user sealed reads as erased.
type KeyDestroyer interface {
	DestroyUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int, error)
}

// Erase erases user's account for good (DESIGN §7a), in an order that a repeat after any
// failure finishes: it destroys the user's data keys first (what the user wrote and said about
// themselves becomes unreadable in every event, export and rebuild), then records
// user.erased.v1 on the account stream (every token is refused and the Notifier ends every
// session on every node; the read models clear what they hold), then frees the login name and
// drops the bound contacts and the stored answers of the user's idempotent requests. Errors: domain.ErrNotFound when the user has no account in tenant
// (nothing happens); domain.ErrRetryable; an error when Governance has no KeyDestroyer.
func (g *Governance) Erase(ctx context.Context, tenant domain.TenantID, user domain.UserID, meta Meta) (GovernanceResult, error) {
	if g.deps.Keys == nil {
		return GovernanceResult{}, errors.New("account: erase: no key destroyer configured")
	}
	if err := g.deps.Accounts.requireAccount(ctx, tenant, user); err != nil {
		return GovernanceResult{}, err
	}
	if _, err := g.deps.Keys.DestroyUser(ctx, tenant, user); err != nil {
		return GovernanceResult{}, fmt.Errorf("erase %s/%s: %w", tenant, user, err)
	}
	res, err := g.execute(ctx, tenant, user, meta, ChangeErased, func(s domain.AccountState, now time.Time) ([]domain.PendingEvent, error) {
		return s.Erase(now), nil
	})
	if err != nil {
		return GovernanceResult{}, err
	}
	if err := g.forget(ctx, tenant, user); err != nil {
		return GovernanceResult{}, err
	}
	return res, nil
}

// EraseAccount is Erase asked by the user themselves (REST "delete my account").
func (g *Governance) EraseAccount(ctx context.Context, tenant domain.TenantID, user domain.UserID) error {
	_, err := g.Erase(ctx, tenant, user, Meta{Actor: domain.Actor{Type: domain.ActorUser, ID: user.String()}})
	return err
}

// forget deletes the user's credentials (the login name is free for a new account), bound
// contacts and stored answers of idempotent requests (which may repeat what the user wrote, such
// as a file's name), in one transaction.
func (g *Governance) forget(ctx context.Context, tenant domain.TenantID, user domain.UserID) error {
	tx, err := g.deps.Pool.Begin(ctx)
	if err != nil {
		return dbErr("erase credentials", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, table := range []string{"credentials", "account_contacts", "http_idempotency"} {
		if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE tenant_id = $1 AND user_id = $2", tenant.String(), user.Int64()); err != nil {
			return dbErr("erase "+table, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return dbErr("erase credentials", err)
	}
	return nil
}
