package group

import (
	"context"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// ErrUnknownUser is the error of a command or send that names a user who does not exist in the
// tenant. It wraps domain.ErrNotFound, so the transports answer 404 not_found.
var ErrUnknownUser = fmt.Errorf("user does not exist in the tenant: %w", domain.ErrNotFound)

// existsMaxAge is how long a cached profile state that shows a user exists is trusted: a user
// never stops existing, so only a state without events is worth reading again.
const existsMaxAge = 24 * time.Hour

// UserExists reports whether user exists in tenant: the user's profile stream holds an event,
// its registration (user.registered.v1) or a profile the user set (service accounts with a
// token from `imledger token issue` exist once they set one). A cached state that shows the user
// is answered without I/O; one that does not is read from the store again, so a user who
// registered a moment ago, on any node, is found. Errors as Group.
func (l *Loader) UserExists(ctx context.Context, tenant domain.TenantID, user domain.UserID) (bool, error) {
	s, err := l.Profile(ctx, tenant, user, existsMaxAge)
	if err != nil {
		return false, err
	}
	if s.Version() > 0 {
		return true, nil
	}
	if s, err = l.Profile(ctx, tenant, user, 0); err != nil {
		return false, err
	}
	return s.Version() > 0, nil
}

// requireUser fails with ErrUnknownUser (naming field) when u does not exist in tenant.
func (c *core) requireUser(ctx context.Context, op string, tenant domain.TenantID, field string, u domain.UserID) error {
	ok, err := c.loader.UserExists(ctx, tenant, u)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !ok {
		return fmt.Errorf("%s: %s %d: %w", op, field, u, ErrUnknownUser)
	}
	return nil
}
