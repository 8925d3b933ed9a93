package rest

import (
	"context"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/query"
)

// HistoryReader reads a page of a topic's history as viewer sees it; *query.Reader implements it.
type HistoryReader interface {
	History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q query.HistoryQuery) (query.HistoryPage, error)
}

// UnreadReader counts unread messages; *query.ConversationReader implements it (and
// *query.Reader, whose total also counts groups the user left).
type UnreadReader interface {
	Unread(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) (int64, error)
	UnreadTotal(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int64, map[string]int64, error)
}

var (
	_ HistoryReader = (*query.Reader)(nil)
	_ UnreadReader  = (*query.Reader)(nil)
)

// History is the data of a history answer.
type History struct {
	Topic    string    `json:"topic" doc:"The conversation topic"`
	Messages []Message `json:"messages" doc:"Messages in ascending seq order; recalled ones without content; ones the caller deleted left out"`
	LastSeq  string    `json:"last_seq" doc:"The topic's watermark (64-bit, as a string): every seq up to it is a message or a final hole, and no message above it is served; the caller caught up when it has every message up to it. A caller that saw a higher seq in a realtime frame asks again later"`
	HasMore  bool      `json:"has_more" doc:"More messages up to last_seq lie beyond this page: above it with after_seq, below it otherwise"`
}

type historyInput struct {
	TopicParam
	AfterSeq  string `query:"after_seq" doc:"Catch up: the lowest seqs above this one (exclusive)" example:"0"`
	BeforeSeq string `query:"before_seq" doc:"Scroll back: the highest seqs below this one (exclusive); neither bound means the latest messages"`
	Limit     int    `query:"limit" minimum:"0" maximum:"200" doc:"Page size, default 50, at most 200"`
}

// TopicUnread is the data of a topic's unread answer.
type TopicUnread struct {
	Topic  string `json:"topic" doc:"The conversation topic"`
	Unread string `json:"unread" doc:"Unread messages: the topic's watermark (see last_seq of the history) minus the caller's read seq (64-bit, as a string)"`
}

// UnreadSummary is the data of the caller's unread answer.
type UnreadSummary struct {
	Total  string            `json:"total" doc:"Unread messages over every topic the caller has a read mark in"`
	Topics map[string]string `json:"topics" doc:"Unread messages per topic, zeros included"`
}

func (a *API) registerHistory() {
	huma.Register(a.huma, a.build(op{id: "get-history", method: http.MethodGet, path: "/v1/im/topics/{topic}/messages",
		summary: "Read a topic's history", tag: "messages", errs: []int{http.StatusForbidden, http.StatusNotFound},
		desc: "A page of messages by seq, from the read models. Members of a group topic and the two parties of a 1:1 topic may read it."}),
		func(ctx context.Context, in *historyInput) (*reply[History], error) {
			p := principal(ctx)
			topic, err := a.readableTopic(ctx, p, in.Topic)
			if err != nil {
				return nil, err
			}
			q := query.HistoryQuery{Limit: in.Limit}
			if q.AfterSeq, err = seqParam("after_seq", in.AfterSeq); err != nil {
				return nil, a.fail(ctx, err)
			}
			if q.BeforeSeq, err = seqParam("before_seq", in.BeforeSeq); err != nil {
				return nil, a.fail(ctx, err)
			}
			page, err := a.h.History.History(ctx, p.Tenant, topic, p.User, q)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String(), "topic", topic.String())
			}
			return respond(ctx, http.StatusOK, History{Topic: topic.String(), Messages: messagesOf(page.Messages),
				LastSeq: strconv.FormatInt(page.LastSeq, 10), HasMore: page.HasMore}), nil
		})
}

func (a *API) registerUnread() {
	huma.Register(a.huma, a.build(op{id: "get-unread", method: http.MethodGet, path: "/v1/im/unread",
		summary: "Count the caller's unread messages", tag: "messages"}),
		func(ctx context.Context, _ *struct{}) (*reply[UnreadSummary], error) {
			p := principal(ctx)
			total, per, err := a.h.Unread.UnreadTotal(ctx, p.Tenant, p.User)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			topics := make(map[string]string, len(per))
			for t, n := range per {
				topics[t] = strconv.FormatInt(n, 10)
			}
			return respond(ctx, http.StatusOK, UnreadSummary{Total: strconv.FormatInt(total, 10), Topics: topics}), nil
		})
	huma.Register(a.huma, a.build(op{id: "get-topic-unread", method: http.MethodGet, path: "/v1/im/topics/{topic}/unread",
		summary: "Count the caller's unread messages in a topic", tag: "messages", errs: []int{http.StatusForbidden, http.StatusNotFound}}),
		func(ctx context.Context, in *TopicParam) (*reply[TopicUnread], error) {
			p := principal(ctx)
			topic, err := a.readableTopic(ctx, p, in.Topic)
			if err != nil {
				return nil, err
			}
			n, err := a.h.Unread.Unread(ctx, p.Tenant, p.User, topic)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String(), "topic", topic.String())
			}
			return respond(ctx, http.StatusOK, TopicUnread{Topic: topic.String(), Unread: strconv.FormatInt(n, 10)}), nil
		})
}

// readableTopic parses a topic and checks the read policy.
func (a *API) readableTopic(ctx context.Context, p Principal, name string) (domain.Topic, error) {
	topic, err := domain.ParseTopic(name)
	if err != nil {
		return domain.Topic{}, a.fail(ctx, err)
	}
	if err := a.h.ReadPolicy.CanRead(ctx, p.Tenant, p.User, topic); err != nil {
		return domain.Topic{}, a.fail(ctx, err, "tenant_id", p.Tenant.String(), "topic", topic.String())
	}
	return topic, nil
}

// seqParam parses an optional seq parameter: "" is 0.
func seqParam(field, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &domain.ValidationError{Field: field, Reason: "bad_format", Detail: "a non-negative 64-bit decimal number"}
	}
	return n, nil
}
