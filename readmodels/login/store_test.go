package login_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/login"
)

func testCtx(t *testing.T) context.Context { return testenv.Context(t) }

var at = time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)

func env(t *testing.T, tenant domain.TenantID, stream string, version int64, typ domain.EventType, payload any) domain.Envelope {
	t.Helper()
	e, err := domain.NewEnvelope(tenant, stream, version, typ, domain.Actor{Type: domain.ActorUser, ID: "7"}, payload)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func started(t *testing.T, tenant domain.TenantID, user domain.UserID, id string, start time.Time) domain.Envelope {
	return env(t, tenant, domain.LoginSessionStreamID(user, id), 1, domain.EventUserSessionStarted, &domain.UserSessionStarted{
		User: user, SessionID: id, Device: "phone " + id, UserAgent: "test/1", IPHint: "192.0.2.0/24", StartedAt: start,
		ExpiresAt: start.Add(24 * time.Hour)})
}

func ended(t *testing.T, tenant domain.TenantID, user domain.UserID, id string, start time.Time) domain.Envelope {
	return env(t, tenant, domain.LoginSessionStreamID(user, id), 2, domain.EventUserSessionEnded, &domain.UserSessionEnded{
		User: user, SessionID: id, Reason: domain.SessionEndLogout, EndedAt: start.Add(time.Minute), ExpiresAt: start.Add(24 * time.Hour)})
}

func listed(t *testing.T, s *login.Store, tenant domain.TenantID, user domain.UserID) []string {
	t.Helper()
	got, err := s.ActiveSessions(testCtx(t), tenant, user, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range got {
		ids = append(ids, x.SessionID)
	}
	return ids
}

// TestActiveSessionsFollowStartsEndsAndCutoffs: a session is listed once started and until it
// ended, expired or a revocation cut it off; a password change keeps its session; events applied
// again, or an end before its start, leave the same rows.
func TestActiveSessionsFollowStartsEndsAndCutoffs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	r := rmtest.Router(t)
	tenant := rmtest.Tenant(t, r)
	s := login.New(r)
	const u domain.UserID = 7
	account := domain.AccountStreamID(u)
	batch := []domain.Envelope{
		started(t, tenant, u, "a", at), started(t, tenant, u, "b", at.Add(time.Second)), started(t, tenant, u, "c", at.Add(2*time.Second)),
		started(t, tenant, 8, "other", at),
		env(t, tenant, domain.LoginSessionStreamID(u, "old"), 1, domain.EventUserSessionStarted, &domain.UserSessionStarted{
			User: u, SessionID: "old", StartedAt: at.Add(-48 * time.Hour), ExpiresAt: at.Add(-24 * time.Hour)}),
		ended(t, tenant, u, "a", at),
	}
	if _, err := s.ApplyBatch(ctx, tenant, login.DefaultTables(), batch); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s, tenant, u); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("listed %v, want c, b (a ended, old expired)", got)
	}
	first, err := s.Checksum(ctx, tenant, login.DefaultTables())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.ApplyBatch(ctx, tenant, login.DefaultTables(), batch); err != nil || n != 0 {
		t.Fatalf("the batch again changed %d rows (%v)", n, err)
	}
	if again, _ := s.Checksum(ctx, tenant, login.DefaultTables()); !maps(again, first) {
		t.Fatalf("applying again changed the tables: %v, then %v", first, again)
	}

	// The password is changed from c: b ends, c stays; then tokens are revoked after both.
	changed := env(t, tenant, account, 2, domain.EventUserPasswordChanged, &domain.UserPasswordChanged{User: u, KeptSession: "c",
		ChangedAt: at.Add(3 * time.Second)})
	kick := env(t, tenant, account, 1, domain.EventUserKicked, &domain.UserKicked{User: u, KickedAt: at})
	if _, err := s.ApplyBatch(ctx, tenant, login.DefaultTables(), []domain.Envelope{kick, changed}); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s, tenant, u); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after the change from c: %v", got)
	}
	older := env(t, tenant, account, 1, domain.EventUserTokensRevoked, &domain.UserTokensRevoked{User: u, NotBefore: at.Add(time.Hour)})
	if n, err := s.ApplyBatch(ctx, tenant, login.DefaultTables(), []domain.Envelope{older}); err != nil || n != 0 {
		t.Fatalf("an account event older than the folded one changed %d rows (%v)", n, err)
	}
	if got := listed(t, s, tenant, u); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after an older event: %v", got)
	}
	late := started(t, tenant, u, "d", at.Add(4*time.Second))
	revoked := env(t, tenant, account, 3, domain.EventUserTokensRevoked, &domain.UserTokensRevoked{User: u, NotBefore: at.Add(5 * time.Second)})
	// The revocation arrives before the start of a session it cuts off: d is never listed.
	if _, err := s.ApplyBatch(ctx, tenant, login.DefaultTables(), []domain.Envelope{revoked, late}); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s, tenant, u); len(got) != 0 {
		t.Fatalf("after the revocation: %v", got)
	}
	if got := listed(t, s, tenant, 8); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("another user's sessions: %v", got)
	}

	// The same events in another order, into fresh tables, give the same rows.
	fresh := login.DefaultTables().WithSuffix("_order")
	if err := login.CreateTablesLike(ctx, mustDB(t, r, tenant), login.DefaultTables(), fresh); err != nil {
		t.Fatal(err)
	}
	reordered := append([]domain.Envelope{late, ended(t, tenant, u, "a", at), revoked, changed, kick}, batch...)
	if _, err := s.ApplyBatch(ctx, tenant, fresh, reordered); err != nil {
		t.Fatal(err)
	}
	live, _ := s.Checksum(ctx, tenant, login.DefaultTables())
	other, err := s.Checksum(ctx, tenant, fresh)
	if err != nil || !maps(live, other) {
		t.Fatalf("the tables differ by the order events came in: %v against %v (%v)", live, other, err)
	}
}

func TestApplyBatchRefusesEventsThatCanNeverApply(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	r := rmtest.Router(t)
	tenant := rmtest.Tenant(t, r)
	s := login.New(r)
	wrongStream := env(t, tenant, domain.LoginSessionStreamID(7, "x"), 1, domain.EventUserSessionStarted, &domain.UserSessionStarted{
		User: 7, SessionID: "y", StartedAt: at, ExpiresAt: at.Add(time.Hour)})
	badID := env(t, tenant, "user:7/login/a b", 1, domain.EventUserSessionStarted, &domain.UserSessionStarted{
		User: 7, SessionID: "a b", StartedAt: at, ExpiresAt: at.Add(time.Hour)})
	otherTenant := started(t, domain.MustTenantID("elsewhere"), 7, "z", at)
	for name, e := range map[string]domain.Envelope{"wrong stream": wrongStream, "bad id": badID, "another tenant": otherTenant} {
		var ee *login.EventError
		if _, err := s.ApplyBatch(ctx, tenant, login.DefaultTables(), []domain.Envelope{started(t, tenant, 7, "ok", at), e}); !errors.As(err, &ee) ||
			!errors.Is(err, domain.ErrInvalid) || ee.Index != 1 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := listed(t, s, tenant, 7); len(got) != 0 {
		t.Fatalf("a refused batch wrote %v", got)
	}
}

func maps[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func mustDB(t *testing.T, r interface {
	DB(context.Context, domain.TenantID) (*sql.DB, error)
}, tenant domain.TenantID) *sql.DB {
	t.Helper()
	db, err := r.DB(testCtx(t), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
