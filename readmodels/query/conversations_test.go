package query_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/query"
)

// TestConversationPagesAndCounts lists a user's 1:1 chats by their last message, newest first
// with ties by topic, page by page without repeats or gaps, with unread and mention counts from
// Redis and from MySQL alike.
func TestConversationPagesAndCounts(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	biz, err := business.NewStore(f.router, nil, business.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Peer 30+i sends n[i] messages to user 20; rmtest puts seq s at SentAt + s ms, so a chat's
	// last message is as recent as its message count.
	counts := []int64{1, 3, 2, 3, 1}
	for i, n := range counts {
		topic := fmt.Sprintf("p2p20_%d", 30+i)
		for seq := int64(1); seq <= n; seq++ {
			f.both(ctx, t, rmtest.Sent(t, f.tenant, topic, seq, domain.UserID(30+i), "m"))
		}
	}
	mention := rmtest.Sent(t, f.tenant, "p2p20_33", 4, 33, "@20")
	f.both(ctx, t, rmtest.WithHead(t, mention, domain.Head{Mentions: []domain.UserID{20}}))
	f.both(ctx, t, rmtest.ReadMarked(t, f.tenant, "p2p20_31", 20, 3, 3))
	// The user has read everything in p2p20_32, but only Redis knows yet.
	f.redisOnly(ctx, t, rmtest.ReadMarked(t, f.tenant, "p2p20_32", 20, 2, 2))

	want := "p2p20_33 p2p20_31 p2p20_32 p2p20_30 p2p20_34"
	for name, r := range map[string]*query.Reader{"cached": f.cached, "mysql": f.mysql} {
		cr := query.NewConversationReader(r, biz)
		var got []string
		unread := map[string]int64{}
		mentions := map[string]int64{}
		cursor := ""
		for page := 0; page < 10; page++ {
			p, err := cr.Conversations(ctx, f.tenant, 20, query.ConversationQuery{Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(p.Conversations) > 2 {
				t.Fatalf("%s: page of %d", name, len(p.Conversations))
			}
			for _, c := range p.Conversations {
				got = append(got, c.Topic)
				unread[c.Topic], mentions[c.Topic] = c.Unread, c.Mentions
				if c.Kind != query.KindDirect || c.Peer == 0 || c.LastMessage == nil || c.LastMessage.Seq != c.LastSeq {
					t.Fatalf("%s: entry %+v", name, c)
				}
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("%s: pages list %q, want %q", name, got, want)
		}
		wantUnread := map[string]int64{"p2p20_30": 1, "p2p20_31": 0, "p2p20_32": 0, "p2p20_33": 4, "p2p20_34": 1}
		if name == "mysql" {
			wantUnread["p2p20_32"] = 2 // MySQL has not seen the read mark
		}
		if fmt.Sprint(unread) != fmt.Sprint(wantUnread) || mentions["p2p20_33"] != 1 || mentions["p2p20_30"] != 0 {
			t.Fatalf("%s: unread %v (want %v), mentions %v", name, unread, wantUnread, mentions)
		}
	}

	cr := query.NewConversationReader(f.mysql, biz)
	for _, q := range []query.ConversationQuery{{Cursor: "nope"}, {Limit: -1}} {
		if _, err := cr.Conversations(ctx, f.tenant, 20, q); !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("query %+v: %v, want ErrInvalid", q, err)
		}
	}
	p, err := cr.Conversations(ctx, f.tenant, 99, query.ConversationQuery{})
	if err != nil || len(p.Conversations) != 0 || p.NextCursor != "" {
		t.Fatalf("a user without conversations: %+v, %v", p, err)
	}
}

// TestConversationOrderWhileMySQLTrailsRedis keeps a chat whose newest message Redis has
// projected and MySQL not yet ahead of a chat that was quieter: its place comes from the newest
// message MySQL holds, not from the older time of the user's read mark.
func TestConversationOrderWhileMySQLTrailsRedis(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	biz, err := business.NewStore(f.router, nil, business.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 3; seq++ {
		f.both(ctx, t, rmtest.Sent(t, f.tenant, "p2p20_30", seq, 30, "a"))
	}
	f.redisOnly(ctx, t, rmtest.Sent(t, f.tenant, "p2p20_30", 4, 30, "a4"))
	for seq := int64(1); seq <= 2; seq++ {
		f.both(ctx, t, rmtest.Sent(t, f.tenant, "p2p20_31", seq, 31, "b"))
	}
	cr := query.NewConversationReader(f.cached, biz)
	p, err := cr.Conversations(ctx, f.tenant, 20, query.ConversationQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.Conversations {
		got = append(got, fmt.Sprintf("%s@%d", c.Topic, c.LastSeq))
	}
	if want := "p2p20_30@4 p2p20_31@2"; strings.Join(got, " ") != want {
		t.Fatalf("list %q, want %q", got, want)
	}
	if a := p.Conversations[0]; !a.ActiveAt.Equal(rmtest.SentAt.Add(3*time.Millisecond)) || a.Unread != 4 {
		t.Fatalf("entry %+v: want active at the newest message MySQL holds (seq 3), unread 4", a)
	}
}
