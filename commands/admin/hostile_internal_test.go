package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// validPayloads holds a payload of every command type with every field set.
var validPayloads = map[domain.AdminCommandType]string{
	domain.CmdTenantProvision:   `{"settings":{"registration_open":false}}`,
	domain.CmdTenantSuspend:     `{"reason":"unpaid"}`,
	domain.CmdTenantResume:      `{}`,
	domain.CmdTenantConfigSet:   `{"settings":{"max_content_bytes":4096}}`,
	domain.CmdUserBan:           `{"user_id":"42","reason":"spam"}`,
	domain.CmdUserUnban:         `{"user_id":"42","reason":"ok"}`,
	domain.CmdUserKick:          `{"user_id":"42","reason":"rude"}`,
	domain.CmdUserRevokeTokens:  `{"user_id":"42","reason":"leaked"}`,
	domain.CmdUserResetPassword: `{"user_id":"42","password":"brand new secret"}`,
	domain.CmdUserErase:         `{"user_id":"42","reason":"asked to be forgotten"}`,
	domain.CmdGroupDissolve:     `{"group_id":"7","reason":"spam"}`,
	domain.CmdGroupMuteAll:      `{"group_id":"7","mute_all":true}`,
	domain.CmdGroupRemoveMember: `{"group_id":"7","user_id":"42","ban":true}`,
	domain.CmdGroupTransfer:     `{"group_id":"7","to":"43"}`,
	domain.CmdGroupAnnounce:     `{"group_id":"7","text":"be nice"}`,
	domain.CmdMessageRecall:     `{"topic":"grp7","seq":"12","reason":"illegal"}`,
	domain.CmdMessageBroadcast:  `{"group_id":"7","content":{"text":"hi"}}`,
}

// TestEveryRequiredPayloadFieldIsEnforced: for every command type, each field its checked-in
// schema requires is refused invalid_payload {field, reason: required} when it is missing or
// null, and each optional field may be left out.
func TestEveryRequiredPayloadFieldIsEnforced(t *testing.T) {
	t.Parallel()
	for _, info := range domain.AdminCommands() {
		raw, ok := validPayloads[info.Type]
		if !ok {
			t.Errorf("%s: no valid payload in this test", info.Type)
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", "..", "domain", "schemas", "commands", string(info.Type)+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		c := checked{AdminCommand: domain.AdminCommand{EventType: string(info.Type), Payload: json.RawMessage(raw)}, info: info}
		if _, err := decodePayload(c); err != nil {
			t.Errorf("%s: the valid payload: %v", info.Type, err)
		}
		for field := range schema.Properties {
			var full map[string]json.RawMessage
			if err := json.Unmarshal([]byte(raw), &full); err != nil {
				t.Fatal(err)
			}
			if _, ok := full[field]; !ok {
				t.Errorf("%s: the valid payload lacks %s", info.Type, field)
			}
			required := slices.Contains(schema.Required, field)
			for _, mut := range []string{"missing", "null"} {
				p := map[string]json.RawMessage{}
				for k, v := range full {
					p[k] = v
				}
				if mut == "missing" {
					delete(p, field)
				} else {
					p[field] = json.RawMessage("null")
				}
				c.Payload, _ = json.Marshal(p)
				_, err := decodePayload(c)
				var ve *domain.ValidationError
				switch {
				case required && (!errors.As(err, &ve) || ve.Field != field || ve.Reason != "required"):
					t.Errorf("%s without %s (%s): %v, want invalid_payload {field: %s, reason: required}", info.Type, field, mut, err, field)
				case !required && mut == "missing" && err != nil:
					t.Errorf("%s without optional %s: %v", info.Type, field, err)
				}
			}
		}
	}
}

// TestClaimOfABadCommandFailsOnlyThatCommand: a command PostgreSQL refuses to claim (a NUL in a
// text column, which the envelope checks keep from getting here) fails the shared claim
// statement; the others of the statement are claimed and the bad one alone is answered failed,
// at once, instead of the batch being retried forever.
func TestClaimOfABadCommandFailsOnlyThatCommand(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 4)
	cfg := Config{ConsumerGroup: "g"}
	cfg.setDefaults()
	c := &Consumer{cfg: cfg, ledger: newLedger(pool, "g", "o", time.Minute), log: slog.New(slog.DiscardHandler)}
	good := &item{cmd: domain.AdminCommand{EventID: uuid.Must(uuid.NewV7()), TenantID: "t1", EventType: "user.kick"}}
	bad := &item{cmd: domain.AdminCommand{EventID: uuid.Must(uuid.NewV7()), TenantID: "pc\x00a", EventType: "user.kick"}}
	sess, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !c.claimBatch(sess, ctx, []*item{bad, good}) {
		t.Fatal("the claim of the batch never ended")
	}
	if !good.fresh || good.done {
		t.Fatalf("the good command: fresh %v done %v", good.fresh, good.done)
	}
	if !bad.done || bad.res == nil || bad.res.Status != domain.AdminFailed {
		t.Fatalf("the bad command: done %v result %+v", bad.done, bad.res)
	}
}

// flakyPublisher delivers the records of each PublishBatch except those its fail function
// refuses, and reports those in a *PublishBatchError.
type flakyPublisher struct {
	mu        sync.Mutex
	delivered map[string]int // record value → times delivered
	calls     int
	fail      func(call int, m OutMessage) error
}

func (p *flakyPublisher) Publish(context.Context, string, string, []byte, map[string]string) error {
	return errors.New("not used")
}

func (p *flakyPublisher) PublishBatch(_ context.Context, msgs []OutMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	failed := map[int]error{}
	for i, m := range msgs {
		if err := p.fail(p.calls, m); err != nil {
			failed[i] = err
			continue
		}
		p.delivered[string(m.Value)]++
	}
	if len(failed) > 0 {
		return &PublishBatchError{Failed: failed}
	}
	return nil
}

// TestPublishedResultsAreNotPublishedAgain: when a flush delivers some results of a batch and not
// others, only the others are produced again; a result the broker refuses as too large is
// replaced by its small failed stand-in instead of being retried.
func TestPublishedResultsAreNotPublishedAgain(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	var big []byte
	pub := &flakyPublisher{delivered: map[string]int{}, fail: func(call int, m OutMessage) error {
		switch {
		case bytes.Equal(m.Value, big):
			return sarama.ErrMessageSizeTooLarge
		case call == 1 && bytes.Contains(m.Value, []byte(`"user_id":"2"`)):
			return sarama.ErrNotLeaderForPartition
		}
		return nil
	}}
	cfg := Config{ConsumerGroup: "g", ResultTopic: "results", Retry: RetryConfig{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}}
	cfg.setDefaults()
	c := &Consumer{cfg: cfg, deps: Deps{Publisher: pub}, log: slog.New(slog.DiscardHandler)}
	var out []*outgoing
	for i := range 3 {
		it := &item{key: "k", cmd: domain.AdminCommand{EventID: uuid.Must(uuid.NewV7()), TenantID: "t1", EventType: "user.ban"}}
		r := c.result(it.cmd, domain.AdminSucceeded, "", nil, map[string]any{"user_id": fmt.Sprint(i)})
		it.res = &r
		out = append(out, &outgoing{it: it, msg: c.resultMessage(it.key, r)})
	}
	big = out[0].msg.Value
	if !c.publishResults(ctx, ctx, out) {
		t.Fatal("publishResults gave up")
	}
	if pub.delivered[string(big)] != 0 {
		t.Fatal("the refused result was delivered")
	}
	var standIn int
	for v, n := range pub.delivered {
		var r domain.AdminResult
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("result %s delivered %d times", v, n)
		}
		if r.Reason == ReasonResultTooLarge {
			standIn++
			if r.CommandEventID != out[0].it.cmd.EventID.String() || r.Details["status"] != domain.AdminSucceeded {
				t.Errorf("stand-in: %s", v)
			}
		}
	}
	if len(pub.delivered) != 3 || standIn != 1 || pub.calls != 2 {
		t.Fatalf("delivered %d results (%d stand-ins) in %d flushes, want 3 (1) in 2", len(pub.delivered), standIn, pub.calls)
	}
}
