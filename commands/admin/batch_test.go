package admin_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// TestConsumerStoppedMidBatchLosesNothingAndRunsNothingTwice: a consumer stopped while a batch
// is half done (one command committed but not answered, the key's later commands not started)
// is followed by another consumer of the group; every command is answered succeeded, the
// committed one is recovered without running again and the unstarted ones run once.
func TestConsumerStoppedMidBatchLosesNothingAndRunsNothingTwice(t *testing.T) {
	t.Parallel()
	cfg := admin.Config{ClaimTimeout: 2 * time.Second, CommandTimeout: time.Second, CloseTimeout: 200 * time.Millisecond, MaxBatch: 16,
		Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 100 * time.Millisecond}}
	// The tenant is provisioned by a consumer with the default command timeout: creating its
	// MySQL database can take longer than this test's one second on a busy machine.
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	e.ok(command(tid.String(), domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 501, 502, 503)
	e.stop(e.consumer)
	e.consumer = e.startConsumer("test-1", cfg)

	hold := make(chan struct{})
	e.sent.mu.Lock()
	e.sent.hold, e.sent.entered = hold, make(chan struct{}, 1)
	e.sent.mu.Unlock()
	key := tid.String() + ":batch"
	cmds := []domain.AdminCommand{
		command(tid.String(), domain.CmdUserBan, `{"user_id":"501"}`),
		command(tid.String(), domain.CmdMessageBroadcast, `{"content":"maintenance tonight"}`),
		command(tid.String(), domain.CmdUserBan, `{"user_id":"502"}`),
		command(tid.String(), domain.CmdUserBan, `{"user_id":"503"}`),
	}
	for _, c := range cmds {
		body, _ := json.Marshal(c)
		e.produce(commandTopic, key, body)
	}
	select {
	case <-e.sent.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the broadcast never ran")
	}
	// The broadcast is recorded and its delivery hangs: stop the consumer, and let the delivery
	// return only after the consumer's grace period ended.
	stopped := make(chan struct{})
	go func() { e.stop(e.consumer); close(stopped) }()
	time.Sleep(500 * time.Millisecond)
	e.sent.mu.Lock()
	e.sent.hold = nil
	e.sent.mu.Unlock()
	close(hold)
	<-stopped
	if rs := e.resultsOf(cmds[2].EventID); len(rs) != 0 {
		t.Fatalf("a command after the hung one was answered by the stopped consumer: %+v", rs)
	}

	e.startConsumer("test-2", cfg)
	for _, c := range cmds {
		r := e.await(c.EventID, 1)
		if r.Status != domain.AdminSucceeded {
			t.Fatalf("%s: %s %s %v", c.EventType, r.Status, r.Reason, r.Details)
		}
	}
	for _, u := range []int64{501, 502, 503} {
		evs, err := e.store.ReadStream(ctx, tid, domain.AccountStreamID(domain.UserID(u)), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 {
			t.Errorf("user %d: %d ban events, want 1", u, len(evs))
		}
	}
	evs, err := e.store.ReadStream(ctx, tid, domain.TenantBroadcastStreamID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Errorf("tenant broadcasts recorded: %d, want 1", len(evs))
	}
	time.Sleep(300 * time.Millisecond)
	for _, c := range cmds {
		if rs := e.resultsOf(c.EventID); len(rs) > 2 {
			t.Errorf("%s answered %d times", c.EventType, len(rs))
		}
	}
}

// TestCommandsOfOneKeyKeepTheirOrderInABatch: commands produced back to back about many users
// run concurrently across users and in produce order for each user: every user's events follow
// the commands' order and each command is answered once, succeeded.
func TestCommandsOfOneKeyKeepTheirOrderInABatch(t *testing.T) {
	t.Parallel()
	cfg := admin.Config{MaxBatch: 64, Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}}
	e := newEnv(t, envOpts{config: &cfg})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	e.ok(command(tid.String(), domain.CmdTenantProvision, `{}`))
	const users = 12
	for u := 1; u <= users; u++ {
		e.accountsOf(tid, int64(600+u))
	}
	order := []domain.AdminCommandType{domain.CmdUserBan, domain.CmdUserUnban, domain.CmdUserBan, domain.CmdUserUnban, domain.CmdUserBan}
	var all []domain.AdminCommand
	var msgs []*sarama.ProducerMessage
	for _, typ := range order {
		for u := 1; u <= users; u++ {
			c := command(tid.String(), typ, fmt.Sprintf(`{"user_id":"%d"}`, 600+u))
			body, _ := json.Marshal(c)
			msgs = append(msgs, &sarama.ProducerMessage{Topic: commandTopic, Key: sarama.StringEncoder(fmt.Sprintf("%s:user:%d", tid, 600+u)),
				Value: sarama.ByteEncoder(body)})
			all = append(all, c)
		}
	}
	if err := e.producer.SendMessages(msgs); err != nil { // one flush: the consumer sees them as batches
		t.Fatal(err)
	}
	for _, c := range all {
		if r := e.await(c.EventID, 1); r.Status != domain.AdminSucceeded {
			t.Fatalf("%s: %s %s", c.EventType, r.Status, r.Reason)
		}
	}
	for u := 1; u <= users; u++ {
		evs, err := e.store.ReadStream(ctx, tid, domain.AccountStreamID(domain.UserID(600+u)), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []domain.EventType
		for _, ev := range evs {
			got = append(got, ev.EventType)
		}
		want := []domain.EventType{domain.EventUserBanned, domain.EventUserUnbanned, domain.EventUserBanned, domain.EventUserUnbanned, domain.EventUserBanned}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("user %d: events %v, want %v", 600+u, got, want)
		}
	}
	for _, c := range all {
		if rs := e.resultsOf(c.EventID); len(rs) != 1 {
			t.Errorf("%s answered %d times", c.EventID, len(rs))
		}
	}
}
