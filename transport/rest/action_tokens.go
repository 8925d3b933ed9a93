package rest

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// ActionTokenService issues and consumes one-time action tokens; *actiontoken.Service
// implements it.
type ActionTokenService interface {
	Issue(ctx context.Context, in actiontoken.Issue) (actiontoken.Issued, error)
	ConsumeIf(ctx context.Context, tenant domain.TenantID, token string, action actiontoken.Action, by domain.UserID,
		check func(actiontoken.Consumed) error) (actiontoken.Consumed, error)
	Unconsume(ctx context.Context, tenant domain.TenantID, tokenID string, by domain.UserID) error
}

var _ ActionTokenService = (*actiontoken.Service)(nil)

// linkJoinTimeout bounds the join a spent invite link pays for, which outlives its request;
// unconsumeTimeout bounds giving back a token whose join failed.
const (
	linkJoinTimeout  = 10 * time.Second
	unconsumeTimeout = 5 * time.Second
)

// IssueActionTokenRequest is the body of POST /v1/im/action-tokens.
type IssueActionTokenRequest struct {
	Action     string `json:"action" enum:"join_group" doc:"What the token allows. Over REST only join_group (an invite link of a group the caller reads)."`
	Subject    string `json:"subject" doc:"What the action applies to: the group topic for join_group" example:"grp42"`
	TTLSeconds int    `json:"ttl_seconds,omitempty" doc:"Lifetime in seconds; default one day, at most 30 days"`
}

// ActionTokenIssued is the data of an issued token.
type ActionTokenIssued struct {
	Token     string `json:"token" doc:"The token, shown once; only its hash is stored"`
	TokenID   string `json:"token_id" doc:"The token's id, for audit and revocation"`
	ExpiresAt string `json:"expires_at" doc:"UTC RFC 3339"`
}

// ConsumeActionTokenRequest is the body of POST /v1/im/action-tokens/consume.
type ConsumeActionTokenRequest struct {
	Action string `json:"action" enum:"join_group" doc:"The action the token must be for: join_group (reset_password tokens are spent by the password reset itself)"`
	Token  string `json:"token" doc:"The token"`
}

// ActionTokenConsumed is the data of a consumed token.
type ActionTokenConsumed struct {
	TokenID    string         `json:"token_id"`
	Action     string         `json:"action"`
	Subject    string         `json:"subject"`
	ConsumedAt string         `json:"consumed_at" doc:"UTC RFC 3339"`
	Joined     *CommandResult `json:"joined,omitempty" doc:"join_group: the group the caller joined on the link"`
}

type issueActionTokenInput struct {
	IdempotencyHeader
	Body IssueActionTokenRequest
}

type consumeActionTokenInput struct {
	IdempotencyHeader
	Body ConsumeActionTokenRequest
}

// registerActionTokens registers the issue and the consumption of one-time action tokens.
func (a *API) registerActionTokens() {
	huma.Register(a.huma, a.build(op{id: "issue-action-token", method: http.MethodPost, path: "/v1/im/action-tokens",
		summary: "Issue a one-time action token", tag: "action-tokens", status: http.StatusCreated,
		errs: []int{http.StatusForbidden},
		desc: "Issues a token for a sensitive action, to be consumed once. Over REST: join_group for a group topic the " +
			"caller may invite into (an invite link). 403 forbidden for other actions; 403 not_member when the caller does " +
			"not read the group, not_admin or not_owner when the group's who_may_invite leaves the caller out."}),
		a.issueActionToken)
	huma.Register(a.huma, a.build(op{id: "consume-action-token", method: http.MethodPost, path: "/v1/im/action-tokens/consume",
		summary: "Consume a one-time action token", tag: "action-tokens", errs: []int{http.StatusForbidden},
		desc: "Consumes the token for the action, once: of any number of concurrent consumers exactly one succeeds. " +
			"403 action_token_invalid (unknown, or of another action), action_token_used, action_token_expired. " +
			"join_group: the caller joins the link's group, with or without join approval, as on an invitation of the " +
			"issuer's (answer: joined); 403 already_member, banned, group_full, group_dissolved, and not_member, not_admin " +
			"or not_owner when the issuer may no longer invite: the token is then not spent. " +
			"503 retry when Redis is down: tokens fail closed."}),
		a.consumeActionToken)
}

// joinGroupAction parses the action of a request to issue or consume a token: only join_group
// tokens are issued here, and spending another action's token here would do nothing but burn
// it, so any other action is forbidden.
func joinGroupAction(raw string) (actiontoken.Action, error) {
	action, err := actiontoken.ParseAction(raw)
	if err != nil {
		return "", err
	}
	if action != actiontoken.ActionJoinGroup {
		return "", domain.ErrForbidden
	}
	return action, nil
}

// issueActionToken issues an invite link of a group the caller may invite into.
func (a *API) issueActionToken(ctx context.Context, in *issueActionTokenInput) (*reply[ActionTokenIssued], error) {
	p := principal(ctx)
	action, err := joinGroupAction(in.Body.Action)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	topic, err := domain.ParseTopic(in.Body.Subject)
	if err != nil || topic.Kind() != domain.TopicGroup {
		return nil, a.fail(ctx, &domain.ValidationError{Field: "subject", Reason: "bad_format", Detail: "a group topic grp<id>"})
	}
	if a.h.ReadPolicy == nil {
		return nil, a.fail(ctx, domain.ErrForbidden)
	}
	if err := a.h.ReadPolicy.CanRead(ctx, p.Tenant, p.User, topic); err != nil {
		return nil, a.fail(ctx, err)
	}
	if a.h.Groups != nil {
		// A link is an invitation of the issuer's: one who may not invite gets none.
		if err := a.h.Groups.JoinOnLink.CheckInviter(ctx, p.domain(), domain.GroupID(topic.GroupID())); err != nil {
			return nil, a.fail(ctx, err)
		}
	}
	if in.Body.TTLSeconds < 0 {
		return nil, a.fail(ctx, &domain.ValidationError{Field: "ttl_seconds", Reason: "out_of_range", Detail: "positive"})
	}
	ttl := time.Duration(in.Body.TTLSeconds) * time.Second
	if int64(in.Body.TTLSeconds) > math.MaxInt64/int64(time.Second) {
		ttl = math.MaxInt64 // past any duration, so past the maximum: not the product wrapped around
	}
	iss, err := a.h.ActionTokens.Issue(ctx, actiontoken.Issue{Tenant: p.Tenant, Action: action, Subject: topic.String(),
		By: p.User, TTL: ttl})
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	return respond(ctx, http.StatusCreated, ActionTokenIssued{Token: iss.Token, TokenID: iss.TokenID, ExpiresAt: rfc3339(iss.ExpiresAt)}), nil
}

// consumeActionToken spends a token of the caller's and does what it allows: a join_group token
// joins the link's group, and is given back when the join is refused.
func (a *API) consumeActionToken(ctx context.Context, in *consumeActionTokenInput) (*reply[ActionTokenConsumed], error) {
	p := principal(ctx)
	action, err := joinGroupAction(in.Body.Action)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	var (
		check func(actiontoken.Consumed) error
		join  group.JoinOnLink
	)
	if action == actiontoken.ActionJoinGroup && a.h.Groups != nil {
		// The token is spent only on a join that can happen now: one refused for a ban,
		// a full group or an inviter who may no longer invite leaves it active.
		check = func(c actiontoken.Consumed) error {
			topic, err := domain.ParseTopic(c.Subject)
			if err != nil || topic.Kind() != domain.TopicGroup || c.IssuedBy <= 0 {
				return domain.Deny(actiontoken.ReasonTokenInvalid)
			}
			join = group.JoinOnLink{Actor: p.domain(), Group: domain.GroupID(topic.GroupID()), Inviter: c.IssuedBy, Meta: meta(ctx)}
			return a.h.Groups.JoinOnLink.Check(ctx, join)
		}
	}
	c, err := a.h.ActionTokens.ConsumeIf(ctx, p.Tenant, in.Body.Token, action, p.User, check)
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	out := ActionTokenConsumed{TokenID: c.TokenID, Action: string(c.Action), Subject: c.Subject, ConsumedAt: rfc3339(c.ConsumedAt)}
	if check != nil {
		// The token is spent: the join runs to its end even when the client goes away, or
		// the token would be lost with it.
		jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), linkJoinTimeout)
		res, err := a.h.Groups.JoinOnLink.Handle(jctx, join)
		cancel()
		if err != nil {
			// The join was checked but refused when written (a request between the two took
			// the last seat, dissolved the group, banned the consumer): the token was spent
			// on nothing, so it is given back.
			a.unconsume(ctx, c, err)
			return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
		}
		out.Joined = &CommandResult{GroupID: res.Group.String(), Topic: res.Topic.String(), Unchanged: res.Unchanged}
	}
	return respond(ctx, http.StatusOK, out), nil
}

// unconsume gives back the token c of the caller when the join it paid for failed with err and
// nothing was written: a refusal or every attempt lost to another writer. A join that failed on
// the store or ran out of time may have been written, so its token stays spent: a link never
// admits two.
func (a *API) unconsume(ctx context.Context, c actiontoken.Consumed, err error) {
	if errors.Is(err, domain.ErrRetryable) || !errors.Is(err, domain.ErrForbidden) &&
		!errors.Is(err, domain.ErrConcurrency) && !errors.Is(err, domain.ErrNotFound) {
		return
	}
	p := principal(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unconsumeTimeout)
	defer cancel()
	if err := a.h.ActionTokens.Unconsume(ctx, p.Tenant, c.TokenID, p.User); err != nil {
		a.cfg.Logger.WarnContext(ctx, "could not give back an action token whose join failed", "request_id", RequestID(ctx),
			"tenant_id", p.Tenant.String(), "token_id", c.TokenID, "err", err)
	}
}
