package admin_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// settingsChangedMeanwhile is the consumer's GroupStates: after the first read of the armed
// group it runs meanwhile once, so the change it makes lands between the command's look-up of
// the group and the group handler's decision.
type settingsChangedMeanwhile struct {
	admin.GroupStates
	mu        sync.Mutex
	meanwhile func()
}

func (s *settingsChangedMeanwhile) Group(ctx context.Context, t domain.TenantID, id domain.GroupID, maxAge time.Duration) (domain.GroupState, error) {
	g, err := s.GroupStates.Group(ctx, t, id, maxAge)
	s.mu.Lock()
	fn := s.meanwhile
	s.meanwhile = nil
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
	return g, err
}

// group.mute_all turns mute-all on and keeps the other settings: a settings change the owner
// commits while the command runs is kept, not overwritten with the settings the command read
// before it.
func TestGroupMuteAllKeepsASettingsChangeMadeMeanwhile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	owner := domain.Principal{Tenant: tid, User: 1}
	e.accountsOf(tid, 1)
	res, err := e.groups.CreateGroup.Handle(ctx, group.CreateGroup{Actor: owner, Profile: mustProfile(t)})
	if err != nil {
		t.Fatal(err)
	}
	gid := res.Group
	approval := domain.DefaultGroupSettings()
	approval.JoinApproval = true

	states := &settingsChangedMeanwhile{GroupStates: e.loader, meanwhile: func() {
		if _, err := e.groups.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: owner, Group: gid, Settings: approval}); err != nil {
			t.Errorf("the owner's settings change: %v", err)
		}
	}}
	e.stop(e.consumer)
	e.handlers.GroupStates = states
	e.startConsumer("test-2", admin.Config{Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond,
		MaxInterval: 50 * time.Millisecond}})

	e.ok(command(ten, domain.CmdGroupMuteAll, fmt.Sprintf(`{"group_id":"%s","mute_all":true}`, gid)))
	st, err := e.loader.Group(ctx, tid, gid, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := approval
	want.MuteAll = true
	if st.Settings() != want {
		t.Fatalf("settings after the owner's change and mute_all: %+v, want %+v", st.Settings(), want)
	}
}
