package business

import (
	"context"

	"github.com/imledger/imledger/domain"
)

// MemberIDs returns the ids of group gid's current members, sorted (cache entry
// group:{gid}:members, filled from MySQL on a miss). A group the read model does not hold wraps
// domain.ErrNotFound; a dissolved group has none. The offline push producer reads it once per
// committed group message.
func (s *Store) MemberIDs(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error) {
	if err := checkGroupID(gid); err != nil {
		return nil, err
	}
	ids, err := s.setMembers(ctx, tenant, s.keyspace(tenant).groupMembers(int64(gid)),
		func(ctx context.Context) ([]int64, error) { return s.loadMemberIDs(ctx, tenant, int64(gid), false) })
	if err != nil {
		return nil, err
	}
	return toUserIDs(ids), nil
}
