package relay_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
)

// Two relays of one name: only one publishes, the other stands by; when the active one stops,
// the standby takes over from the checkpoint.
func TestOnlyOneRelayPublishesAndStandbyTakesOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	tenant := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	cfg.BatchSize = 10
	r1, r2 := e.newRelay(cfg, nil), e.newRelay(cfg, nil)
	stop1 := start(t, e.ctx, r1)
	waitUntil(t, 10*time.Second, func() bool { return r1.Stats().Active })
	stop2 := start(t, e.ctx, r2)
	c := e.collector()

	var want []domain.Envelope
	for i := range 10 {
		want = append(want, e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 10, "")...)
		if i == 5 {
			time.Sleep(100 * time.Millisecond) // let the standby try the lock a few times
		}
	}
	c.waitFor(e.ctx, want, 20*time.Second)
	if s := r2.Stats(); s.Active || s.Events != 0 {
		t.Fatalf("standby relay published while the other held the lock: %+v", s)
	}
	waitUntil(t, 5*time.Second, func() bool { return r1.Stats().Events == int64(len(want)) })

	stop1()
	waitUntil(t, 10*time.Second, func() bool { return r2.Stats().Active })
	more := e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 15, "")
	c.waitFor(e.ctx, more, 20*time.Second)
	if dups := c.checkStreams(e); dups != 0 {
		t.Errorf("%d duplicates after a graceful handover, want none", dups)
	}
	waitUntil(t, 5*time.Second, func() bool { return r2.Stats().Events >= int64(len(more)) })
	time.Sleep(50 * time.Millisecond)
	if s := r2.Stats(); s.Events != int64(len(more)) {
		t.Errorf("the new active relay published %d events, want only the %d new ones", s.Events, len(more))
	}
	stop2()
}

// If the session holding the lock dies, the relay stops publishing, takes the lock again on a
// new connection and carries on.
func TestRelayReacquiresLockAfterConnectionDrops(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	tenant := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	r := e.newRelay(cfg, nil)
	start(t, e.ctx, r)
	c := e.collector()
	first := e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 5, "")
	c.waitFor(e.ctx, first, 10*time.Second)

	holder := lockHolder(t, e, cfg)
	if holder == 0 {
		t.Fatal("no session holds the relay lock")
	}
	if _, err := e.pool.Exec(e.ctx, "SELECT pg_terminate_backend($1)", holder); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, func() bool {
		h := lockHolder(t, e, cfg)
		return h != 0 && h != holder
	})
	more := e.appendEvents(tenant, "grp1", domain.EventGroupMessageSent, 5, "")
	c.waitFor(e.ctx, more, 10*time.Second)
	c.checkStreams(e)
}

// lockHolder returns the pid of the session holding the relay's advisory lock, or 0.
func lockHolder(t testing.TB, e *env, cfg relay.Config) int32 {
	t.Helper()
	id := cfg.LockID
	if id == 0 {
		id = relay.DefaultLockID("default")
	}
	var pid int32
	err := e.pool.QueryRow(e.ctx, `SELECT coalesce(max(pid), 0) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((classid::bigint << 32) | objid::bigint) = $1`, id).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
