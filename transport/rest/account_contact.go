package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/verify"
)

// BindContactRequest is the body of PUT /v1/im/account/contact.
type BindContactRequest struct {
	Password string `json:"password" doc:"The caller's current password"`
	Phone    string `json:"phone,omitempty" doc:"The phone number to reset the password with. Give a phone or an email." example:"+8613800138000"`
	Email    string `json:"email,omitempty" doc:"The e-mail address to reset the password with."`
	Code     string `json:"code" doc:"A code of scene change_phone sent to it (POST /v1/im/verify/codes)" example:"123456"`
}

// ContactBound is the data of a contact bound.
type ContactBound struct {
	Channel string `json:"channel" doc:"sms or email: the contact of this channel bound before is replaced"`
}

type bindContactInput struct {
	Body BindContactRequest
}

// registerContact registers binding a contact for password resets.
func (a *API) registerContact() {
	huma.Register(a.huma, a.build(op{id: "bind-contact", method: http.MethodPut, path: "/v1/im/account/contact",
		summary: "Bind a phone or e-mail for password resets", tag: "account", secret: true,
		errs: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusTooManyRequests},
		desc: "Checks the password, then consumes a code of scene change_phone sent to the phone or e-mail, and binds it " +
			"to the account for password resets (user.contact_changed.v1, with the channel only: the number or address " +
			"is kept as its keyed hash, outside the log). 403 wrong_password (the code is not spent), code_invalid, " +
			"code_not_found, code_locked. Limited per user (http.account_per_user). The body holds the password, so it " +
			"takes no Idempotency-Key."}),
		func(ctx context.Context, in *bindContactInput) (*reply[ContactBound], error) {
			p := principal(ctx)
			if err := a.limitAccount(ctx, p); err != nil {
				return nil, err
			}
			target, err := verify.NewTarget(in.Body.Phone, in.Body.Email)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			if err := a.h.Self.CheckPassword(ctx, p.Tenant, p.User, in.Body.Password); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			if err := a.h.Codes.Consume(ctx, p.Tenant, verify.SceneChangePhone, target, in.Body.Code); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			if err := a.bindContact(ctx, p, target); err != nil {
				return nil, err
			}
			return respond(ctx, http.StatusOK, ContactBound{Channel: string(target.Channel())}), nil
		})
}

// bindContact binds target, whose code the request consumed, to p's account.
func (a *API) bindContact(ctx context.Context, p Principal, target verify.Target) error {
	_, err := a.h.Self.BindContact(ctx, account.BindContact{Tenant: p.Tenant, User: p.User, Channel: string(target.Channel()),
		TargetHash: a.h.Codes.TargetHash(target), TraceID: RequestID(ctx)})
	if err != nil {
		return a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	return nil
}
