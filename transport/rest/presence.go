package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/presence"
)

// PresenceReader reads a user's presence; *presence.Store implements it. With Redis down it
// answers status "unknown" rather than failing (DESIGN §7).
type PresenceReader interface {
	Get(ctx context.Context, tenant domain.TenantID, user domain.UserID) (presence.Presence, error)
}

var _ PresenceReader = (*presence.Store)(nil)

// PresenceVisibility decides whether viewer may read user's presence; *policy.Policy implements
// it. A refusal is a *domain.DeniedError (answered 403 with its reason, blocked when user blocks
// viewer).
type PresenceVisibility interface {
	CanSeePresence(ctx context.Context, tenant domain.TenantID, viewer, user domain.UserID) error
}

// Presence is the data of a presence answer.
type Presence struct {
	UserID   string `json:"user_id" doc:"The user (64-bit, as a string)"`
	Status   string `json:"status" enum:"online,offline,unknown" doc:"online, offline, or unknown when presence could not be read"`
	Online   bool   `json:"online" doc:"True while the user has a live session on any node"`
	LastSeen string `json:"last_seen,omitempty" doc:"Last activity while online, or when the user went offline; UTC RFC 3339; absent when never seen or unknown"`
}

type userPath struct {
	UID string `path:"uid" doc:"User id (64-bit decimal, or usr<id>); \"me\" is the caller" example:"me"`
}

func (a *API) registerPresence() {
	huma.Register(a.huma, a.build(op{id: "get-presence", method: http.MethodGet, path: "/v1/im/users/{uid}/presence",
		summary: "Read a user's presence", tag: "users",
		desc: "Any user of the tenant may read another's presence, unless that user blocks the caller (403 blocked). " +
			"status is unknown when Redis does not answer.", errs: []int{http.StatusForbidden}}),
		func(ctx context.Context, in *userPath) (*reply[Presence], error) {
			p := principal(ctx)
			uid, err := userParam(p, "uid", in.UID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			if err := a.h.PresencePolicy.CanSeePresence(ctx, p.Tenant, p.User, uid); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			pr, err := a.h.Presence.Get(ctx, p.Tenant, uid)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, Presence{UserID: uid.String(), Status: string(pr.Status),
				Online: pr.Online, LastSeen: rfc3339(pr.LastSeen)}), nil
		})
}

// userParam parses a user id; "me" is the caller.
func userParam(p Principal, field, s string) (domain.UserID, error) {
	if s == "me" {
		return p.User, nil
	}
	u, err := domain.ParseUserID(s)
	if err != nil {
		return 0, &domain.ValidationError{Field: field, Reason: "bad_format", Detail: "a positive 64-bit decimal number, usr<id> or me"}
	}
	return u, nil
}
