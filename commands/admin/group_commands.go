package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// GroupData is the result data of the group commands.
type GroupData struct {
	GroupID   string `json:"group_id"`
	Topic     string `json:"topic"`
	Unchanged bool   `json:"unchanged"`
}

func groupData(gid domain.GroupID, res group.Result) GroupData {
	t, _ := gid.Topic()
	return GroupData{GroupID: gid.String(), Topic: t.String(), Unchanged: res.Unchanged}
}

func (r run) groupMeta() group.Meta {
	return group.Meta{Actor: r.actor(), TraceID: r.TraceID, CausationID: r.causation()}
}

// maxOwnerAttempts bounds how often a group command looks up the owner again after the
// ownership moved under it.
const maxOwnerAttempts = 3

// asOwner runs fn with the authority of group gid's owner: the group handlers check the same
// rules as for the owner's own request, and the events name the administrator as their actor
// (and the owner in their by field). An ownership transfer that lands between the lookup and the
// command (not_owner) makes it look the owner up again.
func (d *dispatcher) asOwner(ctx context.Context, r run, gid domain.GroupID,
	fn func(g domain.GroupState, owner domain.Principal) (group.Result, error)) (group.Result, error) {
	if err := required("group_id", gid); err != nil {
		return group.Result{}, err
	}
	for attempt := 1; ; attempt++ {
		g, err := d.h.GroupStates.Group(ctx, r.tenant, gid, 0)
		if err != nil {
			return group.Result{}, err
		}
		switch {
		case !g.Exists():
			return group.Result{}, fmt.Errorf("group %s: %w", gid, domain.ErrNotFound)
		case g.Dissolved():
			return group.Result{}, domain.Deny(domain.ReasonGroupDissolved)
		}
		res, err := fn(g, domain.Principal{Tenant: r.tenant, User: g.Owner()})
		var denied *domain.DeniedError
		if errors.As(err, &denied) && denied.Reason == domain.ReasonNotOwner && attempt < maxOwnerAttempts {
			continue
		}
		return res, err
	}
}

func (d *dispatcher) groupDissolve(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.GroupPayload)
	if err := domain.CheckReason(p.Reason, false); err != nil {
		return nil, err
	}
	res, err := d.asOwner(ctx, r, p.GroupID, func(_ domain.GroupState, owner domain.Principal) (group.Result, error) {
		return d.h.Groups.DissolveGroup.Handle(ctx, group.DissolveGroup{Actor: owner, Group: p.GroupID, Meta: r.groupMeta()})
	})
	if err != nil {
		return nil, err
	}
	return groupData(p.GroupID, res), nil
}

func (d *dispatcher) groupMuteAll(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.GroupMuteAllPayload)
	res, err := d.asOwner(ctx, r, p.GroupID, func(_ domain.GroupState, owner domain.Principal) (group.Result, error) {
		return d.h.Groups.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: owner, Group: p.GroupID,
			Edit: func(s domain.GroupSettings) domain.GroupSettings {
				s.MuteAll = p.MuteAll
				return s
			}, Meta: r.groupMeta()})
	})
	if err != nil {
		return nil, err
	}
	return groupData(p.GroupID, res), nil
}

func (d *dispatcher) groupRemoveMember(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.GroupRemoveMemberPayload)
	if err := required("user_id", p.UserID); err != nil {
		return nil, err
	}
	res, err := d.asOwner(ctx, r, p.GroupID, func(g domain.GroupState, owner domain.Principal) (group.Result, error) {
		if p.UserID == owner.User {
			return group.Result{}, domain.Deny(domain.ReasonCannotRemoveOwner)
		}
		return d.h.Groups.RemoveMember.Handle(ctx, group.RemoveMember{Actor: owner, Group: p.GroupID, User: p.UserID,
			Ban: p.Ban, Meta: r.groupMeta()})
	})
	if err != nil {
		return nil, err
	}
	return groupData(p.GroupID, res), nil
}

func (d *dispatcher) groupTransfer(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.GroupTransferPayload)
	if err := required("to", p.To); err != nil {
		return nil, err
	}
	res, err := d.asOwner(ctx, r, p.GroupID, func(g domain.GroupState, owner domain.Principal) (group.Result, error) {
		if p.To == owner.User {
			return group.Result{Group: p.GroupID, Unchanged: true}, nil
		}
		return d.h.Groups.TransferOwnership.Handle(ctx, group.TransferOwnership{Actor: owner, Group: p.GroupID, To: p.To,
			Meta: r.groupMeta()})
	})
	if err != nil {
		return nil, err
	}
	return groupData(p.GroupID, res), nil
}

func (d *dispatcher) groupAnnounce(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.GroupAnnouncementPayload)
	res, err := d.asOwner(ctx, r, p.GroupID, func(g domain.GroupState, owner domain.Principal) (group.Result, error) {
		return d.h.Groups.UpdateAnnouncement.Handle(ctx, group.UpdateAnnouncement{Actor: owner, Group: p.GroupID,
			Text: p.Text, Meta: r.groupMeta()})
	})
	if err != nil {
		return nil, err
	}
	return groupData(p.GroupID, res), nil
}
