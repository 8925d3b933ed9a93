package rest

import (
	"context"
	"net/http"

	"github.com/imledger/imledger/domain"
)

// Development-only principal headers. Until token authentication exists, a request names its
// tenant and user in these headers and the API believes them. Never expose this API to untrusted
// clients in this form.
const (
	HeaderTenant = "X-IM-Tenant" // tenant id, e.g. "demo"
	HeaderUser   = "X-IM-User"   // user id, "123" or "usr123"
)

// Principal is who makes a request.
type Principal struct {
	Tenant domain.TenantID
	User   domain.UserID
}

// devPrincipal reads the development-only principal headers. A missing or malformed header is
// 401 unauthenticated with details {header, reason}.
func devPrincipal(ctx context.Context, tenant, user string) (Principal, error) {
	t, err := domain.NewTenantID(tenant)
	if err != nil {
		return Principal{}, unauthenticated(ctx, HeaderTenant, err)
	}
	u, err := domain.ParseUserID(user)
	if err != nil {
		return Principal{}, unauthenticated(ctx, HeaderUser, err)
	}
	return Principal{Tenant: t, User: u}, nil
}

func unauthenticated(ctx context.Context, header string, err error) error {
	reason := "bad_format"
	if ve, ok := err.(*domain.ValidationError); ok {
		reason = ve.Reason
	}
	return newError(RequestID(ctx), http.StatusUnauthorized, ReasonUnauthenticated,
		"missing or invalid principal header "+header,
		map[string]any{"header": header, "reason": reason})
}
