package domain_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/imledger/imledger/domain"
)

const (
	uX     domain.UserID = 20 // the actor of the relation matrix
	uY     domain.UserID = 21 // the peer
	uThird domain.UserID = 22 // not a party
)

func relationStep(t *testing.T, r *domain.RelationState, evs []domain.PendingEvent, err error) []domain.Envelope {
	t.Helper()
	return commit(t, r.Tenant(), evs, err, r)
}

// relDo returns a function that commits a decision to r, for use as relDo(t, &r)(r.Block(...)).
func relDo(t *testing.T, r *domain.RelationState) func([]domain.PendingEvent, error) {
	t.Helper()
	return func(evs []domain.PendingEvent, err error) {
		t.Helper()
		relationStep(t, r, evs, err)
	}
}

func asIn(tenant domain.TenantID, u domain.UserID) domain.Principal {
	return domain.Principal{Tenant: tenant, User: u}
}

// relationSetups are the columns of the matrix: the relation between X and Y, and who acts.
func relationSetups(t *testing.T) map[string]struct {
	rel domain.RelationState
	p   domain.Principal
} {
	t.Helper()
	build := func(steps ...func(r domain.RelationState) ([]domain.PendingEvent, error)) domain.RelationState {
		r, err := domain.NewRelationState(tenantA, uX, uY)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			evs, err := s(r)
			relationStep(t, &r, evs, err)
		}
		return r
	}
	x, y := asIn(tenantA, uX), asIn(tenantA, uY)
	req := func(p domain.Principal) func(domain.RelationState) ([]domain.PendingEvent, error) {
		return func(r domain.RelationState) ([]domain.PendingEvent, error) { return r.RequestFriend(p, "hi", t0) }
	}
	accept := func(p domain.Principal) func(domain.RelationState) ([]domain.PendingEvent, error) {
		return func(r domain.RelationState) ([]domain.PendingEvent, error) { return r.AcceptFriend(p, t0) }
	}
	block := func(p domain.Principal) func(domain.RelationState) ([]domain.PendingEvent, error) {
		return func(r domain.RelationState) ([]domain.PendingEvent, error) { return r.Block(p, t0) }
	}
	type setup = struct {
		rel domain.RelationState
		p   domain.Principal
	}
	return map[string]setup{
		"stranger":       {build(), x},
		"requester":      {build(req(x)), x},
		"requested":      {build(req(y)), x},
		"friend":         {build(req(y), accept(x)), x},
		"blocked":        {build(block(y)), x},
		"friend_blocked": {build(req(y), accept(x), block(y)), x},
		"blocker":        {build(block(x)), x},
		"non_party":      {build(), asIn(tenantA, uThird)},
		"other_tenant":   {build(), asIn(tenantB, uX)},
	}
}

type relCmd func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error)

// relationRow is one command of the relation matrix with the expected reason per setup;
// setups not listed expect not_party (non_party) or tenant_mismatch (other_tenant).
type relationRow struct {
	name    string
	cmd     relCmd
	okTypes map[string][]domain.EventType // per setup when it differs from okType
	okType  domain.EventType
	want    map[string]string
}

const skip = "-" // an expectation that does not apply

func relationRows() []relationRow {
	var (
		ok         = ""
		noPending  = domain.ReasonNoPendingRequest
		notFriends = domain.ReasonNotFriends
		notBlocked = domain.ReasonNotBlocked
	)
	return []relationRow{
		{name: "request", okType: domain.EventFriendRequested,
			okTypes: map[string][]domain.EventType{"requested": {domain.EventFriendAccepted}},
			cmd: func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error) {
				return r.RequestFriend(p, "hello", t0)
			},
			want: map[string]string{"stranger": ok, "requester": domain.ReasonAlreadyRequested, "requested": ok,
				"friend": domain.ReasonAlreadyFriends, "blocked": domain.ReasonBlocked, "friend_blocked": domain.ReasonAlreadyFriends,
				"blocker": domain.ReasonBlocking}},
		{name: "accept", okType: domain.EventFriendAccepted,
			cmd: func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error) {
				return r.AcceptFriend(p, t0)
			},
			want: map[string]string{"stranger": noPending, "requester": noPending, "requested": ok, "friend": noPending,
				"blocked": noPending, "friend_blocked": noPending, "blocker": noPending}},
		{name: "decline", okType: domain.EventFriendDeclined,
			cmd: func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error) {
				return r.DeclineFriend(p, t0)
			},
			want: map[string]string{"stranger": noPending, "requester": noPending, "requested": ok, "friend": noPending,
				"blocked": noPending, "friend_blocked": noPending, "blocker": noPending}},
		{name: "remove", okType: domain.EventFriendRemoved,
			cmd: func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error) {
				return r.RemoveFriend(p, t0)
			},
			want: map[string]string{"stranger": notFriends, "requester": notFriends, "requested": notFriends, "friend": ok,
				"blocked": notFriends, "friend_blocked": ok, "blocker": notFriends}},
		{name: "block", okType: domain.EventUserBlocked,
			cmd: func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error) { return r.Block(p, t0) },
			want: map[string]string{"stranger": ok, "requester": ok, "requested": ok, "friend": ok,
				"blocked": ok, "friend_blocked": ok, "blocker": domain.ReasonAlreadyBlocked}},
		{name: "unblock", okType: domain.EventUserUnblocked,
			cmd: func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error) {
				return r.Unblock(p, t0)
			},
			want: map[string]string{"stranger": notBlocked, "requester": notBlocked, "requested": notBlocked, "friend": notBlocked,
				"blocked": notBlocked, "friend_blocked": notBlocked, "blocker": ok}},
		{name: "send_direct",
			cmd: func(r domain.RelationState, p domain.Principal) ([]domain.PendingEvent, error) {
				return nil, domain.CanSendDirect(r, p.User)
			},
			// CanSendDirect takes the loaded relation, whose tenant is the sender's by construction.
			want: map[string]string{"stranger": ok, "requester": ok, "requested": ok, "friend": ok,
				"blocked": domain.ReasonBlocked, "friend_blocked": domain.ReasonBlocked, "blocker": ok, "other_tenant": skip}},
	}
}

func TestRelationMatrix(t *testing.T) {
	t.Parallel()
	rows := relationRows()
	setups := relationSetups(t)
	for _, row := range rows {
		for name, s := range setups {
			want, listed := row.want[name]
			if !listed {
				switch name {
				case "non_party":
					want = domain.ReasonNotParty
				case "other_tenant":
					want = domain.ReasonTenantMismatch
				default:
					t.Fatalf("%s: no expectation for %s", row.name, name)
				}
			}
			if want == skip {
				continue
			}
			rel := s.rel
			evs, err := row.cmd(rel, s.p)
			if got := reasonOf(err); got != want {
				t.Errorf("%s by %s: got %q, want %q", row.name, name, got, want)
				continue
			}
			if err != nil || row.okType == "" {
				continue
			}
			wantTypes, special := row.okTypes[name]
			if !special {
				wantTypes = []domain.EventType{row.okType}
			}
			if got := types(evs); !reflect.DeepEqual(got, wantTypes) {
				t.Errorf("%s by %s: events %v, want %v", row.name, name, got, wantTypes)
			}
			relationStep(t, &rel, evs, nil)
		}
	}
}

func TestBlocksAreDirectional(t *testing.T) {
	t.Parallel()
	r, _ := domain.NewRelationState(tenantA, uY, uX) // either order names the same relation
	relDo(t, &r)(r.Block(asIn(tenantA, uX), t0))
	if !r.Blocks(uX, uY) || r.Blocks(uY, uX) {
		t.Fatalf("after X blocks Y: Blocks(X,Y)=%v Blocks(Y,X)=%v", r.Blocks(uX, uY), r.Blocks(uY, uX))
	}
	if err := domain.CanSendDirect(r, uY); reasonOf(err) != domain.ReasonBlocked {
		t.Errorf("blocked Y sends to X: %v", err)
	}
	if err := domain.CanSendDirect(r, uX); err != nil {
		t.Errorf("X sends to the user it blocks: %v", err)
	}
	relDo(t, &r)(r.Block(asIn(tenantA, uY), t0))
	relDo(t, &r)(r.Unblock(asIn(tenantA, uX), t0))
	if r.Blocks(uX, uY) || !r.Blocks(uY, uX) {
		t.Fatalf("after Y blocks X and X unblocks: Blocks(X,Y)=%v Blocks(Y,X)=%v", r.Blocks(uX, uY), r.Blocks(uY, uX))
	}
	if err := domain.CanSendDirect(r, uX); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("X sends to Y who blocks X: %v", err)
	}
	if r.Blocks(uThird, uX) {
		t.Errorf("a third user blocks nobody here")
	}
}

func TestRelationRoundTrip(t *testing.T) {
	t.Parallel()
	r, _ := domain.NewRelationState(tenantA, uX, uY)
	x, y := asIn(tenantA, uX), asIn(tenantA, uY)
	var log []domain.Envelope
	step := func(evs []domain.PendingEvent, err error) { log = append(log, relationStep(t, &r, evs, err)...) }

	step(r.RequestFriend(x, "we met at the meetup", t0))
	if r.PendingRequestFrom() != uX || r.RequestMessage() != "we met at the meetup" {
		t.Fatalf("pending request from %d %q", r.PendingRequestFrom(), r.RequestMessage())
	}
	step(r.DeclineFriend(y, t0))
	step(r.RequestFriend(x, "", t0))
	step(r.RequestFriend(y, "", t0.Add(1))) // crossing requests: Y's request accepts X's
	if !r.Friends() || r.PendingRequestFrom() != 0 || !r.FriendsSince().Equal(t0.Add(1)) {
		t.Fatalf("friends=%v pending=%d since=%v", r.Friends(), r.PendingRequestFrom(), r.FriendsSince())
	}
	step(r.Block(y, t0))
	step(r.RemoveFriend(x, t0))
	if r.Friends() || !r.Blocks(uY, uX) || r.Version() != 6 {
		t.Fatalf("friends=%v blocks=%v version=%d", r.Friends(), r.Blocks(uY, uX), r.Version())
	}
	folded, err := domain.FoldRelation(tenantA, uY, uX, toWire(t, log))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(folded, r) {
		t.Errorf("fold of the stream differs from the state built step by step:\n%+v\n%+v", folded, r)
	}
	lo, hi := folded.Parties()
	if lo != uX || hi != uY || folded.StreamID() != "relation:20:21" {
		t.Errorf("parties %d,%d stream %s", lo, hi, folded.StreamID())
	}
}

func TestRelationInvalidInput(t *testing.T) {
	t.Parallel()
	if _, err := domain.NewRelationState(tenantA, uX, uX); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("self relation: %v", err)
	}
	if _, err := domain.NewRelationState(tenantA, 0, uX); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("zero user: %v", err)
	}
	if _, err := domain.NewRelationState(domain.TenantID{}, uX, uY); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("no tenant: %v", err)
	}
	r, _ := domain.NewRelationState(tenantA, uX, uY)
	long := make([]rune, domain.MaxFriendMessageLen+1)
	for i := range long {
		long[i] = '好'
	}
	_, err := r.RequestFriend(asIn(tenantA, uX), string(long), t0)
	if got := reasonOf(err); got != "invalid:message:too_long" {
		t.Errorf("long friend message: %s", got)
	}
}

func TestRelationStreams(t *testing.T) {
	t.Parallel()
	assertBusinessEvents(t, domain.EventFriendRequested, domain.EventFriendAccepted, domain.EventFriendDeclined,
		domain.EventFriendRemoved, domain.EventUserBlocked, domain.EventUserUnblocked)
	a, err1 := domain.RelationStreamID(9, 3)
	b, err2 := domain.RelationStreamID(3, 9)
	if err1 != nil || err2 != nil || a != "relation:3:9" || a != b {
		t.Errorf("RelationStreamID = %q %v, %q %v", a, err1, b, err2)
	}
	if _, err := domain.RelationStreamID(3, 3); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("RelationStreamID(self) err = %v", err)
	}
	if domain.ConversationKey(a) != a {
		t.Errorf("ConversationKey splits %q", a)
	}
}
