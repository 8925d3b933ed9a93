package ws

import (
	"context"
	"net/http"

	"github.com/imledger/imledger/domain"
)

// reconcileItems is how many of the last items of a user's log a sub of the channel applies over
// the state the read models gave: they may trail the last membership changes and blocks.
const reconcileItems = 256

// maxEpochLen bounds the epoch a get of the channel names.
const maxEpochLen = 64

// channelServed reports whether the gateway serves the channel; if not it answers frame id 501.
func (s *session) channelServed(id string) bool {
	if s.g.deps.Channel == nil || s.g.deps.ChannelState == nil {
		s.refuse(errCtrl(id, http.StatusNotImplemented, ReasonNotImplemented, "the per-user channel is not served here"))
		return false
	}
	return true
}

// channelHead answers frame id with the channel log's head: its epoch and last seq.
func (s *session) channelHead(ctx context.Context, id string) error {
	p, err := s.g.deps.Channel.Read(ctx, s.tenant, s.user, "", 0, 0)
	if err != nil {
		return err
	}
	s.sendCtrl(ctrl{ID: id, Code: http.StatusOK, Text: "ok", Params: map[string]any{
		"topic": ChannelTopic, "epoch": p.Epoch, "last_seq": formatSeq(p.LastSeq),
	}})
	return nil
}

// onSubMe puts the session on its user's channel: from the answer on it gets every new item of
// the user's log (me frames with a seq) and the channel frames of every message of the user's
// conversations it is not subscribed to. The answer carries the log's epoch and last seq, so the
// client knows where live items continue what a get of "me" reads. Subscribing again answers
// the head again. It counts against the sub/leave limit, not against MaxTopicsPerSession.
func (s *session) onSubMe(ctx context.Context, f topicFrame) {
	if !s.channelServed(f.ID) {
		return
	}
	if s.chanOn {
		if err := s.channelHead(ctx, f.ID); err != nil {
			s.fail(ctx, f.ID, err)
		}
		return
	}
	if err := s.allowSubLeave(); err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	groups, muted, err := s.channelStart(ctx)
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	// Register the user's channel before reading the log's head: an item appended after it is
	// delivered live, one before it is at or below the head the client catches up to. Presence
	// first, then the hub: the hub's items may register the session's groups in presence, which
	// takes them only from a session on its channel there.
	if s.pres != nil {
		if err := s.pres.ChannelOn(ctx, nil); err != nil {
			s.g.log.WarnContext(ctx, "ws: channel registration failed; the heartbeat retries", "tenant_id", s.tenant.String(), "err", err)
		}
	}
	hub := s.g.deps.Hub
	hub.channelOn(s, groups, muted)
	s.chanOn = true
	tail, err := s.g.deps.Channel.Tail(ctx, s.tenant, s.user, reconcileItems)
	if err == nil {
		hub.reconcile(s, s.user, tail)
	}
	if err == nil {
		s.syncWatch(ctx)
		err = s.channelHead(ctx, f.ID)
	}
	if err != nil {
		s.channelStop(ctx)
		s.fail(ctx, f.ID, err)
	}
}

// channelStart reads what the session's channel starts from: the user's group topics and the
// 1:1 topics with the users who block the user.
func (s *session) channelStart(ctx context.Context) (groups, muted []domain.Topic, err error) {
	st := s.g.deps.ChannelState
	gids, err := st.UserGroups(ctx, s.tenant, s.user)
	if err != nil {
		return nil, nil, err
	}
	blockers, err := st.BlockedBy(ctx, s.tenant, s.user)
	if err != nil {
		return nil, nil, err
	}
	groups = make([]domain.Topic, 0, len(gids))
	for _, g := range gids {
		if t, err := g.Topic(); err == nil {
			groups = append(groups, t)
		}
	}
	for _, b := range blockers {
		if t, err := domain.DirectTopic(s.user, b); err == nil {
			muted = append(muted, t)
		}
	}
	return groups, muted, nil
}

// channelStop takes the session off its user's channel, in the hub and in presence.
func (s *session) channelStop(ctx context.Context) {
	s.g.deps.Hub.channelOff(s)
	s.chanOn = false
	if s.pres == nil {
		return
	}
	s.chanSync.Lock()
	defer s.chanSync.Unlock()
	if err := s.pres.ChannelOff(ctx); err != nil {
		s.g.log.WarnContext(ctx, "ws: channel deregistration failed", "tenant_id", s.tenant.String(), "err", err)
	}
	s.presWatched = nil
}

// onLeaveMe takes the session off its user's channel; leaving it when not on it is answered 200.
func (s *session) onLeaveMe(ctx context.Context, f topicFrame) {
	if s.chanOn {
		if err := s.allowSubLeave(); err != nil {
			s.fail(ctx, f.ID, err)
			return
		}
		s.channelStop(ctx)
	}
	s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusOK, Text: "ok", Params: map[string]any{"topic": ChannelTopic}})
}

// onGetMe answers a get of the channel: the items of the user's log after after_seq of epoch, one
// me frame each, then a ctrl with the count, the log's epoch and last seq and whether more
// follow; or, when the log no longer holds every item after that position (trimmed, expired,
// another epoch), only a ctrl 205 resync with the log's epoch and last seq: the client re-reads
// what items are about (conversations, friend requests, invitations) from REST and goes on from
// there. It needs no sub of "me".
func (s *session) onGetMe(ctx context.Context, f getFrame) {
	if !s.channelServed(f.ID) {
		return
	}
	after, err := f.AfterSeq.value("after_seq")
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	before, err := f.BeforeSeq.value("before_seq")
	switch {
	case err != nil:
		s.fail(ctx, f.ID, err)
		return
	case before != 0:
		s.fail(ctx, f.ID, &domain.ValidationError{Field: "before_seq", Reason: "unsupported", Detail: "the channel is read forward, after a seq"})
		return
	case len(f.Epoch) > maxEpochLen:
		s.fail(ctx, f.ID, &domain.ValidationError{Field: "epoch", Reason: "too_long", Detail: "at most 64 bytes"})
		return
	case f.Limit < 0:
		s.fail(ctx, f.ID, &domain.ValidationError{Field: "limit", Reason: "bad_format", Detail: "non-negative"})
		return
	}
	limit := f.Limit
	if limit == 0 {
		limit = s.g.cfg.HistoryDefaultLimit
	}
	limit = min(limit, s.g.cfg.HistoryMaxLimit)
	page, err := s.g.deps.Channel.Read(ctx, s.tenant, s.user, f.Epoch, after, limit)
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	params := map[string]any{"topic": ChannelTopic, "epoch": page.Epoch, "last_seq": formatSeq(page.LastSeq)}
	if page.Resync {
		params["resync"] = true
		s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusResetContent, Text: "resync", Params: params})
		return
	}
	for _, e := range page.Entries {
		s.send(encodeMe(e.Body))
	}
	params["count"], params["has_more"] = len(page.Entries), page.HasMore
	s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusOK, Text: "ok", Params: params})
}
