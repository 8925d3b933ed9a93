package account_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
)

// recordingNotifier keeps the changes the governance announced.
type recordingNotifier struct{ changes []account.Change }

func (r *recordingNotifier) AccountChanged(_ context.Context, _ account.Status, c account.Change) {
	r.changes = append(r.changes, c)
}

func TestGovernanceBanRevokeAndGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, account.Deps{}, account.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("gov")
	guard, err := account.NewGuard(e.pool, account.GuardConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	notes := &recordingNotifier{}
	gov, err := account.NewGovernance(account.GovernanceDeps{Pool: e.pool, Store: e.store, Accounts: e.svc, Guard: guard, Notifier: notes})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := e.svc.Register(ctx, account.Register{Tenant: tenant, Login: "mallory", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	uid := reg.User
	issued := time.Now()
	if err := guard.Check(tenant, uid, issued); err != nil {
		t.Fatalf("an ungoverned user: %v", err)
	}
	meta := account.Meta{Actor: domain.Actor{Type: domain.ActorAdmin, ID: "ops"}, CausationID: "cmd-1"}
	res, err := gov.Ban(ctx, tenant, uid, "spam", meta)
	if err != nil || !res.Status.Banned || res.Unchanged {
		t.Fatalf("ban: %+v %v", res, err)
	}
	if err := guard.Check(tenant, uid, time.Now()); reason(err) != domain.ReasonUserBanned {
		t.Fatalf("banned user: want user_banned, got %v", err)
	}
	if res, err := gov.Ban(ctx, tenant, uid, "spam", meta); err != nil || !res.Unchanged {
		t.Fatalf("second ban: %+v %v", res, err)
	}
	if _, err := gov.Unban(ctx, tenant, uid, "", meta); err != nil {
		t.Fatal(err)
	}
	if err := guard.Check(tenant, uid, issued); !errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("a token issued before the ban after the unban: want revoked, got %v", err)
	}
	if err := guard.Check(tenant, uid, time.Now()); err != nil {
		t.Fatalf("a token issued after the ban: %v", err)
	}
	// A fresh guard (another node) loads the same state from account_status.
	other, _ := account.NewGuard(e.pool, account.GuardConfig{}, nil)
	if err := other.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := other.Status(tenant, uid); got.Banned || got.Version != 2 || got.NotBefore.IsZero() {
		t.Fatalf("loaded status: %+v", got)
	}
	// The events carry the administrator and the causing command.
	evs, err := e.store.ReadStream(ctx, tenant, domain.AccountStreamID(uid), 0, 0)
	if err != nil || len(evs) != 2 || evs[0].EventType != domain.EventUserBanned || evs[0].Actor.ID != "ops" || evs[0].CausationID != "cmd-1" {
		t.Fatalf("account stream: %+v %v", evs, err)
	}
	if len(notes.changes) != 2 || notes.changes[0] != account.ChangeBanned || notes.changes[1] != account.ChangeUnbanned {
		t.Fatalf("notified: %v", notes.changes)
	}

	// A password reset changes the password and revokes older tokens.
	before := time.Now()
	time.Sleep(2 * time.Millisecond)
	if _, err := gov.ResetPassword(ctx, tenant, uid, "a brand new secret", meta); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Login(ctx, tenant, "mallory", "correct horse"); !errors.Is(err, account.ErrInvalidCredentials) {
		t.Fatalf("old password after reset: %v", err)
	}
	if got, err := e.svc.Login(ctx, tenant, "mallory", "a brand new secret"); err != nil || got != uid {
		t.Fatalf("new password: %v %v", got, err)
	}
	if err := guard.Check(tenant, uid, before); !errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("token from before the reset: %v", err)
	}
	if _, err := gov.ResetPassword(ctx, tenant, 999999, "a brand new secret", meta); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("reset of a user without an account: %v", err)
	}
	if _, err := gov.ResetPassword(ctx, tenant, uid, "short", meta); reason(err) != "invalid:password:too_short" {
		t.Fatalf("short password: %v", err)
	}
}

func TestAPIKeyListAndRevokeByID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, account.Deps{}, account.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("keys")
	k1, err := e.svc.CreateAPIKey(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateAPIKey(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	list, err := e.svc.ListAPIKeys(ctx, tenant)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	id := account.APIKeyID(k1)
	if list[0].ID != id && list[1].ID != id {
		t.Fatalf("key id %s not listed: %+v", id, list)
	}
	if _, err := e.svc.VerifyAPIKey(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeAPIKeyID(ctx, domain.MustTenantID("other"), id); !errors.Is(err, account.ErrInvalidAPIKey) {
		t.Fatalf("revoke through another tenant: %v", err)
	}
	if err := e.svc.RevokeAPIKeyID(ctx, tenant, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.VerifyAPIKey(ctx, k1); !errors.Is(err, account.ErrInvalidAPIKey) {
		t.Fatalf("revoked key verified: %v", err)
	}
	if err := e.svc.RevokeAPIKeyID(ctx, tenant, id); !errors.Is(err, account.ErrInvalidAPIKey) {
		t.Fatalf("second revoke: %v", err)
	}
	list, _ = e.svc.ListAPIKeys(ctx, tenant)
	revoked := 0
	for _, k := range list {
		if !k.RevokedAt.IsZero() {
			revoked++
		}
	}
	if revoked != 1 {
		t.Fatalf("want one revoked key: %+v", list)
	}
}

// TestGovernanceDecidesOnTheStreamWhenTheStatusRowIsBehind: governance decides on the
// account_status row, but the stream is the truth. With the row gone or behind (events restored
// without it), a ban of a banned user is still unchanged and an unban still lands once, at the
// stream's next version; a ban of an unbanned user whose row still says banned lands.
func TestGovernanceDecidesOnTheStreamWhenTheStatusRowIsBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, account.Deps{}, account.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("govrow")
	gov, err := account.NewGovernance(account.GovernanceDeps{Pool: e.pool, Store: e.store, Accounts: e.svc})
	if err != nil {
		t.Fatal(err)
	}
	meta := account.Meta{Actor: domain.Actor{Type: domain.ActorAdmin, ID: "ops"}}
	e.accountsOf(t, tenant, 41, 42, 43)
	for _, uid := range []domain.UserID{41, 42} {
		if _, err := gov.Ban(ctx, tenant, uid, "spam", meta); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(ctx, `DELETE FROM account_status WHERE tenant_id = $1 AND user_id = 41`, tenant.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE account_status SET banned = false, version = 0 WHERE tenant_id = $1 AND user_id = 42`, tenant.String()); err != nil {
		t.Fatal(err)
	}
	// User 43 was banned and unbanned; its row, behind, still says banned.
	if _, err := gov.Ban(ctx, tenant, 43, "spam", meta); err != nil {
		t.Fatal(err)
	}
	if _, err := gov.Unban(ctx, tenant, 43, "", meta); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE account_status SET banned = true, version = 1 WHERE tenant_id = $1 AND user_id = 43`, tenant.String()); err != nil {
		t.Fatal(err)
	}
	if res, err := gov.Ban(ctx, tenant, 43, "again", meta); err != nil || res.Unchanged || !res.Status.Banned || res.Status.Version != 3 {
		t.Fatalf("user 43: ban of an unbanned user whose row says banned: %+v %v", res, err)
	}
	for _, uid := range []domain.UserID{41, 42} {
		if res, err := gov.Ban(ctx, tenant, uid, "spam", meta); err != nil || !res.Unchanged || !res.Status.Banned {
			t.Fatalf("user %d: ban of a banned user with its row behind: %+v %v", uid, res, err)
		}
		res, err := gov.Unban(ctx, tenant, uid, "", meta)
		if err != nil || res.Unchanged || res.Status.Banned || res.Status.Version != 2 {
			t.Fatalf("user %d: unban with its row behind: %+v %v", uid, res, err)
		}
		evs, err := e.store.ReadStream(ctx, tenant, domain.AccountStreamID(uid), 0, 0)
		if err != nil || len(evs) != 2 || evs[1].EventType != domain.EventUserUnbanned {
			t.Fatalf("user %d: account stream after the unban: %+v %v", uid, evs, err)
		}
	}
}

// TestGovernanceOnAStaleGuardDecidesOnTheStream: a node decides on its Guard's copy of the
// account, which misses the changes of other nodes until their notification arrives. Node B,
// whose Guard never heard of node A's ban, unbans (its copy says not banned: nothing to do, so
// it folds the stream and unbans) and kicks at the stream's next version (its copy's version is
// behind: the append is refused and decided again).
func TestGovernanceOnAStaleGuardDecidesOnTheStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, account.Deps{}, account.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("govstale")
	node := func() (*account.Governance, *account.Guard) {
		guard, err := account.NewGuard(e.pool, account.GuardConfig{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		gov, err := account.NewGovernance(account.GovernanceDeps{Pool: e.pool, Store: e.store, Accounts: e.svc, Guard: guard})
		if err != nil {
			t.Fatal(err)
		}
		return gov, guard
	}
	a, _ := node()
	b, guardB := node()
	meta := account.Meta{Actor: domain.Actor{Type: domain.ActorAdmin, ID: "ops"}}
	const uid = domain.UserID(7)
	e.accountsOf(t, tenant, uid)
	if _, err := a.Ban(ctx, tenant, uid, "spam", meta); err != nil {
		t.Fatal(err)
	}
	if guardB.Status(tenant, uid).Banned {
		t.Fatal("node B's guard heard of the ban: the test needs it stale")
	}
	res, err := b.Unban(ctx, tenant, uid, "", meta)
	if err != nil || res.Unchanged || res.Status.Banned || res.Status.Version != 2 {
		t.Fatalf("unban on a guard that missed the ban: %+v %v", res, err)
	}
	if _, err := a.Kick(ctx, tenant, uid, "", meta); err != nil { // version 3; node B's copy says 2
		t.Fatal(err)
	}
	if res, err := b.Kick(ctx, tenant, uid, "", meta); err != nil || res.Status.Version != 4 {
		t.Fatalf("kick on a guard a version behind: %+v %v", res, err)
	}
	evs, err := e.store.ReadStream(ctx, tenant, domain.AccountStreamID(uid), 0, 0)
	if err != nil || len(evs) != 4 || evs[1].EventType != domain.EventUserUnbanned {
		t.Fatalf("account stream: %d events, %v", len(evs), err)
	}
}
