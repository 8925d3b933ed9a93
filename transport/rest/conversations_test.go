package rest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/imledger/imledger/transport/rest"
)

type conversationList struct {
	Conversations []struct {
		Topic       string `json:"topic"`
		Kind        string `json:"kind"`
		GroupID     string `json:"group_id"`
		Name        string `json:"name"`
		Role        string `json:"role"`
		MemberCount int    `json:"member_count"`
		Peer        string `json:"peer"`
		PeerRead    string `json:"peer_read_seq"`
		LastSeq     string `json:"last_seq"`
		ReadSeq     string `json:"read_seq"`
		Unread      string `json:"unread"`
		Mentions    string `json:"mentions"`
		ActiveAt    string `json:"active_at"`
		LastMessage *struct {
			Seq     string          `json:"seq"`
			From    string          `json:"from"`
			Content json.RawMessage `json:"content"`
		} `json:"last_message"`
	} `json:"conversations"`
	NextCursor string `json:"next_cursor"`
}

func (s *stack) conversations(t *testing.T, token, query string) (conversationList, answer) {
	t.Helper()
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/conversations" + query, token: token})
	expect(t, "conversations"+query, a, http.StatusOK, "ok")
	var l conversationList
	if err := json.Unmarshal(a.Body.Data, &l); err != nil {
		t.Fatalf("conversations: %v: %s", err, a.Raw)
	}
	return l, a
}

// TestConversationList lists users' groups and 1:1 chats from the MySQL read models: most
// recently active first, with the last message the caller still sees, unread and mention counts,
// paged by cursor; and pending friend requests in both directions.
func TestConversationList(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true})
	aliceID, alice := s.user(t, "alice")
	bobID, bob := s.user(t, "bob")
	carolID, carol := s.user(t, "carol")
	p2p := "p2p" + aliceID + "_" + bobID
	if len(bobID) < len(aliceID) || len(bobID) == len(aliceID) && bobID < aliceID {
		p2p = "p2p" + bobID + "_" + aliceID
	}

	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: alice, key: "g1", body: `{"name":"Design"}`})
	expect(t, "create group", a, http.StatusCreated, "ok")
	gid := a.data(t)["group_id"].(string)
	grp := "grp" + gid
	expect(t, "carol joins", s.do(t, req{method: http.MethodPost, path: "/v1/im/groups/" + gid + "/join", token: carol, key: "j1"}),
		http.StatusOK, "ok")

	send := func(token, topic, key, body string) {
		t.Helper()
		expect(t, "send "+key, s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/messages", token: token, key: key, body: body}),
			http.StatusCreated, "ok")
	}
	send(alice, p2p, "d1", `{"client_msg_id":"d1","content":"hi bob"}`)
	send(alice, p2p, "d2", `{"client_msg_id":"d2","content":"lunch?"}`)
	send(carol, grp, "g1", `{"client_msg_id":"g1","content":"@alice look","head":{"mentions":["`+aliceID+`"]}}`)
	send(carol, grp, "g2", `{"client_msg_id":"g2","content":"plain"}`)
	s.project(t)

	l, raw := s.conversations(t, alice, "")
	if len(l.Conversations) != 2 || l.NextCursor != "" {
		t.Fatalf("alice's list: %s", raw.Raw)
	}
	g, d := l.Conversations[0], l.Conversations[1]
	if g.Topic != grp || g.Kind != "group" || g.GroupID != gid || g.Name != "Design" || g.Role != "owner" || g.MemberCount != 2 ||
		g.LastSeq != "2" || g.Unread != "2" || g.Mentions != "1" || g.LastMessage == nil ||
		g.LastMessage.Seq != "2" || g.LastMessage.From != carolID || string(g.LastMessage.Content) != `"plain"` {
		t.Fatalf("alice's group entry, first as the most recent: %s", raw.Raw)
	}
	if d.Topic != p2p || d.Kind != "direct" || d.Peer != bobID || d.LastSeq != "2" || d.Unread != "0" || d.Mentions != "0" ||
		d.LastMessage == nil || string(d.LastMessage.Content) != `"lunch?"` || d.GroupID != "" {
		t.Fatalf("alice's 1:1 entry: %s", raw.Raw)
	}
	// Compared as times: RFC 3339 drops trailing zeros of the fraction, so ".6Z" sorts after ".605Z" as text.
	if ga, da := parseTime(t, g.ActiveAt), parseTime(t, d.ActiveAt); !ga.After(da) {
		t.Fatalf("the group's activity %s is not after the 1:1's %s", g.ActiveAt, d.ActiveAt)
	}

	l, raw = s.conversations(t, bob, "")
	if len(l.Conversations) != 1 || l.Conversations[0].Topic != p2p || l.Conversations[0].Peer != aliceID ||
		l.Conversations[0].Unread != "2" || l.Conversations[0].Mentions != "0" || l.Conversations[0].PeerRead != "2" {
		t.Fatalf("bob's list: %s", raw.Raw)
	}
	l, raw = s.conversations(t, carol, "")
	if len(l.Conversations) != 1 || l.Conversations[0].Role != "member" || l.Conversations[0].Unread != "0" {
		t.Fatalf("carol's list (she sent both messages): %s", raw.Raw)
	}

	// Pages of one, by cursor.
	first, raw := s.conversations(t, alice, "?limit=1")
	if len(first.Conversations) != 1 || first.Conversations[0].Topic != grp || first.NextCursor == "" {
		t.Fatalf("first page: %s", raw.Raw)
	}
	second, raw := s.conversations(t, alice, "?limit=1&cursor="+url.QueryEscape(first.NextCursor))
	if len(second.Conversations) != 1 || second.Conversations[0].Topic != p2p || second.NextCursor != "" {
		t.Fatalf("second page: %s", raw.Raw)
	}
	expect(t, "bad cursor", s.do(t, req{method: http.MethodGet, path: "/v1/im/conversations?cursor=xyz", token: alice}),
		http.StatusBadRequest, rest.ReasonInvalid)
	if a := s.do(t, req{method: http.MethodGet, path: "/v1/im/conversations?limit=101", token: alice}); a.Status != http.StatusBadRequest {
		t.Fatalf("limit 101: %s", a.Raw)
	}
	if a := s.do(t, req{method: http.MethodGet, path: "/v1/im/conversations"}); a.Status != http.StatusUnauthorized {
		t.Fatalf("no token: %s", a.Raw)
	}

	// Reading moves unread and mentions to zero; a message deleted for alice is not her last.
	expect(t, "alice reads", s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + grp + "/read", token: alice, key: "r1", body: `{"read_seq":"2"}`}),
		http.StatusOK, "ok")
	expect(t, "alice deletes seq 2 for herself", s.do(t, req{method: http.MethodDelete, path: "/v1/im/topics/" + grp + "/messages/2", token: alice, key: "x1"}),
		http.StatusOK, "ok")
	s.project(t)
	l, raw = s.conversations(t, alice, "")
	g = l.Conversations[0]
	if g.Topic != grp || g.Unread != "0" || g.Mentions != "0" || g.ReadSeq != "2" || g.LastMessage == nil || g.LastMessage.Seq != "1" {
		t.Fatalf("after reading and deleting: %s", raw.Raw)
	}

	// Friend requests: bob asks carol; carol sees it incoming, bob outgoing, alice nothing.
	expect(t, "bob asks carol", s.do(t, req{method: http.MethodPost, path: "/v1/im/friends/requests", token: bob, key: "f1",
		body: `{"user_id":"` + carolID + `","message":"hi"}`}), http.StatusOK, "ok")
	s.project(t)
	for _, c := range []struct {
		token, peer, dir string
	}{{carol, bobID, "incoming"}, {bob, carolID, "outgoing"}, {alice, "", ""}} {
		a := s.do(t, req{method: http.MethodGet, path: "/v1/im/friends/requests", token: c.token})
		expect(t, "friend requests", a, http.StatusOK, "ok")
		var fr struct {
			Requests []struct {
				UserID    string `json:"user_id"`
				Direction string `json:"direction"`
				Message   string `json:"message"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(a.Body.Data, &fr); err != nil {
			t.Fatal(err)
		}
		if c.peer == "" && len(fr.Requests) != 0 || c.peer != "" && (len(fr.Requests) != 1 || fr.Requests[0].UserID != c.peer ||
			fr.Requests[0].Direction != c.dir || fr.Requests[0].Message != "hi") {
			t.Fatalf("requests of the user expecting %q %q: %s", c.peer, c.dir, a.Raw)
		}
	}
	expect(t, "carol accepts", s.do(t, req{method: http.MethodPost, path: "/v1/im/friends/requests/" + bobID + "/accept", token: carol, key: "f2"}),
		http.StatusOK, "ok")
	s.project(t)
	if a := s.do(t, req{method: http.MethodGet, path: "/v1/im/friends/requests", token: carol}); a.data(t)["requests"] == nil ||
		len(a.data(t)["requests"].([]any)) != 0 {
		t.Fatalf("carol's requests after accepting: %s", a.Raw)
	}
}

// parseTime reads an RFC 3339 time of an answer.
func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return at
}
