package userchan_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/userchan"
)

// directory answers a group's moderators and members from fixed lists: the read model's answers.
type directory struct {
	moderators, members []domain.UserID
}

func (d directory) Moderators(context.Context, domain.TenantID, domain.GroupID) ([]domain.UserID, error) {
	return d.moderators, nil
}

func (d directory) MemberIDs(context.Context, domain.TenantID, domain.GroupID) ([]domain.UserID, error) {
	return d.members, nil
}

// items returns the items of user's log as decoded JSON objects.
func items(t *testing.T, l *userchan.Log, user domain.UserID) []map[string]any {
	t.Helper()
	p, err := l.Read(testenv.Context(t), acme, user, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range p.Entries {
		var m map[string]any
		if err := json.Unmarshal(e.Body, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "ts")
		out = append(out, m)
	}
	return out
}

func whats(its []map[string]any) []string {
	var out []string
	for _, it := range its {
		out = append(out, it["what"].(string))
	}
	return out
}

// TestChangesAreLoggedForTheUsersTheyConcern checks who logs what: the member of a membership
// change, the owner and admins too for join requests, their rejection and an approved join, every
// member for a dissolution, both users for a relation change, nobody for a group's profile.
func TestChangesAreLoggedForTheUsersTheyConcern(t *testing.T) {
	t.Parallel()
	l, _, _ := newLog(t, userchan.Config{})
	ch, err := userchan.New(userchan.Deps{Log: l, Directory: directory{moderators: []domain.UserID{1, 2}, members: []domain.UserID{1, 2, 3, 5}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	g := domain.GroupID(40)
	ch.ChangesCommitted(ctx, acme, []group.Change{
		{Kind: group.ChangeGroupProfile, Group: g, By: 1},
		{Kind: group.ChangeJoinRequested, Group: g, User: 5, By: 5},
		{Kind: group.ChangeJoined, Group: g, User: 5, By: 2},
		{Kind: group.ChangeRoleSet, Group: g, User: 5, By: 1, Role: domain.RoleAdmin},
		{Kind: group.ChangeJoined, Group: g, User: 6, By: 6},
		{Kind: group.ChangeRemoved, Group: g, User: 3, By: 1},
		{Kind: group.ChangeFriendRequested, User: 7, Peer: 8, By: 7},
		{Kind: group.ChangeDissolved, Group: g, By: 1},
	})
	for _, tc := range []struct {
		user domain.UserID
		want []string
	}{
		{1, []string{"join_requested", "joined", "dissolved"}},
		{2, []string{"join_requested", "joined", "dissolved"}},
		{3, []string{"removed", "dissolved"}},
		{5, []string{"join_requested", "joined", "role", "dissolved"}},
		{6, []string{"joined"}},
		{7, []string{"friend_requested"}},
		{8, []string{"friend_requested"}},
		{9, nil},
	} {
		if got := whats(items(t, l, tc.user)); !slices.Equal(got, tc.want) {
			t.Errorf("user %d logged %v, want %v", tc.user, got, tc.want)
		}
	}
	five := items(t, l, 5)
	if five[1]["from"] != "2" || five[1]["src"] != "5" || five[1]["topic"] != "grp40" || five[2]["role"] != "admin" {
		t.Errorf("user 5's items %v", five)
	}
	seven := items(t, l, 7)
	if seven[0]["from"] != "7" || seven[0]["src"] != "8" || seven[0]["topic"] != "p2p7_8" {
		t.Errorf("user 7's item %v", seven)
	}
}

// TestFirstDirectMessageIsANewConversationForBoth checks that the first message of a 1:1 topic
// (seq 1) is logged on both users' channels with the message byte for byte, and no later one,
// nor a group's.
func TestFirstDirectMessageIsANewConversationForBoth(t *testing.T) {
	t.Parallel()
	l, _, _ := newLog(t, userchan.Config{})
	ch, err := userchan.New(userchan.Deps{Log: l})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testenv.Context(t))
	defer cancel()
	go func() { _ = ch.Run(ctx) }()
	content, err := domain.NewContent([]byte(`{"text": "hi  there"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	dm, grp := mustTopic(t, "p2p3_4"), mustTopic(t, "grp4")
	at := time.Now().UTC()
	ch.MessagesCommitted(ctx, []message.CommittedMessage{
		{Tenant: acme, Topic: dm, From: 3, Seq: 1, MessageID: "m1", Content: content, SentAt: at},
		{Tenant: acme, Topic: dm, From: 4, Seq: 2, MessageID: "m2", Content: content, SentAt: at},
		{Tenant: acme, Topic: grp, From: 3, Seq: 1, MessageID: "m3", Content: content, SentAt: at},
	})
	deadline := time.Now().Add(5 * time.Second)
	for len(items(t, l, 4)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	for _, u := range []domain.UserID{3, 4} {
		p, err := l.Read(ctx, acme, u, "", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) != 1 {
			t.Fatalf("user %d logged %d items, want the one new conversation", u, len(p.Entries))
		}
		body := string(p.Entries[0].Body)
		want := `{"seq":"1","epoch":"` + p.Epoch + `","what":"conv","topic":"p2p3_4","from":"3","message":{"seq":"1","from":"3","message_id":"m1","ts":"` +
			userchan.Timestamp(at) + `","content":{"text": "hi  there"}},"ts":"` + userchan.Timestamp(at) + `"}`
		if body != want {
			t.Errorf("user %d's item\n%s\nwant\n%s", u, body, want)
		}
	}
}
