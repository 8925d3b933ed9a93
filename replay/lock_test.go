package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/sessions"
	"github.com/imledger/imledger/replay"
)

// blockingProgress holds the run it reports on at the start of its pass over the log, when the
// run's fresh tables exist, until release is closed.
type blockingProgress struct {
	started chan struct{}
	release chan struct{}
}

func newBlockingProgress() *blockingProgress {
	return &blockingProgress{started: make(chan struct{}), release: make(chan struct{})}
}

func (p *blockingProgress) start(string, int64) replay.ProgressTracker {
	close(p.started)
	<-p.release
	return nil
}

// run is one process's rebuild or verification of a tenant, reporting to p (nil: no report).
type run func(ctx context.Context, p replay.Progress) error

func verifyRun[R any](tn domain.TenantID, f func(context.Context, replay.VerifyOptions) (R, error)) run {
	return func(ctx context.Context, p replay.Progress) error {
		_, err := f(ctx, replay.VerifyOptions{Tenant: tn, Progress: p})
		return err
	}
}

func rebuildRun(tn domain.TenantID, projection string, f func(context.Context, replay.RebuildOptions) (replay.RebuildResult, error)) run {
	return func(ctx context.Context, p replay.Progress) error {
		_, err := f(ctx, replay.RebuildOptions{Projection: projection, Tenant: tn, Progress: p})
		return err
	}
}

// Two rebuilds, or two verifications, of one tenant's MySQL read model at once (two operators, a
// cron overlapping a manual run; here two routers, as two processes would have) build the same
// tables: the second is refused with ErrTablesInUse while the first runs, the first is not
// disturbed, and once it is done the next run goes ahead. A rebuild and a verification use other
// tables and do not exclude each other.
func TestConcurrentRunsOnOneTenantAreRefused(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	other := m.RouterAt(testenv.MySQLDSN)
	biz := m.BusinessStore(t)
	ss, err := sessions.NewStore(m.Router)
	if err != nil {
		t.Fatal(err)
	}
	otherSS, err := sessions.NewStore(other)
	if err != nil {
		t.Fatal(err)
	}
	tn := m.Tenant("lockedruns")
	store := projtest.NewEventStore(t, h.Pool)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	history := []domain.Envelope{projtest.SessionEvent(tn, 1, "a", true, t0), projtest.SessionEvent(tn, 1, "a", false, t0.Add(time.Minute))}
	for seq := int64(1); seq <= 5; seq++ {
		history = append(history, projtest.SentEvent(tn, projtest.GroupTopic(1), seq, 2, "m"))
	}
	history = append(history, projtest.GroupHistory(t, tn, 7, 1, []domain.UserID{2, 3})...)
	projtest.AppendAll(t, store, history)

	msgs := func(r replay.TenantDatabases) *replay.Rebuilder[msgstore.TopicSummary] {
		rb, err := replay.NewMessageRebuilder(m.Store, store, r, projtest.Logger())
		if err != nil {
			t.Fatal(err)
		}
		return rb
	}
	bizRb := func(r replay.TenantDatabases) *replay.Rebuilder[readmodels.TableSummary] {
		rb, err := replay.NewBusinessRebuilder(biz, store, r, projtest.Logger())
		if err != nil {
			t.Fatal(err)
		}
		return rb
	}
	sessRb := func(r replay.TenantDatabases, s *sessions.Store) *replay.Rebuilder[readmodels.TableSummary] {
		rb, err := replay.NewSessionsRebuilder(s, store, r, projtest.Logger())
		if err != nil {
			t.Fatal(err)
		}
		return rb
	}
	cases := map[string]struct{ first, second, unrelated run }{
		"messages-mysql verify": {
			first:     verifyRun(tn, msgs(m.Router).Verify),
			second:    verifyRun(tn, msgs(other).Verify),
			unrelated: rebuildRun(tn, projections.ProjectionMessagesMySQL, msgs(other).Rebuild),
		},
		"messages-mysql rebuild": {
			first:     rebuildRun(tn, projections.ProjectionMessagesMySQL, msgs(m.Router).Rebuild),
			second:    rebuildRun(tn, projections.ProjectionMessagesMySQL, msgs(other).Rebuild),
			unrelated: verifyRun(tn, msgs(other).Verify),
		},
		"business-mysql verify": {
			first:  verifyRun(tn, bizRb(m.Router).Verify),
			second: verifyRun(tn, bizRb(other).Verify),
		},
		"business-mysql rebuild": {
			first:  rebuildRun(tn, projections.ProjectionBusinessMySQL, bizRb(m.Router).Rebuild),
			second: rebuildRun(tn, projections.ProjectionBusinessMySQL, bizRb(other).Rebuild),
		},
		"sessions-mysql verify": {
			first:  verifyRun(tn, sessRb(m.Router, ss).Verify),
			second: verifyRun(tn, sessRb(other, otherSS).Verify),
		},
		"sessions-mysql rebuild": {
			first:  rebuildRun(tn, projections.ProjectionSessionsMySQL, sessRb(m.Router, ss).Rebuild),
			second: rebuildRun(tn, projections.ProjectionSessionsMySQL, sessRb(other, otherSS).Rebuild),
		},
	}
	// The cases share the tenant's database, so they run one after another.
	for name, c := range cases {
		ctx := projtest.Ctx(t)
		p := newBlockingProgress()
		done := make(chan error, 1)
		go func() { done <- c.first(ctx, p.start) }()
		select {
		case <-p.started:
		case err := <-done:
			t.Fatalf("%s: the first run ended before its pass over the log: %v", name, err)
		}
		err := c.second(ctx, nil)
		if !errors.Is(err, replay.ErrTablesInUse) {
			t.Errorf("%s: a second run while the first builds its tables: %v, want ErrTablesInUse", name, err)
		}
		if c.unrelated != nil {
			if err := c.unrelated(ctx, nil); err != nil {
				t.Errorf("%s: the other kind of run was held up: %v", name, err)
			}
		}
		close(p.release)
		if err := <-done; err != nil {
			t.Errorf("%s: the first run failed: %v", name, err)
		}
		if err := c.second(ctx, nil); err != nil {
			t.Errorf("%s: a run after the first ended: %v", name, err)
		}
	}
}
