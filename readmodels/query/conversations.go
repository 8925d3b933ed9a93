package query

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// Conversation list page sizes.
const (
	DefaultConversations = 20
	MaxConversations     = 100
)

// Conversation kinds.
const (
	KindGroup  = "group"
	KindDirect = "direct"
)

// GroupMemberships lists the groups a user is a current member of; *business.Store implements it.
type GroupMemberships interface {
	UserMemberships(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]business.UserMembership, error)
}

var _ GroupMemberships = (*business.Store)(nil)

// ConversationQuery selects a page of a user's conversation list.
type ConversationQuery struct {
	Cursor string // the NextCursor of the previous page; "" for the first
	Limit  int    // default DefaultConversations, at most MaxConversations
}

// Conversation is one entry of a user's conversation list.
type Conversation struct {
	Topic       string
	Kind        string         // KindGroup or KindDirect
	Group       domain.GroupID // groups: the group
	Name        string         // groups: the group's name
	Role        domain.Role    // groups: the user's role
	MemberCount int            // groups: current members
	Peer        domain.UserID  // 1:1: the other party
	PeerReadSeq int64          // 1:1: the other party's read seq, for read receipts
	LastSeq     int64          // the topic's watermark
	ReadSeq     int64          // the user's read seq
	Unread      int64          // LastSeq - ReadSeq, never negative
	Mentions    int64          // unread messages that mention the user (or all)
	// LastMessage is the newest message up to LastSeq the user has not deleted for themselves;
	// nil when there is none. A recalled one is a placeholder without content.
	LastMessage *Message
	// ActiveAt orders the list: the time of the row at LastSeq (the last message), or of the
	// newest row below it while MySQL trails the watermark Redis answered, or the time the user
	// joined the group when that is later; a 1:1 chat without messages in place yet takes the
	// time of the user's read mark in it.
	ActiveAt time.Time
}

// ConversationPage is one page of a conversation list, most recently active first.
type ConversationPage struct {
	Conversations []Conversation
	NextCursor    string // "" after the last page
}

// ConversationReader answers conversation lists from the read models. It is safe for concurrent
// use.
type ConversationReader struct {
	r      *Reader
	groups GroupMemberships
}

// NewConversationReader returns a ConversationReader over r's stores and the group memberships
// of groups.
func NewConversationReader(r *Reader, groups GroupMemberships) *ConversationReader {
	return &ConversationReader{r: r, groups: groups}
}

// Conversations returns a page of user's conversations: every group the user is a current
// member of and every 1:1 topic the user has a read mark in (sent, received or read), most
// recently active first (ties by topic name). Unread counts are as Unread answers them (Redis
// where cached, MySQL otherwise); the last message and the mention count come from MySQL, for
// the page's entries only. The order is computed at query time from the watermarks: an entry
// that becomes active between two pages moves to the top, where a client that refreshes the
// first page finds it.
// Errors: a bad cursor or limit wraps domain.ErrInvalid; MySQL unreachable, domain.ErrRetryable;
// an unprovisioned tenant, domain.ErrNotFound.
func (c *ConversationReader) Conversations(ctx context.Context, tenant domain.TenantID, user domain.UserID, q ConversationQuery) (ConversationPage, error) {
	if q.Limit < 0 {
		return ConversationPage{}, fmt.Errorf("conversations: %w", &domain.ValidationError{Field: "limit", Reason: "out_of_range", Detail: "0 to 100"})
	}
	if q.Limit == 0 {
		q.Limit = DefaultConversations
	}
	q.Limit = min(q.Limit, MaxConversations)
	after, err := parseConversationCursor(q.Cursor)
	if err != nil {
		return ConversationPage{}, fmt.Errorf("conversations: %w", err)
	}
	all, err := c.collect(ctx, tenant, user)
	if err != nil {
		return ConversationPage{}, fmt.Errorf("conversations: %w", err)
	}
	slices.SortFunc(all, func(a, b Conversation) int {
		if d := b.ActiveAt.Compare(a.ActiveAt); d != 0 {
			return d
		}
		return cmp.Compare(a.Topic, b.Topic)
	})
	start := 0
	if after != nil {
		start = len(all)
		for i, cv := range all {
			if after.before(cv) {
				start = i
				break
			}
		}
	}
	end := min(start+q.Limit, len(all))
	page := ConversationPage{Conversations: all[start:end]}
	if end < len(all) && end > start {
		page.NextCursor = cursorOf(all[end-1])
	}
	for i := range page.Conversations {
		if err := c.decorate(ctx, tenant, user, &page.Conversations[i]); err != nil {
			return ConversationPage{}, fmt.Errorf("conversations: %w", err)
		}
	}
	return page, nil
}

// Unread is Reader.Unread.
func (c *ConversationReader) Unread(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) (int64, error) {
	return c.r.Unread(ctx, tenant, user, topic)
}

// UnreadTotal is Reader.UnreadTotal over the topics of user's conversation list: a group the
// user left or was removed from is not counted (its messages would count for ever, and the user
// may no longer mark them read), nor is a 1:1 topic of others.
func (c *ConversationReader) UnreadTotal(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int64, map[string]int64, error) {
	memberships, err := c.groups.UserMemberships(ctx, tenant, user)
	if err != nil {
		return 0, nil, fmt.Errorf("unread total: %w", err)
	}
	groups := make(map[domain.GroupID]bool, len(memberships))
	for _, m := range memberships {
		groups[m.Group] = true
	}
	return c.r.unreadTotal(ctx, tenant, user, func(t domain.Topic) bool {
		if t.Kind() == domain.TopicDirect {
			return t.Has(user)
		}
		return t.Kind() == domain.TopicGroup && groups[domain.GroupID(t.GroupID())]
	})
}

// collect returns every conversation of user with its seqs, unread count and activity time.
func (c *ConversationReader) collect(ctx context.Context, tenant domain.TenantID, user domain.UserID) ([]Conversation, error) {
	r := c.r
	memberships, err := c.groups.UserMemberships(ctx, tenant, user)
	if err != nil {
		return nil, err
	}
	marks, err := r.store.ReadMarks(ctx, tenant, r.tables, user)
	if err != nil {
		return nil, err
	}
	out, topics, markAt := conversationsOf(user, memberships, marks)
	byTopic := map[string]*Conversation{}
	for i := range out {
		byTopic[out[i].Topic] = &out[i]
	}
	for _, m := range marks {
		if cv, ok := byTopic[m.Topic]; ok {
			cv.ReadSeq = m.ReadSeq
		}
	}
	cu := r.cache(tenant)
	for t, n := range cu.readSeqs(ctx, user) {
		if cv, ok := byTopic[t]; ok {
			cv.ReadSeq = max(cv.ReadSeq, n)
		}
	}
	last, err := cu.lastSeqs(ctx, topics)
	if err != nil {
		return nil, err
	}
	at := make(map[domain.Topic]int64, len(topics))
	for _, t := range topics {
		cv := byTopic[t.String()]
		cv.LastSeq = last[t.String()]
		cv.Unread = max(cv.LastSeq-cv.ReadSeq, 0)
		at[t] = cv.LastSeq
	}
	times, err := r.store.SeqTimes(ctx, tenant, r.tables, at)
	if err != nil {
		return nil, err
	}
	for topic, cv := range byTopic {
		ts, ok := times[topic]
		if !ok && cv.Kind == KindDirect {
			ts = markAt[topic]
		}
		if ts.After(cv.ActiveAt) {
			cv.ActiveAt = ts // a group joined after its last message stays as recent as the join
		}
	}
	return out, nil
}

// conversationsOf lists the conversations of user, without seqs: a group of each membership,
// active since the join, and a 1:1 chat of each of the user's read marks of a 1:1 topic, with
// the topics in the same order and the time of each 1:1 chat's read mark.
func conversationsOf(user domain.UserID, memberships []business.UserMembership, marks []msgstore.ReadMark) (
	out []Conversation, topics []domain.Topic, markAt map[string]time.Time) {
	for _, m := range memberships {
		t, err := m.Group.Topic()
		if err != nil {
			continue
		}
		topics = append(topics, t)
		out = append(out, Conversation{Topic: t.String(), Kind: KindGroup, Group: m.Group, Name: m.Name, Role: m.Role,
			MemberCount: m.MemberCount, ActiveAt: m.JoinedAt})
	}
	// A 1:1 chat without a message in place yet is as old as its read mark.
	markAt = map[string]time.Time{}
	for _, m := range marks {
		t, err := domain.ParseTopic(m.Topic)
		if err != nil || t.Kind() != domain.TopicDirect || !t.Has(user) {
			continue
		}
		topics = append(topics, t)
		out = append(out, Conversation{Topic: t.String(), Kind: KindDirect, Peer: t.Peer(user)})
		markAt[m.Topic] = m.UpdatedAt.UTC()
	}
	return out, topics, markAt
}

// decorate adds the last message and the mention count of one entry.
func (c *ConversationReader) decorate(ctx context.Context, tenant domain.TenantID, user domain.UserID, cv *Conversation) error {
	if cv.LastSeq <= 0 {
		return nil
	}
	r := c.r
	t, err := domain.ParseTopic(cv.Topic)
	if err != nil {
		return err
	}
	msgs, _, err := r.store.Page(ctx, tenant, r.tables, msgstore.PageQuery{Topic: t, Viewer: user, UpTo: cv.LastSeq, Limit: 1, Newest: true})
	if err != nil {
		return err
	}
	if len(msgs) > 0 {
		cv.LastMessage = &msgs[0]
	}
	if cv.Kind == KindDirect {
		m, _, err := r.store.ReadMarkOf(ctx, tenant, r.tables, cv.Peer, t)
		if err != nil {
			return err
		}
		cv.PeerReadSeq = m.ReadSeq
	}
	if cv.Unread > 0 {
		if cv.Mentions, err = r.store.MentionCount(ctx, tenant, r.tables, t, user, cv.ReadSeq, cv.LastSeq); err != nil {
			return err
		}
	}
	return nil
}

// conversationCursor is a position in the list: after the entry active at at with topic.
type conversationCursor struct {
	at    time.Time
	topic string
}

// before reports whether cv comes after the cursor's entry in list order.
func (k *conversationCursor) before(cv Conversation) bool {
	if d := k.at.Compare(cv.ActiveAt); d != 0 {
		return d > 0
	}
	return cv.Topic > k.topic
}

func cursorOf(cv Conversation) string {
	return base64.RawURLEncoding.EncodeToString([]byte("c1:" + strconv.FormatInt(cv.ActiveAt.UnixMicro(), 10) + ":" + cv.Topic))
}

func parseConversationCursor(s string) (*conversationCursor, error) {
	if s == "" {
		return nil, nil
	}
	bad := &domain.ValidationError{Field: "cursor", Reason: "bad_format", Detail: "not a cursor this list returned"}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	parts := strings.SplitN(string(raw), ":", 3)
	if len(parts) != 3 || parts[0] != "c1" {
		return nil, bad
	}
	us, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil, bad
	}
	if _, err := domain.ParseTopic(parts[2]); err != nil {
		return nil, bad
	}
	return &conversationCursor{at: time.UnixMicro(us).UTC(), topic: parts[2]}, nil
}
