package group_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// Two hundred users join one group at once through four independent handler sets (four
// "nodes": own caches, own per-process join serialisation) against a limit of 150. Exactly 150
// end up members, the owner included: the member count in the group stream, the folded
// membership streams and the handlers' answers all agree, nobody joined twice, and everyone else
// was refused group_full.
func TestJoinGroupKeepsTheMemberLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	pool, store := newStore(t, 24)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	const (
		limit   = 150
		joiners = 200
		nodes   = 4
	)
	var hs [nodes]*group.Handlers
	for i := range hs {
		hs[i] = newHandlers(t, store, group.Deps{}, group.Config{MaxMembers: limit})
	}
	g := createGroup(t, hs[0], who(tenant, 1), nil)

	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		results   = make([]error, joiners)
		exhausted atomic.Int64
	)
	for i := range joiners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			cmd := group.JoinGroup{Actor: who(tenant, domain.UserID(1000+i)), Group: g}
			for {
				_, err := hs[i%nodes].JoinGroup.Handle(ctx, cmd)
				if errors.Is(err, domain.ErrConcurrency) {
					exhausted.Add(1) // every attempt lost to another node: the caller tries again
					continue
				}
				results[i] = err
				return
			}
		}()
	}
	close(start)
	wg.Wait()

	joined := map[domain.UserID]bool{}
	full := 0
	for i, err := range results {
		u := domain.UserID(1000 + i)
		switch {
		case err == nil:
			joined[u] = true
		case reasonOf(err) == domain.ReasonGroupFull:
			full++
		default:
			t.Errorf("user %d: unexpected error %v", u, err)
		}
	}
	if len(joined) != limit-1 || full != joiners-(limit-1) {
		t.Errorf("answers: %d joined, %d group_full; want %d and %d", len(joined), full, limit-1, joiners-(limit-1))
	}
	t.Logf("joins that exhausted their attempts and were sent again: %d", exhausted.Load())

	gs := groupState(t, store, tenant, g)
	if gs.MemberCount() != limit {
		t.Errorf("member count in the group stream: %d, want %d", gs.MemberCount(), limit)
	}
	// The count changes in the group stream: one per join, counting up without gaps.
	var counts []int
	for _, e := range readAll(t, store, tenant, domain.GroupStreamID(g)) {
		if e.EventType == domain.EventGroupMemberCountChanged {
			var p domain.GroupMemberCountChanged
			if err := e.Decode(&p); err != nil {
				t.Fatal(err)
			}
			counts = append(counts, p.MemberCount)
		}
	}
	for i, c := range counts {
		if c != i+2 {
			t.Fatalf("count changes %v: want 2, 3, … %d", counts, limit)
		}
	}

	// Every membership stream of the group, folded; nobody joined twice.
	rows, err := pool.Query(ctx, `SELECT stream_id, count(*) FILTER (WHERE event_type = $3)
		FROM events WHERE tenant_id = $1 AND stream_id LIKE $2 GROUP BY stream_id`,
		tenant.String(), "member:"+g.String()+":%", string(domain.EventMemberJoined))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	members := 0
	for rows.Next() {
		var (
			stream  string
			joinedN int
		)
		if err := rows.Scan(&stream, &joinedN); err != nil {
			t.Fatal(err)
		}
		if joinedN != 1 {
			t.Errorf("%s: %d member.joined.v1 events", stream, joinedN)
		}
		var u domain.UserID
		if err := u.UnmarshalText([]byte(stream[len("member:"+g.String()+":"):])); err != nil {
			t.Fatal(err)
		}
		m := memberState(t, store, tenant, g, u)
		if !m.IsMember() {
			t.Errorf("user %d: status %s", u, m.Status())
			continue
		}
		members++
		if u != 1 && !joined[u] {
			t.Errorf("user %d is a member but was told otherwise", u)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if members != limit {
		t.Errorf("membership streams with a member: %d, want %d", members, limit)
	}
}

// Every user asks to join twice at once: the joins that share a batch are decided one after the
// other, so each user joins exactly once and the second request is refused already_member.
func TestJoinGroupTwiceAtOnceJoinsOnce(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 8)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	h := newHandlers(t, store, group.Deps{}, group.Config{})
	g := createGroup(t, h, who(tenant, 1), nil)
	const users = 30
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		ok, dups atomic.Int64
	)
	for i := range 2 * users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(tenant, domain.UserID(100+i%users)), Group: g})
			switch {
			case err == nil:
				ok.Add(1)
			case reasonOf(err) == domain.ReasonAlreadyMember:
				dups.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != users || dups.Load() != users {
		t.Errorf("%d joined, %d already_member; want %d each", ok.Load(), dups.Load(), users)
	}
	if n := groupState(t, store, tenant, g).MemberCount(); n != users+1 {
		t.Errorf("member count %d, want %d", n, users+1)
	}
	for u := domain.UserID(100); u < 100+users; u++ {
		if v := memberState(t, store, tenant, g, u).Version(); v != 1 {
			t.Errorf("user %d: membership stream at version %d, want one join", u, v)
		}
	}
}
