package admin_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// TestEveryCommandChangesWhatItSays runs every admin command through Kafka and checks its result
// and its change: the events it appended (with the administrator as actor and the command as
// causation) and the state the handlers now see.
// Every command does what it says, unsigned on the embedded broker and signed by the platform key
// with its password sealed, as with real brokers; signed, its events carry the key id.
func TestEveryCommandChangesWhatItSays(t *testing.T) {
	t.Parallel()
	for _, signed := range []bool{false, true} {
		t.Run(fmt.Sprintf("signed=%v", signed), func(t *testing.T) {
			t.Parallel()
			everyCommandChangesWhatItSays(t, signed)
		})
	}
}

func everyCommandChangesWhatItSays(t *testing.T, signed bool) {
	e := newEnv(t, envOpts{signed: signed})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()

	// tenant.provision creates the MySQL database and the registry entry.
	data := e.ok(command(ten, domain.CmdTenantProvision, `{"settings":{"max_content_bytes":2048}}`))
	if data["status"] != "active" || data["unchanged"] != false {
		t.Fatalf("provision: %v", data)
	}
	info, err := e.registry.Get(ctx, tid)
	if err != nil || info.Settings.ContentLimit(65536) != 2048 {
		t.Fatalf("registry after provision: %+v %v", info, err)
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE tenant_id = $1 AND actor_type = 'admin' AND actor_id = 'ops-7'`,
		ten).Scan(&n); err != nil || n != 1 {
		t.Fatalf("provision event with the admin actor: %d %v", n, err)
	}

	// Accounts and a group to act on.
	reg := func(login string) domain.UserID {
		r, err := e.accounts.Register(ctx, account.Register{Tenant: tid, Login: login, Password: "correct horse"})
		if err != nil {
			t.Fatal(err)
		}
		return r.User
	}
	owner, bob, carol := reg("owner"), reg("bob"), reg("carol")
	res, err := e.groups.CreateGroup.Handle(ctx, group.CreateGroup{Actor: domain.Principal{Tenant: tid, User: owner},
		Profile: mustProfile(t)})
	if err != nil {
		t.Fatal(err)
	}
	gid := res.Group
	for _, u := range []domain.UserID{bob, carol} {
		if _, err := e.groups.JoinGroup.Handle(ctx, group.JoinGroup{Actor: domain.Principal{Tenant: tid, User: u}, Group: gid}); err != nil {
			t.Fatal(err)
		}
	}
	g := gid.String()

	// user.*
	if d := e.ok(command(ten, domain.CmdUserBan, fmt.Sprintf(`{"user_id":"%s","reason":"spam"}`, bob))); d["banned"] != true {
		t.Fatalf("ban: %v", d)
	}
	if err := e.guard.Check(tid, bob, time.Now()); err == nil {
		t.Fatal("the guard admits a banned user")
	}
	if d := e.ok(command(ten, domain.CmdUserBan, fmt.Sprintf(`{"user_id":"%s"}`, bob))); d["unchanged"] != true {
		t.Fatalf("second ban: %v", d)
	}
	e.ok(command(ten, domain.CmdUserUnban, fmt.Sprintf(`{"user_id":"%s"}`, bob)))
	e.ok(command(ten, domain.CmdUserKick, fmt.Sprintf(`{"user_id":"%s","reason":"rude"}`, bob)))
	before := time.Now()
	time.Sleep(2 * time.Millisecond)
	if d := e.ok(command(ten, domain.CmdUserRevokeTokens, fmt.Sprintf(`{"user_id":"%s"}`, carol))); d["not_before"] == nil {
		t.Fatalf("revoke: %v", d)
	}
	if err := e.guard.Check(tid, carol, before); err == nil {
		t.Fatal("a token from before the revocation is admitted")
	}
	e.ok(command(ten, domain.CmdUserResetPassword, fmt.Sprintf(`{"user_id":"%s","password":"brand new secret"}`, carol)))
	if u, err := e.accounts.Login(ctx, tid, "carol", "brand new secret"); err != nil || u != carol {
		t.Fatalf("login with the reset password: %v %v", u, err)
	}
	evs, err := e.store.ReadStream(ctx, tid, domain.AccountStreamID(bob), 0, 0)
	if err != nil || len(evs) != 3 || evs[0].EventType != domain.EventUserBanned || evs[0].Actor.ID != "ops-7" || evs[2].EventType != domain.EventUserKicked {
		t.Fatalf("bob's account stream: %d events %v", len(evs), err)
	}

	// group.*
	e.ok(command(ten, domain.CmdGroupAnnounce, fmt.Sprintf(`{"group_id":"%s","text":"be nice"}`, g)))
	e.ok(command(ten, domain.CmdGroupMuteAll, fmt.Sprintf(`{"group_id":"%s","mute_all":true}`, g)))
	st, _ := e.loader.Group(ctx, tid, gid, 0)
	if st.Announcement() != "be nice" || !st.Settings().MuteAll {
		t.Fatalf("group after announcement and mute_all: %q %+v", st.Announcement(), st.Settings())
	}
	e.rejected(command(ten, domain.CmdGroupRemoveMember, fmt.Sprintf(`{"group_id":"%s","user_id":"%s"}`, g, owner)), domain.ReasonCannotRemoveOwner)
	e.ok(command(ten, domain.CmdGroupRemoveMember, fmt.Sprintf(`{"group_id":"%s","user_id":"%s","ban":true}`, g, carol)))
	if m, _ := e.loader.Membership(ctx, tid, gid, carol, 0); m.IsMember() || !m.Banned() {
		t.Fatal("carol is still a member, or not banned from the group")
	}
	e.ok(command(ten, domain.CmdGroupTransfer, fmt.Sprintf(`{"group_id":"%s","to":"%s"}`, g, bob)))
	if st, _ := e.loader.Group(ctx, tid, gid, 0); st.Owner() != bob {
		t.Fatalf("owner after transfer: %s", st.Owner())
	}

	// message.*: a system message to the group as its owner, then its recall by moderation.
	d := e.ok(command(ten, domain.CmdMessageBroadcast, fmt.Sprintf(`{"group_id":"%s","content":{"text":"maintenance tonight"}}`, g)))
	if d["scope"] != "group" || d["seq"] != "1" {
		t.Fatalf("group broadcast: %v", d)
	}
	topic, _ := gid.Topic()
	msgs, _ := e.store.ReadStream(ctx, tid, topic.String(), 0, 0)
	var sent domain.MessageSent
	if len(msgs) != 1 || msgs[0].Decode(&sent) != nil || sent.MsgType != domain.MsgSystem || sent.From != bob || msgs[0].Actor.Type != domain.ActorAdmin {
		t.Fatalf("broadcast message: %+v actor %+v", sent, msgs)
	}
	e.rejected(command(ten, domain.CmdMessageRecall, fmt.Sprintf(`{"topic":"%s","seq":"1","reason":""}`, topic)), "invalid_payload")
	e.ok(command(ten, domain.CmdMessageRecall, fmt.Sprintf(`{"topic":"%s","seq":"1","reason":"wrong group"}`, topic)))
	e.rejected(command(ten, domain.CmdMessageRecall, fmt.Sprintf(`{"topic":"%s","seq":"1","reason":"again"}`, topic)), "already_recalled")
	e.rejected(command(ten, domain.CmdMessageRecall, fmt.Sprintf(`{"topic":"%s","seq":"9","reason":"x"}`, topic)), "not_found")
	if d := e.ok(command(ten, domain.CmdMessageBroadcast, `{"content":"hello everyone"}`)); d["scope"] != "tenant" {
		t.Fatalf("tenant broadcast: %v", d)
	}
	if bs, _ := e.store.ReadStream(ctx, tid, domain.TenantBroadcastStreamID, 0, 0); len(bs) != 1 || len(e.sent.tenants) != 1 {
		t.Fatalf("tenant broadcast recorded %d, delivered %d", len(bs), len(e.sent.tenants))
	}
	e.ok(command(ten, domain.CmdGroupDissolve, fmt.Sprintf(`{"group_id":"%s"}`, g)))
	e.rejected(command(ten, domain.CmdGroupAnnounce, fmt.Sprintf(`{"group_id":"%s","text":"x"}`, g)), domain.ReasonGroupDissolved)
	e.rejected(command(ten, domain.CmdGroupDissolve, `{"group_id":"424242"}`), "not_found")

	// tenant.*
	e.ok(command(ten, domain.CmdTenantConfigSet, `{"settings":{"registration_open":false,"max_content_bytes":null}}`))
	e.rejected(command(ten, domain.CmdTenantConfigSet, `{"settings":{"colour":"red"}}`), "invalid_payload")
	if d := e.ok(command(ten, domain.CmdTenantSuspend, `{"reason":"unpaid"}`)); d["status"] != "suspended" {
		t.Fatalf("suspend: %v", d)
	}
	if d := e.ok(command(ten, domain.CmdTenantResume, `{}`)); d["status"] != "active" {
		t.Fatalf("resume: %v", d)
	}
	info, _ = e.registry.Get(ctx, tid)
	if info.Settings.Registration() || info.Settings.MaxContentBytes != nil || info.NotBefore.IsZero() || info.Version != 4 {
		t.Fatalf("registry at the end: %+v", info)
	}
	var caused int
	if err := e.pool.QueryRow(ctx, `SELECT count(DISTINCT causation_id) FROM events WHERE tenant_id = $1 AND causation_id <> ''`,
		ten).Scan(&caused); err != nil || caused < 15 {
		t.Fatalf("commands that left events with their id as causation: %d %v", caused, err)
	}
	wantKey := ""
	if signed {
		wantKey = "platform-1"
	}
	var keys []string
	rows, err := e.pool.Query(ctx, `SELECT DISTINCT actor_key_id FROM events WHERE tenant_id = $1 AND causation_id <> ''`, ten)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if rows.Err() != nil || len(keys) != 1 || keys[0] != wantKey {
		t.Fatalf("key ids of the commands' events: %q %v, want %q", keys, rows.Err(), wantKey)
	}
}

func mustProfile(t *testing.T) domain.GroupProfile {
	p, err := domain.NewGroupProfile("moderated", "", "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRedeliveredCommandRunsOnce: the same command (same event_id) produced twice runs once and
// is answered the same result twice.
func TestRedeliveredCommandRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tid := newTenantID(t)
	e.ok(command(tid.String(), domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42)
	cmd := command(tid.String(), domain.CmdUserRevokeTokens, `{"user_id":"42","reason":"leaked"}`)
	first := e.send(cmd)
	events := e.events(tid)
	body, _ := json.Marshal(cmd)
	e.produce(commandTopic, "another-key", body) // produced again, on whatever partition
	second := e.await(cmd.EventID, 2)
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if first.Status != domain.AdminSucceeded || string(a) != string(b) {
		t.Fatalf("answers differ:\n%s\n%s", a, b)
	}
	time.Sleep(200 * time.Millisecond)
	if got := e.events(tid); got != events {
		t.Fatalf("the repeat wrote %d more events", got-events)
	}
	evs, _ := e.store.ReadStream(testenv.Context(t), tid, domain.AccountStreamID(42), 0, 0)
	if len(evs) != 1 {
		t.Fatalf("revocations stored: %d, want 1", len(evs))
	}
}

// TestRejectedCommandsChangeNothing: bad envelopes and payloads, unknown tenants and forged
// actors are answered rejected with a stable reason at once, and write nothing.
func TestRejectedCommandsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	base := e.events(tid)
	forged := command(ten, domain.CmdUserBan, `{"user_id":"5"}`)
	forged.Actor = domain.Actor{Type: domain.ActorUser, ID: "5"}
	noActor := command(ten, domain.CmdUserBan, `{"user_id":"5"}`)
	noActor.Actor = domain.Actor{}
	badVersion := command(ten, domain.CmdUserBan, `{"user_id":"5"}`)
	badVersion.Version = 2
	wrongTarget := command(ten, domain.CmdUserBan, `{"user_id":"5"}`)
	wrongTarget.TargetService = "hotgo"
	noSource := command(ten, domain.CmdUserBan, `{"user_id":"5"}`)
	noSource.SourceService = ""
	noTime := command(ten, domain.CmdUserBan, `{"user_id":"5"}`)
	noTime.OccurredAt = time.Time{}
	for _, c := range []struct {
		cmd    domain.AdminCommand
		reason string
		field  string
	}{
		{command(ten, domain.CmdUserBan, `{"reason":"no user"}`), "invalid_payload", "user_id"},
		{command(ten, domain.CmdUserBan, `{"user_id":42}`), "invalid_payload", "payload"},
		{command(ten, domain.CmdUserBan, `{"user_id":"42","colour":"red"}`), "invalid_payload", "payload"},
		{command(ten, domain.CmdGroupMuteAll, `{"group_id":"grp","mute_all":true}`), "invalid_payload", "group_id"},
		{command("nosuch", domain.CmdUserBan, `{"user_id":"5"}`), domain.ReasonTenantNotFound, ""},
		{command("Not A Tenant", domain.CmdUserBan, `{"user_id":"5"}`), "invalid_envelope", "tenant_id"},
		{forged, "actor_forbidden", "actor"},
		{noActor, "actor_forbidden", "actor"},
		{badVersion, "unsupported_version", ""},
		{wrongTarget, "invalid_envelope", "target_service"},
		{command(ten, "user.delete", `{}`), "unknown_command", ""},
		{command(ten, domain.CmdGroupMuteAll, `{"group_id":"7"}`), "invalid_payload", "mute_all"},
		{command(ten, domain.CmdGroupAnnounce, `{"group_id":"7"}`), "invalid_payload", "text"},
		{noSource, "invalid_envelope", "source_service"},
		{noTime, "invalid_envelope", "occurred_at"},
	} {
		r := e.rejected(c.cmd, c.reason)
		if c.field != "" && r.Details["field"] != c.field {
			t.Errorf("%s %s: details %v, want field %s", c.cmd.EventType, c.reason, r.Details, c.field)
		}
		if r.CommandEventID != c.cmd.EventID.String() || r.TenantID != c.cmd.TenantID || r.ConsumerGroup != "admin-test" {
			t.Errorf("result does not name its command: %+v", r)
		}
	}
	// Without a payload (the schema requires one, {} at least).
	noPayload := command(ten, domain.CmdTenantResume, `{}`)
	body, _ := json.Marshal(noPayload)
	e.produce(commandTopic, "no-payload", []byte(strings.Replace(string(body), `,"payload":{}`, "", 1)))
	if r := e.await(noPayload.EventID, 1); r.Reason != "invalid_envelope" || r.Details["field"] != "payload" {
		t.Errorf("a command without a payload: %+v", r)
	}
	// Not even an envelope: answered with what can be told, keyed like the record.
	e.produce(commandTopic, "garbage-key", []byte(`not json`))
	deadline := time.Now().Add(20 * time.Second)
	for {
		found := false
		for _, m := range e.results.snapshot() {
			var r domain.AdminResult
			if string(m.Key) == "garbage-key" && json.Unmarshal(m.Value, &r) == nil && r.Reason == "invalid_envelope" {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no rejection of a record that is not JSON")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.events(tid); got != base {
		t.Fatalf("rejected commands wrote %d events", got-base)
	}
	if _, err := e.registry.Get(testenv.Context(t), domain.MustTenantID("nosuch")); err == nil {
		t.Fatal("a command for an unknown tenant created it")
	}
}

// TestUserCommandsOnUnknownUserAreNotFound: every user command naming a user without an account
// in the command's tenant (an id never issued, the largest id, a user of another tenant) is
// rejected not_found and writes nothing, in neither tenant.
func TestUserCommandsOnUnknownUserAreNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	tid, other := newTenantID(t), newTenantID(t)
	e.ok(command(tid.String(), domain.CmdTenantProvision, `{}`))
	e.ok(command(other.String(), domain.CmdTenantProvision, `{}`))
	stranger, err := e.accounts.Register(ctx, account.Register{Tenant: other, Login: "stranger", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	base, baseOther := e.events(tid), e.events(other)
	for _, uid := range []string{"9223372036854775807", "424242", stranger.User.String()} {
		for _, c := range []struct {
			typ     domain.AdminCommandType
			payload string
		}{
			{domain.CmdUserBan, `{"user_id":"%s","reason":"spam"}`},
			{domain.CmdUserUnban, `{"user_id":"%s"}`},
			{domain.CmdUserKick, `{"user_id":"%s"}`},
			{domain.CmdUserRevokeTokens, `{"user_id":"%s"}`},
			{domain.CmdUserResetPassword, `{"user_id":"%s","password":"brand new secret"}`},
		} {
			e.rejected(command(tid.String(), c.typ, fmt.Sprintf(c.payload, uid)), "not_found")
		}
	}
	if n, m := e.events(tid), e.events(other); n != base || m != baseOther {
		t.Fatalf("events after the rejected commands: %d and %d, want %d and %d", n, m, base, baseOther)
	}
	if err := e.guard.Check(other, stranger.User, time.Now()); err != nil {
		t.Fatalf("the other tenant's user is refused: %v", err)
	}
}
