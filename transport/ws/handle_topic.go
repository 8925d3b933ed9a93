package ws

import (
	"context"
	"net/http"
	"strconv"

	"github.com/imledger/imledger/domain"
)

func formatSeq(n int64) string { return strconv.FormatInt(n, 10) }

// onSub subscribes the session to a topic: it receives the topic's data, info and pres frames
// from then on. Subscribing twice is answered 200 again. A sub of a new topic counts against the
// session's sub/leave limit (allowSubLeave).
func (s *session) onSub(ctx context.Context, f topicFrame) {
	if !s.authenticated(ctx, f.ID) {
		return
	}
	if f.Topic == ChannelTopic {
		s.onSubMe(ctx, f)
		return
	}
	t, ok := s.topicOf(ctx, f.ID, f.Topic)
	if !ok {
		return
	}
	okCtrl := ctrl{ID: f.ID, Code: http.StatusOK, Text: "ok", Params: map[string]any{"topic": t.String()}}
	if s.topics.Has(t.String()) {
		s.sendCtrl(okCtrl)
		return
	}
	if s.topics.Len() >= s.g.cfg.MaxTopicsPerSession {
		s.refuse(errCtrl(f.ID, http.StatusBadRequest, ReasonTooManyTopics, "too many topics on one connection"))
		return
	}
	if err := s.allowSubLeave(); err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	if err := s.admit(ctx, t); err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	s.topics.Set(t.String(), t)
	if s.pres != nil {
		if err := s.pres.Join(ctx, t); err != nil {
			// Local delivery works; other nodes learn about this member at the next refresh.
			s.g.log.WarnContext(ctx, "ws: presence join failed", "tenant_id", s.tenant.String(), "topic", t.String(), "err", err)
		}
	}
	s.publishPres(t, "on")
	s.sendCtrl(okCtrl)
}

// onLeave unsubscribes the session from a topic; leaving a topic not subscribed is answered 200.
// A leave of a subscribed topic counts against the session's sub/leave limit (allowSubLeave).
func (s *session) onLeave(ctx context.Context, f topicFrame) {
	if !s.authenticated(ctx, f.ID) {
		return
	}
	if f.Topic == ChannelTopic {
		s.onLeaveMe(ctx, f)
		return
	}
	t, ok := s.topicOf(ctx, f.ID, f.Topic)
	if !ok {
		return
	}
	if s.topics.Has(t.String()) {
		if err := s.allowSubLeave(); err != nil {
			s.fail(ctx, f.ID, err)
			return
		}
	}
	if s.topics.Delete(t.String()) {
		s.g.deps.Hub.leave(hubKey{s.tenant, t.String()}, s)
		if s.pres != nil {
			if err := s.pres.Leave(ctx, t); err != nil {
				s.g.log.WarnContext(ctx, "ws: presence leave failed", "tenant_id", s.tenant.String(), "topic", t.String(), "err", err)
			}
		}
		s.publishOff(ctx, []domain.Topic{t})
	}
	s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusOK, Text: "ok", Params: map[string]any{"topic": t.String()}})
}

// onGet answers a history query with one data frame per message, then a ctrl with the page's
// count, the topic's last seq and whether more messages match.
func (s *session) onGet(ctx context.Context, f getFrame) {
	if !s.authenticated(ctx, f.ID) {
		return
	}
	if f.Topic == ChannelTopic {
		s.onGetMe(ctx, f)
		return
	}
	t, ok := s.topicOf(ctx, f.ID, f.Topic)
	if !ok {
		return
	}
	if s.g.deps.History == nil {
		s.refuse(errCtrl(f.ID, http.StatusNotImplemented, ReasonNotImplemented, "history is not served here"))
		return
	}
	after, err := f.AfterSeq.value("after_seq")
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	before, err := f.BeforeSeq.value("before_seq")
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	limit := f.Limit
	switch {
	case limit < 0:
		s.fail(ctx, f.ID, &domain.ValidationError{Field: "limit", Reason: "bad_format", Detail: "non-negative"})
		return
	case limit == 0:
		limit = s.g.cfg.HistoryDefaultLimit
	case limit > s.g.cfg.HistoryMaxLimit:
		limit = s.g.cfg.HistoryMaxLimit
	}
	if err := s.g.deps.Policy.CanRead(ctx, s.tenant, s.user, t); err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	page, err := s.g.deps.History.History(ctx, s.tenant, t, s.user,
		HistoryQuery{AfterSeq: after, BeforeSeq: before, Limit: limit})
	if err != nil {
		s.fail(ctx, f.ID, err)
		return
	}
	for _, m := range page.Messages {
		s.send(dataFromHistory(m))
	}
	s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusOK, Text: "ok", Params: map[string]any{
		"topic": t.String(), "count": len(page.Messages), "last_seq": formatSeq(page.LastSeq), "has_more": page.HasMore,
	}})
}
