package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// DeleteAccountRequest is the body of POST /v1/im/account/delete.
type DeleteAccountRequest struct {
	Password string `json:"password" doc:"The caller's current password"`
}

// AccountDeleted is the data of a deleted account.
type AccountDeleted struct {
	UserID string `json:"user_id" doc:"The account deleted (64-bit, as a string)"`
}

type deleteAccountInput struct {
	Body DeleteAccountRequest
}

// registerAccountDelete registers the deletion of the caller's account.
func (a *API) registerAccountDelete() {
	huma.Register(a.huma, a.build(op{id: "delete-account", method: http.MethodPost, path: "/v1/im/account/delete",
		summary: "Delete my account", tag: "account", secret: true,
		errs: []int{http.StatusForbidden, http.StatusNotFound, http.StatusTooManyRequests},
		desc: "Checks the password again, then erases the account for good: what the user wrote and said about " +
			"themselves becomes unreadable everywhere, the login name is freed and every session ends on every node. " +
			"403 wrong_password (nothing happens). Limited per user (http.account_per_user). The body holds the " +
			"password, so it takes no Idempotency-Key; repeating it after a failure finishes the erasure."}),
		func(ctx context.Context, in *deleteAccountInput) (*reply[AccountDeleted], error) {
			p := principal(ctx)
			if err := a.limitAccount(ctx, p); err != nil {
				return nil, err
			}
			if err := a.h.Self.CheckPassword(ctx, p.Tenant, p.User, in.Body.Password); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			if err := a.h.Eraser.EraseAccount(ctx, p.Tenant, p.User); err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			return respond(ctx, http.StatusOK, AccountDeleted{UserID: p.User.String()}), nil
		})
}
