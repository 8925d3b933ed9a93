package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/internal/testenv"
)

// TestTwoNodesFormACluster runs two serve processes (node-a, node-b) over one PostgreSQL
// database, one Redis key prefix, one MySQL database template and one Kafka broker. Users on
// either node share a group: each session gets every message of the other node's user, WebSocket
// and REST sends alike, exactly once and in seq order; presence is visible across nodes; a client
// that was away catches up through get; the MySQL read model matches a rebuild from the event
// store; and the operator commands work against the same deployment.
func TestTwoNodesFormACluster(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	var a, b *served
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = env.start(t, "node-a") }()
	go func() { defer wg.Done(); b = env.start(t, "node-b") }()
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}

	alice := signUp(t, a.base, "alice")
	bob := signUp(t, b.base, "bob")
	gid := createGroup(t, a.base, alice, "cluster")
	joinGroup(t, b.base, bob, gid)
	topic := "grp" + gid

	ca := dialWS(t, a.base, alice, "alice@a")
	cb := dialWS(t, b.base, bob, "bob@b")
	ca.sub(topic)
	cb.sub(topic)
	waitPresence(t, b.base, bob, alice.id, true)

	// Both publish at once over WebSocket; then bob sends over REST on node B.
	const perClient = 30
	var aliceSeqs, bobSeqs []int64
	wg.Add(2)
	go func() { defer wg.Done(); aliceSeqs = ca.publish(topic, "a", perClient) }()
	go func() { defer wg.Done(); bobSeqs = cb.publish(topic, "b", perClient) }()
	wg.Wait()
	for k := range 5 {
		r := sendREST(t, b.base, bob, topic, fmt.Sprintf("rest-%d", k), fmt.Sprintf(`{"text":"rest %d"}`, k))
		if r.status != http.StatusCreated {
			t.Fatalf("REST send %d: %d %s", k, r.status, r.raw)
		}
		bobSeqs = append(bobSeqs, seqOf(t, r))
	}
	total := len(aliceSeqs) + len(bobSeqs)
	for _, c := range []*wsClient{ca, cb} {
		c.waitFor("every message", func([]wsFrame) bool { return len(c.data()) >= total })
	}
	time.Sleep(200 * time.Millisecond) // room for a duplicate to show up
	checkSession(t, ca, alice.id, bobSeqs, total)
	checkSession(t, cb, bob.id, aliceSeqs, total)
	checkChangesDelivered(t, b.base, bob, ca, topic, bobSeqs[len(bobSeqs)-1], bobSeqs[len(bobSeqs)-2])

	// Bob goes away, misses 100 messages, comes back and catches up after his last seq.
	bobLast := slices.Max(append(slices.Clone(aliceSeqs), bobSeqs...))
	cb.close()
	waitPresence(t, a.base, alice, bob.id, false)
	missed := ca.publish(topic, "away", 100)
	back := dialWS(t, b.base, bob, "bob@b again")
	catchUp(t, back, topic, bobLast, missed)

	total += len(missed)
	waitProjected(t, env, topic, total)
	out, errOut, err := runCLI(t, "replay", "--projection", "messages-mysql", "--tenant", "demo", "--verify", "--config", a.file)
	if err != nil || !strings.Contains(out, "topics match a rebuild") || strings.Contains(out, "differ") {
		t.Fatalf("replay --verify: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err = runCLI(t, "replay", "--projection", "business-mysql", "--tenant", "demo", "--verify", "--config", a.file)
	if err != nil || !strings.Contains(out, "business-mysql matches a rebuild") {
		t.Fatalf("replay --projection business-mysql --verify: %v\n%s\n%s", err, out, errOut)
	}
	checkCacheInvalidations(t, env.brokers, gid)
	checkChannelAcrossNodes(t, a, b, alice, bob)
	checkOperatorCommands(t, env, a)
}

// checkChannelAcrossNodes follows bob's channel on node b while alice acts through node a's REST
// API: her friend request, a group she creates and invites him to, his acceptance, her message to
// that group (which bob has not subscribed to) and his read mark each reach bob's channel.
func checkChannelAcrossNodes(t *testing.T, a, b *served, alice, bob user) {
	t.Helper()
	ch := dialWS(t, b.base, bob, "bob's channel@b")
	ch.write(`{"sub":{"id":"me","topic":"me"}}`)
	if r := ch.ctrl("me"); r.Code != 200 || r.Params["topic"] != "me" {
		t.Fatalf("sub me: %+v", r)
	}
	dm := "p2p" + min(alice.id, bob.id) + "_" + max(alice.id, bob.id)
	if len(alice.id) != len(bob.id) {
		t.Fatalf("ids of different lengths (%s, %s) do not order as strings", alice.id, bob.id)
	}
	post := func(u user, path, key, body string) {
		t.Helper()
		if r := call(t, http.MethodPost, a.base+path, u.token, key, body); r.status/100 != 2 {
			t.Fatalf("POST %s: %d %s", path, r.status, r.raw)
		}
	}
	post(alice, "/v1/im/friends/requests", "chan-friend", fmt.Sprintf(`{"user_id":%q}`, bob.id))
	if it := ch.waitMe("friend_requested", dm); it.Seq == "" || it.Epoch == "" || it.From != alice.id {
		t.Errorf("friend request item %+v", it)
	}
	gid := createGroup(t, a.base, alice, "channel")
	grp := "grp" + gid
	post(alice, "/v1/im/groups/"+gid+"/invites", "chan-invite", fmt.Sprintf(`{"user_id":%q}`, bob.id))
	ch.waitMe("invited", grp)
	post(bob, "/v1/im/groups/"+gid+"/invites/accept", "chan-accept", "")
	ch.waitMe("joined", grp)
	r := sendREST(t, a.base, alice, grp, "chan-msg", `{"text":"to the channel"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("send: %d %s", r.status, r.raw)
	}
	if m := ch.waitMe("msg", grp); m.Seq != "" || m.MsgSeq != "1" || string(m.Content) != `{"text":"to the channel"}` {
		t.Errorf("msg frame %+v", m)
	}
	post(bob, "/v1/im/topics/"+grp+"/read", "chan-read", `{"read_seq":"1"}`)
	if it := ch.waitMe("read", grp); it.ReadSeq != "1" {
		t.Errorf("read item %+v", it)
	}
}

// checkCacheInvalidations waits for the business projection to publish, on im.cache.invalidate,
// the demo tenant's cache keys of group gid that its creation and the join made stale.
func checkCacheInvalidations(t *testing.T, brokers []string, gid string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("e2e.im.cache.invalidate"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seen []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no invalidation of group %s's cache keys on im.cache.invalidate; got %v", gid, seen)
		}
		for _, r := range fs.Records() {
			var v cacheInvalidation
			if err := json.Unmarshal(r.Value, &v); err != nil || string(r.Key) != "demo" || v.Tenant != "demo" {
				t.Fatalf("im.cache.invalidate record %q: %s (%v)", r.Key, r.Value, err)
			}
			for _, k := range v.Keys {
				if strings.Contains(k, ":demo:group:{"+gid+"}:members") {
					return
				}
			}
			seen = append(seen, v.Keys...)
		}
	}
}

// checkChangesDelivered edits message edited and recalls message recalled of u over REST on
// base; c, a session of the topic on another node, must get an info frame for each at once.
func checkChangesDelivered(t *testing.T, base string, u user, c *wsClient, topic string, edited, recalled int64) {
	t.Helper()
	msg := fmt.Sprintf("%s/v1/im/topics/%s/messages/", base, topic)
	if r := call(t, http.MethodPatch, fmt.Sprint(msg, edited), u.token, "edit-1", `{"version":"1","content":{"text": "edited"}}`); r.status != http.StatusOK {
		t.Fatalf("REST edit: %d %s", r.status, r.raw)
	}
	if r := call(t, http.MethodPost, fmt.Sprint(msg, recalled, "/recall"), u.token, "recall-1", ""); r.status != http.StatusOK {
		t.Fatalf("REST recall: %d %s", r.status, r.raw)
	}
	c.waitFor("the edit and the recall", func(fs []wsFrame) bool {
		var edit, recall bool
		for _, f := range fs {
			switch i := f.Info; {
			case i == nil || i.Topic != topic:
			case i.What == "edit" && i.Seq == fmt.Sprint(edited) && i.Version == "2" && string(i.Content) == `{"text": "edited"}`:
				edit = true
			case i.What == "recall" && i.Seq == fmt.Sprint(recalled):
				recall = true
			}
		}
		return edit && recall
	})
}

// seqOf returns the seq of a send answer.
func seqOf(t *testing.T, a answer) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(fmt.Sprint(a.Data["seq"]), &n); err != nil {
		t.Fatalf("send answer without a seq: %s", a.raw)
	}
	return n
}

// checkSession checks the data frames of one session: total messages, every seq once, and the
// other user's messages exactly others, in seq order.
func checkSession(t *testing.T, c *wsClient, self string, others []int64, total int) {
	t.Helper()
	data := c.data()
	seen := map[int64]bool{}
	var fromOthers []int64
	for _, d := range data {
		if seen[d.seq()] {
			t.Errorf("%s: seq %d delivered twice", c.name, d.seq())
		}
		seen[d.seq()] = true
		if d.From != self {
			fromOthers = append(fromOthers, d.seq())
		}
	}
	if len(data) != total {
		t.Errorf("%s: %d data frames, want %d", c.name, len(data), total)
	}
	if !slices.Equal(fromOthers, others) {
		t.Errorf("%s: the other user's messages arrived as seqs %v, want %v in this order", c.name, fromOthers, others)
	}
}

// waitPresence polls, as u through base, until user's presence is online (or offline).
func waitPresence(t *testing.T, base string, u user, of string, online bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := call(t, http.MethodGet, base+"/v1/im/users/"+of+"/presence", u.token, "", "")
		if r.status == http.StatusOK && r.Data["online"] == online {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("presence of %s seen from %s: %d %s, want online=%v", of, base, r.status, r.raw, online)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// catchUp pages through get after last until every missed seq arrived, polling while the
// projectors catch up; every seq must come exactly once.
func catchUp(t *testing.T, c *wsClient, topic string, last int64, missed []int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for try := 0; ; try++ {
		var got []int64
		after := last
		for page := 0; ; page++ {
			data, r := c.history(fmt.Sprintf("get-%d-%d", try, page), topic, after, 100)
			if r.Code != 200 {
				t.Fatalf("get: %+v", r)
			}
			for _, d := range data {
				got = append(got, d.seq())
				after = d.seq()
			}
			if r.Params["has_more"] != true || len(data) == 0 {
				break
			}
		}
		if slices.Equal(got, missed) {
			return
		}
		if len(got) > len(missed) || time.Now().After(deadline) {
			t.Fatalf("get after seq %d returned %d seqs %v, want the %d missed %v", last, len(got), got, len(missed), missed)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitProjected waits until the demo tenant's MySQL table holds want messages of topic.
func waitProjected(t *testing.T, env *serveEnv, topic string, want int) {
	t.Helper()
	db, err := sql.Open("mysql", testenv.MySQLDSN+env.template+"_demo")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := db.QueryRow("SELECT count(*) FROM im_group_messages WHERE topic = ?", topic).Scan(&n)
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("MySQL holds %d messages of %s (%v), want %d", n, topic, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkOperatorCommands provisions a tenant with `tenant create`, issues a token for it with
// `token issue`, uses both against node a, and lists the (absent) dead letters.
func checkOperatorCommands(t *testing.T, env *serveEnv, a *served) {
	t.Helper()
	out, errOut, err := runCLI(t, "tenant", "create", "acme", "--config", a.file)
	if err != nil || !strings.Contains(out, "database: "+env.template+"_acme\n") {
		t.Fatalf("tenant create: %v\n%s\n%s", err, out, errOut)
	}
	_, key, _ := strings.Cut(out, "api_key: ")
	key = strings.TrimSpace(key)
	token, errOut, err := runCLI(t, "token", "issue", "--tenant", "acme", "--user", "7", "--ttl", "5m", "--config", a.file)
	if err != nil {
		t.Fatalf("token issue: %v\n%s", err, errOut)
	}
	// Nothing was dead-lettered along the way.
	if out, errOut, err := runCLI(t, "deadletter", "list", "--status", "all", "--config", a.file); err != nil ||
		!strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 1 {
		t.Errorf("deadletter list: %v\n%s\n%s", err, out, errOut)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, a.base+"/v1/im/unread", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
	for _, k := range []struct {
		key  string
		want int
	}{{key, http.StatusOK}, {"imk_" + strings.Repeat("A", 43), http.StatusUnauthorized}} {
		req.Header.Set("X-IM-API-Key", k.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != k.want {
			t.Errorf("GET /v1/im/unread as acme/7 with API key %.8s…: %d, want %d", k.key, resp.StatusCode, k.want)
		}
	}
}
