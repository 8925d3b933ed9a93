package scenariotest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/commands/session"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// Env is what the scenario writes with.
type Env struct {
	Store *eventstore.Store
	Redis *redis.Client
	// KeyPrefix isolates the send path's Redis keys.
	KeyPrefix string
}

// Result names what a scenario created.
type Result struct {
	Group      domain.GroupID
	GroupTopic domain.Topic
	Direct     domain.Topic
	// Sent is the number of messages sent.
	Sent int
}

// Users of the scenario.
const (
	Owner  domain.UserID = 101
	Admin  domain.UserID = 102
	Member domain.UserID = 103
	Friend domain.UserID = 104
)

// Write writes the scenario for tenant with messages group messages (at least 3) and fails t on
// any refusal. Each call in one tenant needs a fresh tenant: groups and streams are new.
func Write(ctx context.Context, t testing.TB, env Env, tenant domain.TenantID, messages int) Result {
	t.Helper()
	w := writer{ctx: ctx, t: t, tenant: tenant}
	g, err := group.New(group.Deps{Store: env.Store}, group.Config{})
	w.must("group handlers", err)
	send, err := message.NewSendMessageHandler(message.SendMessageDeps{Store: env.Store, Redis: env.Redis},
		message.SendMessageConfig{Seq: seq.Config{KeyPrefix: env.KeyPrefix}})
	w.must("send handler", err)
	defer send.Close()
	ops, err := message.NewMessageOpsHandler(message.MessageOpsDeps{Store: env.Store}, message.MessageOpsConfig{})
	w.must("message ops handler", err)

	storetest.RegisterUsers(t, env.Store, tenant, Owner, Admin, Member, Friend)
	gid := w.groupAndFriends(g)
	gt, err := domain.GroupTopic(int64(gid))
	w.must("group topic", err)
	dt, err := domain.DirectTopic(Owner, Friend)
	w.must("direct topic", err)
	w.send(send, gt, dt, messages)
	w.operate(ops, gt, dt)
	w.session(env)

	_, err = g.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: w.p(Admin), Group: gid})
	w.must("leave", err)
	return Result{Group: gid, GroupTopic: gt, Direct: dt, Sent: max(messages, 3) + 2}
}

// writer writes the steps of one scenario in one tenant.
type writer struct {
	ctx    context.Context
	t      testing.TB
	tenant domain.TenantID
}

// must fails the test when the step what failed.
func (w writer) must(what string, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("scenario: %s: %v", what, err)
	}
}

// p is the principal of user u in the scenario's tenant.
func (w writer) p(u domain.UserID) domain.Principal {
	return domain.Principal{Tenant: w.tenant, User: u}
}

// groupAndFriends creates the group with its members, roles, a mute and an announcement, makes
// Owner and Friend friends and updates Owner's profile; it answers the group.
func (w writer) groupAndFriends(g *group.Handlers) domain.GroupID {
	w.t.Helper()
	ctx, p, must := w.ctx, w.p, w.must
	res, err := g.CreateGroup.Handle(ctx, group.CreateGroup{Actor: p(Owner), Profile: profile(w.t, "analysts")})
	must("create group", err)
	gid := res.Group
	for _, u := range []domain.UserID{Admin, Member} {
		_, err := g.JoinGroup.Handle(ctx, group.JoinGroup{Actor: p(u), Group: gid})
		must("join", err)
	}
	_, err = g.SetRole.Handle(ctx, group.SetRole{Actor: p(Owner), Group: gid, User: Admin, Role: domain.RoleAdmin})
	must("set role", err)
	_, err = g.MuteMember.Handle(ctx, group.MuteMember{Actor: p(Owner), Group: gid, User: Member, Until: time.Now().Add(time.Hour)})
	must("mute", err)
	_, err = g.UnmuteMember.Handle(ctx, group.UnmuteMember{Actor: p(Admin), Group: gid, User: Member})
	must("unmute", err)
	_, err = g.UpdateAnnouncement.Handle(ctx, group.UpdateAnnouncement{Actor: p(Owner), Group: gid, Text: "read the <rules> & \"be nice\""})
	must("announcement", err)
	_, err = g.RequestFriend.Handle(ctx, group.RequestFriend{Actor: p(Owner), Peer: Friend, Message: "hi"})
	must("friend request", err)
	_, err = g.AcceptFriend.Handle(ctx, group.AcceptFriend{Actor: p(Friend), Peer: Owner})
	must("accept friend", err)
	up, err := domain.NewUserProfile("Ana", "", "numbers")
	must("profile", err)
	_, err = g.UpdateProfile.Handle(ctx, group.UpdateProfile{Actor: p(Owner), Patch: up.Patch()})
	must("update profile", err)
	return gid
}

// send sends messages group messages (at least 3) to gt from Owner, Admin and Member in turn,
// then two 1:1 messages to dt, from Owner and from Friend.
func (w writer) send(send *message.SendMessageHandler, gt, dt domain.Topic, messages int) {
	w.t.Helper()
	senders := []domain.UserID{Owner, Admin, Member}
	for i := range max(messages, 3) {
		content, _ := json.Marshal(map[string]any{"text": "message " + strconv.Itoa(i), "n": i})
		cmd, err := message.NewSendMessage(message.SendMessageInput{Tenant: w.tenant.String(),
			From: senders[i%len(senders)].String(), Topic: gt.String(), ClientMsgID: "g-" + strconv.Itoa(i),
			Content: content, TraceID: ""}, 0)
		w.must("group message", err)
		_, err = send.Handle(w.ctx, cmd)
		w.must("send group message", err)
	}
	for i, from := range []domain.UserID{Owner, Friend} {
		cmd, err := message.NewSendMessage(message.SendMessageInput{Tenant: w.tenant.String(), From: from.String(),
			Topic: dt.String(), ClientMsgID: "d-" + strconv.Itoa(i), MsgType: "text", Content: json.RawMessage(`"hello\u2028there"`),
			Head: json.RawMessage(`{"reply_seq":"1"}`)}, 0)
		w.must("direct message", err)
		_, err = send.Handle(w.ctx, cmd)
		w.must("send direct message", err)
	}
}

// operate edits, recalls and deletes for Owner a group message each, and marks both topics read.
func (w writer) operate(ops *message.MessageOpsHandler, gt, dt domain.Topic) {
	w.t.Helper()
	ctx, must := w.ctx, w.must
	ref := func(topic domain.Topic, seq int64, actor domain.UserID) message.MessageRef {
		return message.MessageRef{Tenant: w.tenant, Topic: topic, Seq: seq, Actor: actor}
	}
	edited, _ := domain.NewContent([]byte(`{"text":"message 0, edited"}`), 0)
	_, err := ops.Edit(ctx, message.EditMessage{MessageRef: ref(gt, 1, Owner), Version: 1, Content: edited})
	must("edit", err)
	_, err = ops.Recall(ctx, ref(gt, 2, Admin))
	must("recall", err)
	_, err = ops.DeleteForMe(ctx, ref(gt, 3, Owner))
	must("delete for me", err)
	_, err = ops.MarkRead(ctx, message.MarkRead{Tenant: w.tenant, Topic: gt, User: Member, ReadSeq: 2})
	must("mark read", err)
	_, err = ops.MarkRead(ctx, message.MarkRead{Tenant: w.tenant, Topic: dt, User: Friend, ReadSeq: 1})
	must("mark read 1:1", err)
}

// session records a session of Member opened and closed, through a running session recorder.
func (w writer) session(env Env) {
	w.t.Helper()
	ctx, tenant := w.ctx, w.tenant
	rec, err := session.NewRecorder(env.Store, session.RecorderConfig{Node: "node-a"}, nil)
	w.must("session recorder", err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(rctx) }()
	w.must("session opened", rec.Opened(ctx, tenant, Member, "s-"+tenant.String(), "test/1.0"))
	w.must("session closed", rec.Closed(ctx, tenant, Member, "s-"+tenant.String(), "client_closed"))
	stop()
	<-done
}

func profile(t testing.TB, name string) domain.GroupProfile {
	t.Helper()
	p, err := domain.NewGroupProfile(name, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Count returns how many events tenant has in store.
func Count(ctx context.Context, t testing.TB, store *eventstore.Store, tenant domain.TenantID) int64 {
	t.Helper()
	n, err := store.Count(ctx, eventstore.Filter{Tenant: tenant})
	if err != nil {
		t.Fatal(fmt.Errorf("scenario: count: %w", err))
	}
	return n
}

// AppendMutedV1 appends a member.muted.v1 event, as builds before version 2 wrote it, to user's
// membership stream in group g: a mute until until, or a lift when until is zero. It returns the
// event as stored.
func AppendMutedV1(ctx context.Context, t testing.TB, store *eventstore.Store, tenant domain.TenantID, g domain.GroupID, user, by domain.UserID, until time.Time) domain.Envelope {
	t.Helper()
	stream := domain.MembershipStreamID(g, user)
	v, err := store.LastVersion(ctx, tenant, stream)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(domain.MemberMutedV1{GroupID: g, User: user, Until: until, By: by, MutedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	env := domain.Envelope{EventID: uuid.Must(uuid.NewV7()), TenantID: tenant, SourceService: domain.SourceService,
		EventType: domain.EventMemberMutedV1, BizType: domain.BizTypeMember, Version: 1, OccurredAt: time.Now().UTC(),
		Actor: domain.Actor{Type: domain.ActorUser, ID: by.String()}, StreamID: stream, StreamVersion: v + 1, Payload: payload}
	stored, err := store.Append(ctx, tenant, stream, v, []domain.Envelope{env})
	if err != nil {
		t.Fatalf("append member.muted.v1: %v", err)
	}
	return stored[0]
}
