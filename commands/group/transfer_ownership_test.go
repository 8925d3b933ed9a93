package group_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// barrierStore holds the first n appends after arm until all n have arrived, so commands
// started together have all decided before any of them commits: a race on demand, against the
// real store.
type barrierStore struct {
	*eventstore.Store
	mu      sync.Mutex
	waiting int
	release chan struct{}
}

func (b *barrierStore) arm(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting, b.release = n, make(chan struct{})
}

func (b *barrierStore) AppendStreams(ctx context.Context, tenant domain.TenantID, parts []eventstore.StreamAppend) ([]domain.Envelope, error) {
	b.mu.Lock()
	release := b.release
	if b.waiting > 0 {
		b.waiting--
		if b.waiting == 0 {
			close(release)
		}
	} else {
		release = nil
	}
	b.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			return nil, errors.New("barrier: the other command never reached its append")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.Store.AppendStreams(ctx, tenant, parts)
}

// raceRound sets up a group with owner 1, admin 2 and member 3, then runs, started together,
// the owner's transfer to 3 and the admin's removal of 3. It returns both errors.
func raceRound(t *testing.T, setup, racing *group.Handlers, arm func(), tenant domain.TenantID) (g domain.GroupID, transferErr, removeErr error) {
	t.Helper()
	ctx := testCtx(t)
	owner, admin := who(tenant, 1), who(tenant, 2)
	g = createGroup(t, setup, owner, nil)
	join(t, setup, tenant, g, 2, 3, 4)
	if _, err := setup.SetRole.Handle(ctx, group.SetRole{Actor: owner, Group: g, User: 2, Role: domain.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	arm()
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-start
		_, transferErr = racing.TransferOwnership.Handle(ctx, group.TransferOwnership{Actor: owner, Group: g, To: 3})
	}()
	go func() {
		defer wg.Done()
		<-start
		_, removeErr = racing.RemoveMember.Handle(ctx, group.RemoveMember{Actor: admin, Group: g, User: 3})
	}()
	close(start)
	wg.Wait()
	return g, transferErr, removeErr
}

// checkConsistent folds the round's group from the store and checks that exactly the winner's
// outcome is visible: the owner is a member with role owner, a removed user is not the owner.
func checkConsistent(t *testing.T, store *eventstore.Store, tenant domain.TenantID, g domain.GroupID, transferWon bool) {
	t.Helper()
	gs := groupState(t, store, tenant, g)
	owner := memberState(t, store, tenant, g, gs.Owner())
	target := memberState(t, store, tenant, g, 3)
	old := memberState(t, store, tenant, g, 1)
	if !owner.IsMember() || owner.Role() != domain.RoleOwner {
		t.Errorf("group %d: owner %d has status %s role %q", g, gs.Owner(), owner.Status(), owner.Role())
	}
	if transferWon {
		if gs.Owner() != 3 || old.Role() != domain.RoleMember || !target.IsMember() {
			t.Errorf("group %d: transfer won but owner %d, old owner role %q, target %s", g, gs.Owner(), old.Role(), target.Status())
		}
		if gs.MemberCount() != 4 {
			t.Errorf("group %d: member count %d, want 4", g, gs.MemberCount())
		}
	} else {
		if gs.Owner() != 1 || target.Status() != domain.StatusRemoved || target.Role() != "" {
			t.Errorf("group %d: removal won but owner %d, target %s role %q", g, gs.Owner(), target.Status(), target.Role())
		}
		if gs.MemberCount() != 3 {
			t.Errorf("group %d: member count %d, want 3", g, gs.MemberCount())
		}
	}
}

// An ownership transfer to user 3 and the removal of user 3, decided on the same state and
// committed together (a barrier in front of the store holds both appends until both arrive):
// in every round exactly one commits, the other fails with a *ConflictError wrapping
// domain.ErrConcurrency instead of retrying into a decision on the changed state, and the state
// folded from the streams shows exactly the winner's outcome.
func TestTransferOwnershipRacingRemovalOfTheNewOwner(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 8)
	tenant := domain.MustTenantID("acme")
	setup := newHandlers(t, store, group.Deps{}, group.Config{})
	bs := &barrierStore{Store: store}
	racing := newHandlers(t, bs, group.Deps{}, group.Config{})
	wins := map[string]int{}
	for round := range 30 {
		g, terr, rerr := raceRound(t, setup, racing, func() { bs.arm(2) }, tenant)
		var (
			loser    error
			conflict *group.ConflictError
		)
		switch {
		case terr == nil && rerr != nil:
			wins["transfer"]++
			loser = rerr
		case rerr == nil && terr != nil:
			wins["remove"]++
			loser = terr
		default:
			t.Fatalf("round %d: transfer %v, remove %v: want exactly one winner", round, terr, rerr)
		}
		if !errors.Is(loser, domain.ErrConcurrency) || !errors.As(loser, &conflict) {
			t.Errorf("round %d: loser's error %v does not wrap ErrConcurrency in a ConflictError", round, loser)
		}
		checkConsistent(t, store, tenant, g, terr == nil)
	}
	t.Logf("wins: %v", wins)
}

// The same race without the barrier: a command that loaded after the other committed is refused
// by the domain instead (target_not_member, cannot_remove_owner); one that decided before is a
// ConflictError. Either way one side wins and the state is consistent.
func TestTransferOwnershipRacingRemovalFreeRunning(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 8)
	tenant := domain.MustTenantID("acme")
	setup := newHandlers(t, store, group.Deps{}, group.Config{})
	racing := newHandlers(t, store, group.Deps{}, group.Config{})
	conflicts := 0
	for round := range 30 {
		g, terr, rerr := raceRound(t, setup, racing, func() {}, tenant)
		if (terr == nil) == (rerr == nil) {
			t.Fatalf("round %d: transfer %v, remove %v: want exactly one winner", round, terr, rerr)
		}
		loser, refusal := rerr, domain.ReasonCannotRemoveOwner
		if terr != nil {
			loser, refusal = terr, domain.ReasonTargetNotMember
		}
		switch {
		case errors.Is(loser, domain.ErrConcurrency):
			conflicts++
		case reasonOf(loser) != refusal:
			t.Errorf("round %d: loser's error %v, want ErrConcurrency or %s", round, loser, refusal)
		}
		checkConsistent(t, store, tenant, g, terr == nil)
	}
	t.Logf("rounds decided on the same state (ConflictError): %d of 30", conflicts)
}
