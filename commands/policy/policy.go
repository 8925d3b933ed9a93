package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

// Deps are the collaborators of a Policy.
type Deps struct {
	// Store is the event store the cache fills from. Required unless Loader is given.
	Store group.StreamReader
	// Loader is a cache of folded states to use instead of building one; sharing the command
	// handlers' Loader lets their commits fold straight into it.
	Loader *group.Loader
	// Source delivers other nodes' invalidations to Run. nil: single node, TTL only.
	Source Source
	// Logger receives subscription failures. Default: discard.
	Logger *slog.Logger
	// Now is the clock mutes are compared with. Default time.Now.
	Now func() time.Time
}

// Policy decides whether a user may post to a topic (it implements message.SendPolicy):
//
//   - group topics: the group exists and is not dissolved, the sender is a current member, not
//     muted at this moment, and not a plain member under mute-all (domain.CanPost);
//   - 1:1 topics: the sender is one of the two users, the peer exists in the tenant
//     (group.Loader.UserExists) and does not block the sender (domain.CanSendDirect).
//
// It answers from cached folded states and reads the store only on a miss, after an
// invalidation, or when the state was last confirmed TTL or longer ago.
//
// Staleness guarantee. An answer at time t reflects every event of the streams it consulted that
// was committed
//
//   - before t − TTL, always (each cached state is confirmed by a store read that began less
//     than TTL before it is used, and that read sees every commit before it began);
//   - before Invalidate returned, for every Invalidate that returned before the check began:
//     a command handler of this node invalidates before its Handle returns, so a removal, block,
//     mute or mute-all takes effect on this node's sends the moment the command answers; an
//     invalidation that crosses a read in progress makes that read's result stale too;
//   - before another node published an invalidation that Run delivered before the check began:
//     on other nodes a change takes effect after the channel's delivery latency, and after at
//     most TTL if the message is lost or the subscription is down.
//
// Mutes end by the clock, compared at every check, so an expired mute needs no invalidation.
// Nothing here is a lock: a send that passed the check just before a removal committed may
// still be appended after it.
type Policy struct {
	cfg    Config
	loader *group.Loader
	source Source
	log    *slog.Logger
	now    func() time.Time
}

var (
	_ message.SendPolicy = (*Policy)(nil)
	_ group.Invalidator  = (*Policy)(nil)
)

// New validates cfg and returns a Policy.
func New(deps Deps, cfg Config) (*Policy, error) {
	cfg.setDefaults()
	var errs []error
	if deps.Store == nil && deps.Loader == nil {
		errs = append(errs, errors.New("store or loader is required"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("send policy: %w", err)
	}
	p := &Policy{cfg: cfg, loader: deps.Loader, source: deps.Source, log: deps.Logger, now: deps.Now}
	if p.loader == nil {
		l, err := group.NewLoader(deps.Store, cfg.Cache)
		if err != nil {
			return nil, fmt.Errorf("send policy: %w", err)
		}
		p.loader = l
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// CanSend returns nil when from may post to topic now. Refusals are *domain.DeniedError values:
// tenant_mismatch, group_dissolved, not_member, muted, group_muted for group topics; blocked,
// not_party for 1:1 topics. A group never created in the tenant is domain.ErrNotFound, and so is
// a 1:1 peer who does not exist in the tenant (group.ErrUnknownUser). A state
// that could not be read is a domain.ErrRetryable error; bad ids are *domain.ValidationError.
func (p *Policy) CanSend(ctx context.Context, tenant domain.TenantID, from domain.UserID, topic domain.Topic) error {
	switch topic.Kind() {
	case domain.TopicGroup:
		return p.canPost(ctx, tenant, from, domain.GroupID(topic.GroupID()))
	case domain.TopicDirect:
		if !topic.Has(from) {
			return domain.Deny(domain.ReasonNotParty)
		}
		peer := topic.Peer(from)
		exists, err := p.loader.UserExists(ctx, tenant, peer)
		if err != nil {
			return fmt.Errorf("send policy: %w", err)
		}
		if !exists {
			return fmt.Errorf("send policy: peer %d: %w", peer, group.ErrUnknownUser)
		}
		rel, err := p.loader.Relation(ctx, tenant, from, peer, p.cfg.TTL)
		if err != nil {
			return fmt.Errorf("send policy: %w", err)
		}
		return domain.CanSendDirect(rel, from)
	}
	return &domain.ValidationError{Field: "topic", Reason: "required"}
}

func (p *Policy) canPost(ctx context.Context, tenant domain.TenantID, from domain.UserID, id domain.GroupID) error {
	g, err := p.loader.Group(ctx, tenant, id, p.cfg.TTL)
	if err != nil {
		return fmt.Errorf("send policy: %w", err)
	}
	var m domain.MembershipState
	if g.Exists() && !g.Dissolved() {
		m, err = p.loader.Membership(ctx, tenant, id, from, p.cfg.TTL)
	} else {
		m, err = domain.NewMembershipState(tenant, id, from)
	}
	if err != nil {
		return fmt.Errorf("send policy: %w", err)
	}
	return domain.CanPost(g, m, p.now())
}

// Invalidate marks the cached states of the streams stale (group.Invalidator). Command
// handlers of this node call it after each commit, through a Broadcaster.
func (p *Policy) Invalidate(ctx context.Context, tenant domain.TenantID, streamIDs []string) {
	p.loader.Invalidate(ctx, tenant, streamIDs)
}

// Stats returns the cache's hit and read counters.
func (p *Policy) Stats() group.LoaderStats { return p.loader.Stats() }

// Run applies other nodes' invalidations from the Source until ctx ends, then returns nil.
// Before each subscription (the first one and every one after a failure) it marks the whole
// cache stale, because keys published while it was not subscribed are lost. Without a Source
// it waits for ctx.
func (p *Policy) Run(ctx context.Context) error {
	if p.source == nil {
		<-ctx.Done()
		return nil
	}
	for {
		p.loader.InvalidateAll()
		err := p.source.Subscribe(ctx, func(k Key) { p.apply(ctx, k) })
		if ctx.Err() != nil {
			return nil
		}
		p.log.WarnContext(ctx, "cache invalidation subscription ended; resubscribing", "error", err)
		t := time.NewTimer(p.cfg.ResubscribeBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// apply handles one key from the Source.
func (p *Policy) apply(ctx context.Context, k Key) {
	if k.Tenant.IsZero() || k.StreamID == "" {
		return
	}
	p.loader.Invalidate(ctx, k.Tenant, []string{k.StreamID})
}
