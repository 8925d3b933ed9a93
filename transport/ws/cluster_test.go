package ws_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// TestTwoNodesDeliverEveryMessageOnceInOrder runs two gateways over one Redis and one event
// store. Two clients on each node share a group and all send at once; every session must get
// every message exactly once, each sender's messages in seq order, with content byte for byte
// as sent, and every ack must echo its frame id with the stored seq.
func TestTwoNodesDeliverEveryMessageOnceInOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.node(t, "node-a", nodeOpts{})
	b := c.node(t, "node-b", nodeOpts{})
	const perSender = 40
	users := []domain.UserID{1, 2, 3, 4}
	clients := make([]*client, len(users))
	for i, u := range users {
		n := a
		if i >= 2 {
			n = b
		}
		clients[i] = dial(t, n, fmt.Sprintf("user%d@%s", u, n.id), dialOpts{})
		clients[i].login(c, u)
		clients[i].sub("grp1")
	}
	content := func(u domain.UserID, k int) string {
		return fmt.Sprintf(`{"text": "<i>%d from %d</i> & more",  "k" : %d}`, k, u, k)
	}

	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perSender {
				cl.write(fmt.Sprintf(`{"pub":{"id":"p%d","topic":"grp1","client_msg_id":"m%d","content":%s}}`, k, k, content(users[i], k)))
			}
		}()
	}
	wg.Wait()

	total := perSender * len(users)
	acks := map[string]ack{} // "<user>:<k>" -> ack
	for i, cl := range clients {
		for k := range perSender {
			r := cl.ctrl(fmt.Sprintf("p%d", k))
			if r.Code != 202 || r.Params["seq"] == nil || r.Params["message_id"] == nil {
				t.Fatalf("%s: ack of p%d = %+v", cl.name, k, r)
			}
			acks[fmt.Sprintf("%d:%d", users[i], k)] = ack{r.Params["seq"].(string), r.Params["message_id"].(string)}
		}
	}
	for _, cl := range clients {
		cl.waitFor("every message", func([]serverFrame) bool { return len(cl.data()) >= total })
	}
	time.Sleep(100 * time.Millisecond) // room for a duplicate to show up

	seen := map[string]bool{}
	for _, a := range acks {
		if seen[a.seq] {
			t.Fatalf("seq %s acked twice", a.seq)
		}
		seen[a.seq] = true
	}
	for _, cl := range clients {
		checkDeliveries(t, cl, total, acks, content)
	}
	if n := c.events(t); n != int64(total) {
		t.Errorf("%d events stored, want %d", n, total)
	}
}

// ack is a pub's answer.
type ack struct{ seq, id string }

// checkDeliveries checks that cl got total data frames, each seq once, each sender's messages in
// seq order and in the order they were sent, with the acked seq and id and the exact content.
func checkDeliveries(t *testing.T, cl *client, total int, acks map[string]ack, content func(domain.UserID, int) string) {
	t.Helper()
	got := cl.data()
	if len(got) != total {
		t.Fatalf("%s received %d data frames, want exactly %d", cl.name, len(got), total)
	}
	lastSeq := map[string]int64{}
	nextK := map[string]int{}
	bySeq := map[string]bool{}
	for _, d := range got {
		if bySeq[d.Seq] {
			t.Fatalf("%s received seq %s twice", cl.name, d.Seq)
		}
		bySeq[d.Seq] = true
		seq, _ := strconv.ParseInt(d.Seq, 10, 64)
		if seq <= lastSeq[d.From] {
			t.Fatalf("%s: messages of user %s out of seq order: %d after %d", cl.name, d.From, seq, lastSeq[d.From])
		}
		lastSeq[d.From] = seq
		k := nextK[d.From]
		nextK[d.From]++
		from, _ := strconv.ParseInt(d.From, 10, 64)
		if want := content(domain.UserID(from), k); string(d.Content) != want {
			t.Fatalf("%s: content of %s's message %d = %s, want %s byte for byte", cl.name, d.From, k, d.Content, want)
		}
		if a := acks[fmt.Sprintf("%s:%d", d.From, k)]; a.seq != d.Seq || a.id != d.MessageID {
			t.Fatalf("%s: %s's message %d arrived as seq %s id %s, acked as %+v", cl.name, d.From, k, d.Seq, d.MessageID, a)
		}
		if d.Topic != "grp1" || d.TS == "" {
			t.Fatalf("%s: data frame %+v", cl.name, d)
		}
	}
}
