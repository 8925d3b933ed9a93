package group

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Store is what the handlers need from the event store. *eventstore.Store satisfies it.
type Store interface {
	StreamReader
	// AppendStreams appends to several streams of one tenant in one transaction, each checked
	// against its expected version; domain.ErrConcurrency when one of them moved.
	AppendStreams(ctx context.Context, tenant domain.TenantID, parts []eventstore.StreamAppend) ([]domain.Envelope, error)
}

var _ Store = (*eventstore.Store)(nil)

// Meta is the tracing and attribution metadata a command carries into its events.
type Meta struct {
	TraceID       string
	CorrelationID string
	CausationID   string
	// Actor is who issued the command, for the events' actor field; the zero value means the
	// principal itself, as a user. Admin commands set {admin, <admin id>}.
	Actor domain.Actor
}

// Deps are the collaborators of the handlers.
type Deps struct {
	// Store is the event store. Required.
	Store Store
	// IDs draws the ids of new groups. Default: a Snowflake with a random node id (ids of two
	// nodes may then collide; CreateGroup draws again when one does).
	IDs IDGenerator
	// Loader folds and caches the aggregates. Default: a Loader over Store sized by
	// Config.Loader. Sharing one Loader with the send-path policy lets commits fold straight
	// into the policy's cache.
	Loader *Loader
	// Invalidator hears which streams each command wrote, after the commit. Default: none.
	Invalidator Invalidator
	// Notifier hears what changed, after the commit. Default: none.
	Notifier Notifier
	// Changes hears every command's changes whole, after the Notifier. Default: none.
	Changes ChangeListener
	// Sealer seals the personal fields of profile events (DESIGN §7a) before they are appended.
	// Default: none, they are stored as given.
	Sealer domain.Sealer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Handlers holds one handler per command. All share the store, the loader and the per-process
// serialisation of joins; build them with New.
type Handlers struct {
	CreateGroup         CreateGroupHandler
	UpdateGroupProfile  UpdateGroupProfileHandler
	UpdateGroupSettings UpdateGroupSettingsHandler
	UpdateAnnouncement  UpdateAnnouncementHandler
	InviteMember        InviteMemberHandler
	AcceptInvite        AcceptInviteHandler
	RequestJoin         RequestJoinHandler
	ApproveJoin         ApproveJoinHandler
	RejectJoin          RejectJoinHandler
	JoinGroup           JoinGroupHandler
	JoinOnLink          JoinOnLinkHandler
	LeaveGroup          LeaveGroupHandler
	RemoveMember        RemoveMemberHandler
	UnbanMember         UnbanMemberHandler
	SetRole             SetRoleHandler
	TransferOwnership   TransferOwnershipHandler
	MuteMember          MuteMemberHandler
	UnmuteMember        UnmuteMemberHandler
	DissolveGroup       DissolveGroupHandler

	RequestFriend RequestFriendHandler
	AcceptFriend  AcceptFriendHandler
	DeclineFriend DeclineFriendHandler
	RemoveFriend  RemoveFriendHandler
	BlockUser     BlockUserHandler
	UnblockUser   UnblockUserHandler

	UpdateProfile UpdateProfileHandler
}

// New validates cfg and builds the handlers.
func New(deps Deps, cfg Config) (*Handlers, error) {
	cfg.setDefaults()
	var errs []error
	if deps.Store == nil {
		errs = append(errs, errors.New("Store is required"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("group handlers: %w", err)
	}
	c := &core{cfg: cfg, store: deps.Store, ids: deps.IDs, loader: deps.Loader, inval: deps.Invalidator,
		notifier: deps.Notifier, changes: deps.Changes, sealer: deps.Sealer, now: deps.Now, locks: newStripes(256)}
	if c.ids == nil {
		var b [2]byte
		_, _ = rand.Read(b[:])
		c.ids, _ = NewSnowflake(int64(binary.BigEndian.Uint16(b[:]) % (MaxSnowflakeNode + 1)))
	}
	if c.loader == nil {
		l, err := NewLoader(deps.Store, cfg.Loader)
		if err != nil {
			return nil, fmt.Errorf("group handlers: %w", err)
		}
		c.loader = l
	}
	if c.inval == nil {
		c.inval = Invalidators(nil)
	}
	if c.notifier == nil {
		c.notifier = nopNotifier{}
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.joins = newJoinBatcher(c)
	return &Handlers{
		CreateGroup: CreateGroupHandler{c}, UpdateGroupProfile: UpdateGroupProfileHandler{c},
		UpdateGroupSettings: UpdateGroupSettingsHandler{c}, UpdateAnnouncement: UpdateAnnouncementHandler{c},
		InviteMember: InviteMemberHandler{c}, AcceptInvite: AcceptInviteHandler{c}, RequestJoin: RequestJoinHandler{c},
		ApproveJoin: ApproveJoinHandler{c}, RejectJoin: RejectJoinHandler{c}, JoinGroup: JoinGroupHandler{c},
		JoinOnLink: JoinOnLinkHandler{c},
		LeaveGroup: LeaveGroupHandler{c}, RemoveMember: RemoveMemberHandler{c}, UnbanMember: UnbanMemberHandler{c},
		SetRole: SetRoleHandler{c}, TransferOwnership: TransferOwnershipHandler{c}, MuteMember: MuteMemberHandler{c},
		UnmuteMember: UnmuteMemberHandler{c}, DissolveGroup: DissolveGroupHandler{c},
		RequestFriend: RequestFriendHandler{c}, AcceptFriend: AcceptFriendHandler{c},
		DeclineFriend: DeclineFriendHandler{c}, RemoveFriend: RemoveFriendHandler{c},
		BlockUser: BlockUserHandler{c}, UnblockUser: UnblockUserHandler{c},
		UpdateProfile: UpdateProfileHandler{c},
	}, nil
}

// core is what every handler shares.
type core struct {
	cfg      Config
	store    Store
	ids      IDGenerator
	loader   *Loader
	inval    Invalidator
	notifier Notifier
	changes  ChangeListener // nil: none
	sealer   domain.Sealer  // nil: nothing is sealed
	now      func() time.Time
	locks    *stripes
	joins    *joinBatcher
}

// checkActor validates the principal a command names.
func checkActor(p domain.Principal) error {
	if p.Tenant.IsZero() {
		return &domain.ValidationError{Field: "tenant_id", Reason: "required"}
	}
	if p.User <= 0 {
		return &domain.ValidationError{Field: "user_id", Reason: "required"}
	}
	return nil
}

// checkGroup validates a group id a command names.
func checkGroup(g domain.GroupID) error {
	if g <= 0 {
		return &domain.ValidationError{Field: "group_id", Reason: "bad_format", Detail: "a positive 64-bit number"}
	}
	return nil
}

// checkUser validates a user id a command names in field.
func checkUser(field string, u domain.UserID) error {
	if u <= 0 {
		return &domain.ValidationError{Field: field, Reason: "bad_format", Detail: "a positive 64-bit number"}
	}
	return nil
}

// group loads a group state for a command: always read from the store (from the cached version on).
func (c *core) group(ctx context.Context, tenant domain.TenantID, g domain.GroupID) (domain.GroupState, error) {
	return c.loader.Group(ctx, tenant, g, 0)
}

// member loads a membership state for a command.
func (c *core) member(ctx context.Context, tenant domain.TenantID, g domain.GroupID, u domain.UserID) (domain.MembershipState, error) {
	return c.loader.Membership(ctx, tenant, g, u, 0)
}

// groupAndMembers loads a group and the memberships of users in it.
func (c *core) groupAndMembers(ctx context.Context, tenant domain.TenantID, g domain.GroupID, users ...domain.UserID) (domain.GroupState, []domain.MembershipState, error) {
	gs, err := c.group(ctx, tenant, g)
	if err != nil {
		return domain.GroupState{}, nil, err
	}
	ms := make([]domain.MembershipState, len(users))
	for i, u := range users {
		if ms[i], err = c.member(ctx, tenant, g, u); err != nil {
			return domain.GroupState{}, nil, err
		}
	}
	return gs, ms, nil
}

// selfDecider decides a command of the actor about its own membership in g.
type selfDecider func(g domain.GroupState, actor domain.MembershipState, now time.Time) ([]domain.PendingEvent, error)

// onSelf loads the group and the actor's membership and decides with fn.
func (c *core) onSelf(p domain.Principal, group domain.GroupID, fn selfDecider) decideFunc {
	return func(ctx context.Context) (decision, error) {
		g, ms, err := c.groupAndMembers(ctx, p.Tenant, group, p.User)
		if err != nil {
			return decision{}, err
		}
		d := groupDecision(group, nil)
		d.reads = membershipReads(ms...)
		d.events, err = fn(g, ms[0], c.now())
		return d, err
	}
}

// memberDecider decides a command of the actor about target's membership in g.
type memberDecider func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error)

// onMember loads the group, the actor's and the target's memberships and decides with fn. With
// guarded, a lost race after which either membership moved surfaces as a *ConflictError instead
// of being decided again.
func (c *core) onMember(p domain.Principal, group domain.GroupID, target domain.UserID, guarded bool, fn memberDecider) decideFunc {
	return func(ctx context.Context) (decision, error) {
		g, ms, err := c.groupAndMembers(ctx, p.Tenant, group, p.User, target)
		if err != nil {
			return decision{}, err
		}
		d := groupDecision(group, nil)
		d.reads = membershipReads(ms...)
		if guarded {
			d.guard = []int64{ms[0].Version(), ms[1].Version()}
		}
		d.events, err = fn(g, ms[0], ms[1], c.now())
		return d, err
	}
}

// membershipReads are the versions of the memberships a decision was made on: whatever the
// command writes, it commits only while the actor's role and the target's standing are still
// those it saw.
func membershipReads(ms ...domain.MembershipState) []StreamVersion {
	out := make([]StreamVersion, len(ms))
	for i, m := range ms {
		out[i] = StreamVersion{StreamID: m.StreamID(), Version: m.Version()}
	}
	return out
}

// relationDecider decides a command of the actor about its relation with a peer.
type relationDecider func(r domain.RelationState, now time.Time) ([]domain.PendingEvent, error)

// onRelation loads the relation of the actor and peer and decides with fn.
func (c *core) onRelation(p domain.Principal, peer domain.UserID, fn relationDecider) decideFunc {
	return func(ctx context.Context) (decision, error) {
		r, err := c.loader.Relation(ctx, p.Tenant, p.User, peer, 0)
		if err != nil {
			return decision{}, err
		}
		topic, err := domain.DirectTopic(p.User, peer)
		if err != nil {
			return decision{}, err
		}
		events, err := fn(r, c.now())
		return decision{events: events, topic: topic, bizID: r.StreamID()}, err
	}
}

// relationSpec validates a relation command and returns how it runs.
func relationSpec(op string, p domain.Principal, peer domain.UserID, meta Meta) (spec, error) {
	if err := checkUser("peer", peer); err != nil {
		return spec{}, err
	}
	if peer == p.User {
		return spec{}, &domain.ValidationError{Field: "peer", Reason: "self_relation", Detail: "a relation needs two distinct users"}
	}
	return spec{op: op, actor: p, meta: meta}, nil
}
