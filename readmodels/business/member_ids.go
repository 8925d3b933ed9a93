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

// MemberIDsMany answers MemberIDs for each of gids, the cache entries of all of them read in one
// Redis round trip (the offline push producer looks up every group of a batch of committed
// messages at once). ids[i] and errs[i] are what MemberIDs(ctx, tenant, gids[i]) would return.
func (s *Store) MemberIDsMany(ctx context.Context, tenant domain.TenantID, gids []domain.GroupID) (ids [][]domain.UserID, errs []error) {
	ids, errs = make([][]domain.UserID, len(gids)), make([]error, len(gids))
	var valid []int // indexes into gids
	var keys []string
	for i, gid := range gids {
		if errs[i] = checkGroupID(gid); errs[i] == nil {
			valid = append(valid, i)
			keys = append(keys, s.keyspace(tenant).groupMembers(int64(gid)))
		}
	}
	sets, setErrs := s.setsMembers(ctx, tenant, keys, func(ctx context.Context, k int) ([]int64, error) {
		return s.loadMemberIDs(ctx, tenant, int64(gids[valid[k]]), false)
	})
	for k, i := range valid {
		if errs[i] = setErrs[k]; errs[i] == nil {
			ids[i] = toUserIDs(sets[k])
		}
	}
	return ids, errs
}

// Moderators returns the ids of group gid's owner and admins, sorted (cache entry
// group:{gid}:admins, filled from MySQL on a miss): the members who decide join requests. Errors
// as MemberIDs.
func (s *Store) Moderators(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error) {
	if err := checkGroupID(gid); err != nil {
		return nil, err
	}
	ids, err := s.setMembers(ctx, tenant, s.keyspace(tenant).groupAdmins(int64(gid)),
		func(ctx context.Context) ([]int64, error) { return s.loadMemberIDs(ctx, tenant, int64(gid), true) })
	if err != nil {
		return nil, err
	}
	return toUserIDs(ids), nil
}
