package sessions_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/sessions"
)

const group = "test.sessions"

func opened(t *testing.T, tenant domain.TenantID, u domain.UserID, sid, ua string, at time.Time) domain.Envelope {
	t.Helper()
	env, err := domain.NewEnvelope(tenant, domain.SessionStreamID(u, sid), 1, domain.EventSessionOpened,
		domain.Actor{Type: domain.ActorUser, ID: u.String()},
		domain.SessionOpened{User: u, SessionID: sid, Node: "node-a", UserAgent: ua, OpenedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func closed(t *testing.T, tenant domain.TenantID, u domain.UserID, sid, reason string, at time.Time) domain.Envelope {
	t.Helper()
	env, err := domain.NewEnvelope(tenant, domain.SessionStreamID(u, sid), 2, domain.EventSessionClosed,
		domain.Actor{Type: domain.ActorUser, ID: u.String()},
		domain.SessionClosed{User: u, SessionID: sid, Node: "node-a", Reason: reason, ClosedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestSessionsAreFoldedInAnyOrderAndOnce(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	r := rmtest.Router(t)
	store, err := sessions.NewStore(r)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	long := strings.Repeat("é", 300)
	a, b := rmtest.Tenant(t, r), rmtest.Tenant(t, r)
	build := func(tenant domain.TenantID) []domain.Envelope {
		return []domain.Envelope{
			opened(t, tenant, 1, "s1", "web/1.0", t0),
			closed(t, tenant, 1, "s1", "client_closed", t0.Add(10*time.Minute)),
			opened(t, tenant, 2, "s2", long, t0.Add(5*time.Minute)),
			opened(t, tenant, 3, "s3", "app", t0.Add(20*time.Minute)),
			closed(t, tenant, 3, "s3", "idle_timeout", t0.Add(30*time.Minute)),
		}
	}
	inOrder := build(a)
	// Tenant b gets the same sessions with each close before its opening, and every event twice.
	reordered := build(b)
	reordered[0], reordered[1] = reordered[1], reordered[0]
	reordered[3], reordered[4] = reordered[4], reordered[3]
	n, err := store.ApplyBatch(ctx, a, group, sessions.DefaultTables(), inOrder)
	if err != nil || n != 5 {
		t.Fatalf("apply: %d, %v", n, err)
	}
	for _, batch := range [][]domain.Envelope{reordered[:2], reordered[2:], reordered} {
		if _, err := store.ApplyBatch(ctx, b, group, sessions.DefaultTables(), batch); err != nil {
			t.Fatal(err)
		}
	}
	sa, err := store.Checksum(ctx, a, sessions.DefaultTables())
	if err != nil {
		t.Fatal(err)
	}
	sb, err := store.Checksum(ctx, b, sessions.DefaultTables())
	if err != nil {
		t.Fatal(err)
	}
	if sa.Rows != 3 || sa != sb {
		t.Errorf("in order %+v, reordered and repeated %+v: want the same 3 sessions", sa, sb)
	}
	online, err := store.OnlineAt(ctx, a, t0.Add(7*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(online) != 2 || online[0].User != 1 || online[1].User != 2 || !online[0].ClosedAt.Equal(t0.Add(10*time.Minute)) ||
		online[0].Reason != "client_closed" || online[1].UserAgent != strings.Repeat("é", 255) {
		t.Errorf("online at +7m: %+v", online)
	}
	if later, _ := store.OnlineAt(ctx, a, t0.Add(25*time.Minute), 0); len(later) != 2 || later[0].User != 2 || later[1].User != 3 {
		t.Errorf("online at +25m: %+v", later)
	}
	us, err := store.UserSessions(ctx, b, 3, t0, t0.Add(time.Hour), 0)
	if err != nil || len(us) != 1 || !us[0].OpenedAt.Equal(t0.Add(20*time.Minute)) || us[0].Reason != "idle_timeout" {
		t.Errorf("user 3's sessions: %+v %v", us, err)
	}

	// An event on the wrong stream can never apply.
	bad := opened(t, a, 4, "s4", "", t0)
	bad.StreamID = domain.SessionStreamID(5, "s4")
	_, err = store.ApplyBatch(ctx, a, group, sessions.DefaultTables(), []domain.Envelope{bad})
	var ee *sessions.EventError
	if !errors.As(err, &ee) || !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("an event on another session's stream: %v, want an EventError wrapping ErrInvalid", err)
	}
}
