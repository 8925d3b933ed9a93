package message_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// TestEditNeedsTheRightToPost: an edit puts new content in front of the members, so a sender
// muted or removed since sending may not edit; recalling their own message stays allowed.
func TestEditNeedsTheRightToPost(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, store := newPostgres(t, 8)
	tenant := domain.MustTenantID("opspolicy")
	loader, err := group.NewLoader(store, group.LoaderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := group.New(group.Deps{Store: store, Loader: loader}, group.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(policy.Deps{Loader: loader}, policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := message.NewMessageOpsHandler(message.MessageOpsDeps{Store: store, Policy: pol}, message.MessageOpsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := func(u domain.UserID) domain.Principal { return domain.Principal{Tenant: tenant, User: u} }
	storetest.RegisterUsers(t, store, tenant, alice, bob)
	profile, err := domain.NewGroupProfile("edits", "", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := groups.CreateGroup.Handle(ctx, group.CreateGroup{Actor: p(alice), Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.JoinGroup.Handle(ctx, group.JoinGroup{Actor: p(bob), Group: res.Group}); err != nil {
		t.Fatal(err)
	}
	e := &opsEnv{tenant: tenant, topic: res.Topic, store: store, h: h}
	first, second := e.send(t, bob, "one"), e.send(t, bob, "two")
	edit := func(seq int64) error {
		c, _ := domain.TextContent("edited", 0)
		_, err := h.Edit(ctx, message.EditMessage{MessageRef: e.ref(seq, bob), Version: 1, Content: c})
		return err
	}

	if _, err := groups.MuteMember.Handle(ctx, group.MuteMember{Actor: p(alice), Group: res.Group, User: bob,
		Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := edit(first); deniedReason(err) != "muted" {
		t.Fatalf("edit by a muted sender: %v, want denied muted", err)
	}
	if _, err := groups.UnmuteMember.Handle(ctx, group.UnmuteMember{Actor: p(alice), Group: res.Group, User: bob}); err != nil {
		t.Fatal(err)
	}
	if err := edit(first); err != nil {
		t.Fatalf("edit once the mute was lifted: %v", err)
	}
	if _, err := groups.RemoveMember.Handle(ctx, group.RemoveMember{Actor: p(alice), Group: res.Group, User: bob}); err != nil {
		t.Fatal(err)
	}
	if err := edit(second); deniedReason(err) != "not_member" {
		t.Fatalf("edit by a removed sender: %v, want denied not_member", err)
	}
	if got := e.opsEvents(t, second); len(got) != 0 {
		t.Fatalf("the refused edit wrote %v", got)
	}
	if _, err := h.Recall(ctx, e.ref(second, bob)); err != nil {
		t.Fatalf("recall by a removed sender: %v", err)
	}
}
