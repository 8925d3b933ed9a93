package admin_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// TestFailingCommandIsDeadLetteredThenReplayed: with the tenant databases' MySQL stopped (a
// private server), tenant.provision fails on every attempt, is retried, then answered failed,
// recorded in admin_command_failures and produced to im.dead.letter, and creates no tenant. With
// MySQL back, a replay runs it as a new command whose parent is the original, and it succeeds.
func TestFailingCommandIsDeadLetteredThenReplayed(t *testing.T) {
	t.Parallel()
	mysql := testenv.StartPrivateMySQL(t)
	e := newEnv(t, envOpts{mysqlDSN: mysql.DSN()})
	ctx := testenv.Context(t)
	e.ok(command(newTenantID(t).String(), domain.CmdTenantProvision, `{}`)) // the set-up works while MySQL runs

	mysql.Stop()
	tid := newTenantID(t)
	cmd := command(tid.String(), domain.CmdTenantProvision, `{"settings":{"registration_open":false}}`)
	res := e.send(cmd)
	if res.Status != domain.AdminFailed || res.Reason != admin.ReasonRetriesExhausted || res.Details["attempts"] != float64(4) {
		t.Fatalf("result: %+v", res)
	}
	if _, err := e.registry.Get(ctx, tid); err == nil {
		t.Fatal("the failed provision created the tenant")
	}
	list, err := e.failures.List(ctx, admin.FailureFilter{TenantID: tid.String()})
	if err != nil || len(list) != 1 || list[0].Status != admin.FailureOpen || list[0].EventID != cmd.EventID ||
		fmt.Sprint(list[0].ID) != res.Details["failure_id"] || list[0].Error == "" {
		t.Fatalf("failures: %+v %v", list, err)
	}
	var dead bool
	for _, m := range e.dead.snapshot() {
		var c domain.AdminCommand
		if json.Unmarshal(m.Value, &c) == nil && c.EventID == cmd.EventID {
			for _, h := range m.Headers {
				if string(h.Key) == admin.HeaderReason && string(h.Value) == admin.ReasonRetriesExhausted {
					dead = true
				}
			}
		}
	}
	if !dead {
		t.Fatal("no record of the command on im.dead.letter")
	}
	// Redelivered, the failed command is answered failed again without running.
	body, _ := json.Marshal(cmd)
	e.produce(commandTopic, "again", body)
	if r := e.await(cmd.EventID, 2); r.Status != domain.AdminFailed {
		t.Fatalf("repeat of a failed command: %+v", r)
	}

	mysql.Start()
	newID, _ := uuid.NewV7()
	sent, err := e.failures.Replay(ctx, list[0].ID, newID)
	if err != nil {
		t.Fatal(err)
	}
	if sent.EventID != newID || sent.ParentEventID == nil || *sent.ParentEventID != cmd.EventID || sent.EventType != cmd.EventType {
		t.Fatalf("replayed command: %+v", sent)
	}
	r := e.await(newID, 1)
	if r.Status != domain.AdminSucceeded || r.ParentEventID != cmd.EventID.String() {
		t.Fatalf("replay result: %+v", r)
	}
	info, err := e.registry.Get(ctx, tid)
	if err != nil || info.Settings.Registration() {
		t.Fatalf("tenant after the replay: %+v %v", info, err)
	}
	list, _ = e.failures.List(ctx, admin.FailureFilter{TenantID: tid.String()})
	if list[0].Status != admin.FailureReplayed || list[0].ReplayedEventID == nil || *list[0].ReplayedEventID != newID {
		t.Fatalf("failure after replay: %+v", list[0])
	}
	if _, err := e.failures.Replay(ctx, list[0].ID, uuid.Nil); err == nil {
		t.Fatal("a replayed failure was replayed again")
	}
}

// TestTakeoverFindsCommittedEvents: a command whose consumer committed its events and died
// before answering is taken over after the claim timeout and answered succeeded without running
// again.
func TestTakeoverFindsCommittedEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	e.ok(command(tid.String(), domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 77)
	cmd := command(tid.String(), domain.CmdUserBan, `{"user_id":"77"}`)
	gov, _ := account.NewGovernance(account.GovernanceDeps{Pool: e.pool, Store: e.store, Accounts: e.accounts})
	if _, err := gov.Ban(ctx, tid, 77, "", account.Meta{Actor: cmd.Actor, CausationID: cmd.EventID.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO admin_commands (consumer_group, event_id, tenant_id, command_type, status, owner, claimed_at)
		VALUES ('admin-test', $1, $2, $3, 'running', 'dead-node/1', now() - interval '10 minutes')`,
		cmd.EventID, tid.String(), cmd.EventType); err != nil {
		t.Fatal(err)
	}
	r := e.send(cmd)
	if r.Status != domain.AdminSucceeded || string(r.Result) != `{"recovered":true}` {
		t.Fatalf("taken over: %+v %s", r, r.Result)
	}
	evs, _ := e.store.ReadStream(ctx, tid, domain.AccountStreamID(77), 0, 0)
	if len(evs) != 1 {
		t.Fatalf("the ban ran again: %d events", len(evs))
	}
}
