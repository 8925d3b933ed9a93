package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// interleaved is the real action token service with a step run between a consume's
// precondition passing and the token being spent (what another request does in that gap), and
// one run with the request's context once the token is spent.
type interleaved struct {
	rest.ActionTokenService
	between func()
	spent   func(ctx context.Context)
}

func (s *interleaved) ConsumeIf(ctx context.Context, tenant domain.TenantID, token string, action actiontoken.Action,
	by domain.UserID, check func(actiontoken.Consumed) error) (actiontoken.Consumed, error) {
	c, err := s.ActionTokenService.ConsumeIf(ctx, tenant, token, action, by, func(c actiontoken.Consumed) error {
		if check != nil {
			if err := check(c); err != nil {
				return err
			}
		}
		if step := s.between; step != nil {
			s.between = nil
			step()
		}
		return nil
	})
	if step := s.spent; step != nil && err == nil {
		s.spent = nil
		step(ctx)
	}
	return c, err
}

// TestInviteLinkRefusedAfterTheCheckStaysActive: a join on a link that the group refuses once
// the token is spent (the last seat taken, the group dissolved by a request that landed after the
// join was checked) answers the refusal and leaves the token active, as one refused at the check
// does: the consumer uses it once a seat is free, and a dissolved group's link says so rather
// than action_token_used.
func TestInviteLinkRefusedAfterTheCheckStaysActive(t *testing.T) {
	t.Parallel()
	tokens := &interleaved{}
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true, groups: group.Config{MaxMembers: 3},
		tokens: func(svc rest.ActionTokenService) rest.ActionTokenService {
			tokens.ActionTokenService = svc
			return tokens
		}})
	owner, member, filler, joiner, late := s.token(t, s.tenant, 1), s.token(t, s.tenant, 2), s.token(t, s.tenant, 3),
		s.token(t, s.tenant, 4), s.token(t, s.tenant, 5)
	created := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: owner, key: "g", body: `{"name":"Links"}`})
	expect(t, "create group", created, http.StatusCreated, "ok")
	gid := created.data(t)["group_id"].(string)
	groupPath := "/v1/im/groups/" + gid
	expect(t, "member joins", s.do(t, req{method: http.MethodPost, path: groupPath + "/join", token: member, key: "j2"}), http.StatusOK, "ok")
	s.project(t)
	issue := func(key string) string {
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/action-tokens", token: owner, key: key,
			body: `{"action":"join_group","subject":"grp` + gid + `"}`})
		expect(t, "issue a link", a, http.StatusCreated, "ok")
		return a.data(t)["token"].(string)
	}
	consume := func(who, key, token string) answer {
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/action-tokens/consume", token: who, key: key,
			body: fmt.Sprintf(`{"action":"join_group","token":%q}`, token)})
	}

	// The last seat goes to a direct join between the check and the spend.
	link := issue("link-1")
	tokens.between = func() {
		expect(t, "the last seat", s.do(t, req{method: http.MethodPost, path: groupPath + "/join", token: filler, key: "j3"}), http.StatusOK, "ok")
	}
	expect(t, "consume into a group filled meanwhile", consume(joiner, "c1", link), http.StatusForbidden, domain.ReasonGroupFull)
	expect(t, "the filler leaves", s.do(t, req{method: http.MethodPost, path: groupPath + "/leave", token: filler, key: "l3"}), http.StatusOK, "ok")
	expect(t, "the same link once a seat is free", consume(joiner, "c2", link), http.StatusOK, "ok")

	// The group is dissolved between the check and the spend.
	expect(t, "a member leaves", s.do(t, req{method: http.MethodPost, path: groupPath + "/leave", token: member, key: "l2"}), http.StatusOK, "ok")
	second := issue("link-2")
	tokens.between = func() {
		expect(t, "dissolve", s.do(t, req{method: http.MethodDelete, path: groupPath, token: owner, key: "d"}), http.StatusOK, "ok")
	}
	expect(t, "consume into a group dissolved meanwhile", consume(late, "c3", second), http.StatusForbidden, domain.ReasonGroupDissolved)
	expect(t, "the link again", consume(late, "c4", second), http.StatusForbidden, domain.ReasonGroupDissolved)
}

// TestInviteLinkJoinOutlivesTheClient: a client that goes away once its link's token is spent
// (a phone losing its connection) still joins the group the token was spent on, instead of
// losing both the token and the join.
func TestInviteLinkJoinOutlivesTheClient(t *testing.T) {
	t.Parallel()
	tokens := &interleaved{}
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true,
		tokens: func(svc rest.ActionTokenService) rest.ActionTokenService {
			tokens.ActionTokenService = svc
			return tokens
		}})
	owner := s.token(t, s.tenant, 1)
	created := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: owner, key: "g", body: `{"name":"Links"}`})
	expect(t, "create group", created, http.StatusCreated, "ok")
	gid := created.data(t)["group_id"].(string)
	s.project(t)
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/action-tokens", token: owner, key: "link",
		body: `{"action":"join_group","subject":"grp` + gid + `"}`})
	expect(t, "issue a link", a, http.StatusCreated, "ok")
	link := a.data(t)["token"].(string)

	ctx, leave := context.WithCancel(testCtx(t))
	defer leave()
	tokens.spent = func(server context.Context) {
		leave()
		select {
		case <-server.Done():
		case <-time.After(5 * time.Second):
			t.Error("the server did not see the client go")
		}
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/v1/im/action-tokens/consume",
		strings.NewReader(fmt.Sprintf(`{"action":"join_group","token":%q}`, link)))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+s.token(t, s.tenant, 4))
	hr.Header.Set(rest.HeaderIdempotencyKey, "c1")
	if resp, err := s.srv.Client().Do(hr); err == nil {
		resp.Body.Close()
		t.Fatalf("the client that left got an answer: %d", resp.StatusCode)
	}

	g, err := domain.ParseGroupID(gid)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		evs, err := s.store.ReadStream(testCtx(t), s.tenant, domain.MembershipStreamID(g, 4), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 && evs[len(evs)-1].EventType == domain.EventMemberJoined {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer who left is no member (%d events), and the token is spent", len(evs))
		}
	}
}

// TestInviteLinkTTLPastAnyDurationIsOutOfRange: a ttl_seconds too large for a duration (about
// 292 years and more) is 400 out_of_range like any over the maximum, never a token with the
// lifetime its wrapped-around product happens to give (18446744075 s made one of 1.3 s).
func TestInviteLinkTTLPastAnyDurationIsOutOfRange(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true})
	owner := s.token(t, s.tenant, 1)
	created := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: owner, key: "g", body: `{"name":"Links"}`})
	expect(t, "create group", created, http.StatusCreated, "ok")
	gid := created.data(t)["group_id"].(string)
	s.project(t)
	for i, ttl := range []string{"18446744075", "9223372037", "9223372036854775807"} {
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/action-tokens", token: owner, key: "link-" + strconv.Itoa(i),
			body: `{"action":"join_group","subject":"grp` + gid + `","ttl_seconds":` + ttl + `}`})
		expectInvalid(t, "ttl_seconds "+ttl, a, "ttl_seconds", "out_of_range")
	}
}

// TestConsumeEndpointSpendsOnlyInviteLinks: a reset_password token presented to the generic
// consume endpoint is refused and stays active: spending it there would only burn it.
func TestConsumeEndpointSpendsOnlyInviteLinks(t *testing.T) {
	t.Parallel()
	var tokens rest.ActionTokenService
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true,
		tokens: func(svc rest.ActionTokenService) rest.ActionTokenService { tokens = svc; return svc }})
	user := s.token(t, s.tenant, 7)
	iss, err := tokens.Issue(testCtx(t), actiontoken.Issue{Tenant: s.tenant, Action: actiontoken.ActionResetPassword, Subject: "7"})
	if err != nil {
		t.Fatal(err)
	}
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/action-tokens/consume", token: user, key: "c1",
		body: fmt.Sprintf(`{"action":"reset_password","token":%q}`, iss.Token)})
	if a.Status == http.StatusOK {
		t.Fatalf("a reset_password token spent on the consume endpoint: %s", a.Raw)
	}
	if _, err := tokens.ConsumeIf(testCtx(t), s.tenant, iss.Token, actiontoken.ActionResetPassword, 7, nil); err != nil {
		t.Fatalf("the token after the refused consume: %v, want it still active", err)
	}
}
