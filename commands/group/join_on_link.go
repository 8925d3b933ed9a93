package group

import (
	"context"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// JoinOnLink asks for the actor to join Group on an invite link (a join_group action token)
// that Inviter issued.
type JoinOnLink struct {
	Actor   domain.Principal
	Group   domain.GroupID
	Inviter domain.UserID // who issued the link
	Meta    Meta
}

// JoinOnLinkHandler handles JoinOnLink.
type JoinOnLinkHandler struct{ c *core }

// Handle appends member.joined.v1 (via invite, by the inviter) and the group's member count
// change in one transaction, with or without join approval, while the inviter may still invite.
// Joins into one group are serialised on this node. Errors: domain.ErrNotFound;
// *domain.DeniedError group_dissolved, already_member, banned, group_full, and not_member,
// not_admin, not_owner for an inviter who may no longer invite; domain.ErrConcurrency after
// Config.MaxAttempts lost races; domain.ErrRetryable.
func (h JoinOnLinkHandler) Handle(ctx context.Context, cmd JoinOnLink) (Result, error) {
	s, decide, err := h.plan(cmd)
	if err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, decide)
}

// Check decides cmd without writing anything: nil when Handle would admit the actor now, or
// the error it would give. A caller that spends something on the join (a one-time token) checks
// first, so a join that cannot happen does not spend it.
func (h JoinOnLinkHandler) Check(ctx context.Context, cmd JoinOnLink) error {
	s, decide, err := h.plan(cmd)
	if err == nil {
		err = checkActor(s.actor)
	}
	if err == nil {
		_, err = decide(ctx)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", s.op, err)
	}
	return nil
}

func (h JoinOnLinkHandler) plan(cmd JoinOnLink) (spec, decideFunc, error) {
	s := spec{op: "join on link", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group), serial: true}
	if err := checkGroup(cmd.Group); err != nil {
		return s, nil, err
	}
	if err := checkUser("inviter", cmd.Inviter); err != nil {
		return s, nil, err
	}
	return s, h.c.onMember(cmd.Actor, cmd.Group, cmd.Inviter, false,
		func(g domain.GroupState, joiner, inviter domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.JoinOnLink(cmd.Actor, joiner, inviter, h.c.cfg.MaxMembers, now)
		}), nil
}

// CheckInviter reports whether p may issue an invite link of group now, that is may invite into
// it: nil, or *domain.DeniedError group_dissolved, not_member, not_admin, not_owner;
// domain.ErrNotFound for a group never created.
func (h JoinOnLinkHandler) CheckInviter(ctx context.Context, p domain.Principal, group domain.GroupID) error {
	if err := checkGroup(group); err != nil {
		return err
	}
	if err := checkActor(p); err != nil {
		return err
	}
	g, ms, err := h.c.groupAndMembers(ctx, p.Tenant, group, p.User)
	if err != nil {
		return err
	}
	return g.MayInvite(p, ms[0], h.c.now())
}
