package business

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// rowChunk is the most rows one statement reads or writes.
const rowChunk = 500

// rowState is a row as the batch found it and as the batch's events leave it. A row that did not
// exist starts as the empty state of its stream (version 0).
type rowState[T any] struct {
	old, cur T
	found    bool // the row existed before the batch
	changed  bool // an event of the batch changed it
}

// exists reports whether the row exists before the batch or was created by it.
func (r *rowState[T]) exists() bool { return r.found || r.changed }

// applier applies one batch inside one transaction and gathers the cache keys it makes stale.
type applier struct {
	tx *sql.Tx
	t  Tables
	ks keyspace

	groups    map[int64]*rowState[groupRow]
	members   map[[2]int64]*rowState[memberRow]
	pairs     map[[2]int64]*rowState[pair]
	pairFound map[[2]int64][2]bool // which direction rows of a pair existed (lo's side first)
	users     map[int64]*rowState[userRow]

	keys []string
	seen map[string]bool
}

func newApplier(t Tables, ks keyspace) *applier {
	return &applier{t: t, ks: ks,
		groups: map[int64]*rowState[groupRow]{}, members: map[[2]int64]*rowState[memberRow]{},
		pairs: map[[2]int64]*rowState[pair]{}, pairFound: map[[2]int64][2]bool{},
		users: map[int64]*rowState[userRow]{}, seen: map[string]bool{}}
}

// touch records cache keys made stale by the batch.
func (a *applier) touch(keys ...string) {
	for _, k := range keys {
		if !a.seen[k] {
			a.seen[k] = true
			a.keys = append(a.keys, k)
		}
	}
}

// rowKeys returns the rows of ops' streams, table by table, each once.
func rowKeys(ops []op) (groups []int64, members, pairs [][2]int64, users []int64) {
	seenGroups, seenUsers := map[int64]bool{}, map[int64]bool{}
	seenMembers, seenPairs := map[[2]int64]bool{}, map[[2]int64]bool{}
	for _, o := range ops {
		if uid, ok := profileUser(o.payload); ok {
			users = appendNew(users, seenUsers, uid)
			continue
		}
		switch p := o.payload.(type) {
		case nil:
		default:
			if gid := groupOf(p); gid != 0 {
				groups = appendNew(groups, seenGroups, gid)
			} else if g, u, ok := membershipOf(p); ok {
				members = appendNew(members, seenMembers, [2]int64{int64(g), int64(u)})
			} else {
				x, y := relationParties(p)
				pairs = appendNew(pairs, seenPairs, [2]int64{min(x, y), max(x, y)})
			}
		}
	}
	return groups, members, pairs, users
}

func appendNew[K comparable](s []K, seen map[K]bool, k K) []K {
	if seen[k] {
		return s
	}
	seen[k] = true
	return append(s, k)
}

// load locks and reads every row ops touch.
func (a *applier) load(ctx context.Context, ops []op) error {
	groups, members, pairs, users := rowKeys(ops)
	for _, gid := range groups {
		a.groups[gid] = &rowState[groupRow]{old: groupRow{id: gid}, cur: groupRow{id: gid}}
	}
	for _, k := range members {
		m := memberRow{group: k[0], user: k[1], status: domain.StatusNone}
		a.members[k] = &rowState[memberRow]{old: m, cur: m}
	}
	for _, k := range pairs {
		p := pair{lo: k[0], hi: k[1]}
		a.pairs[k] = &rowState[pair]{old: p, cur: p}
	}
	for _, uid := range users {
		a.users[uid] = &rowState[userRow]{old: newUserRow(uid), cur: newUserRow(uid)}
	}
	return a.loadRows(ctx, groups, members, pairs, users)
}

func (a *applier) loadRows(ctx context.Context, groups []int64, members, pairs [][2]int64, users []int64) error {
	err := lockRows(ctx, a.tx, a.t.Groups, groupColList, "group_id", ints(groups), func(rs *sql.Rows) error {
		g, err := scanGroup(rs)
		if err != nil {
			return err
		}
		st := a.groups[g.id]
		st.found, st.old, st.cur = true, g, g
		return nil
	})
	if err != nil {
		return err
	}
	err = lockRows(ctx, a.tx, a.t.Members, memberColList, "(group_id, user_id)", pairsOf(members), func(rs *sql.Rows) error {
		m, err := scanMember(rs)
		if err != nil {
			return err
		}
		st := a.members[[2]int64{m.group, m.user}]
		st.found, st.old, st.cur = true, m, m
		return nil
	})
	if err != nil {
		return err
	}
	both := make([][2]int64, 0, 2*len(pairs))
	for _, p := range pairs {
		both = append(both, p, [2]int64{p[1], p[0]})
	}
	err = lockRows(ctx, a.tx, a.t.Relations, relationColList, "(user_id, peer_id)", pairsOf(both), func(rs *sql.Rows) error {
		r, err := scanRelation(rs)
		if err != nil {
			return err
		}
		k := [2]int64{min(r.user, r.peer), max(r.user, r.peer)}
		st, found := a.pairs[k], a.pairFound[k]
		found[boolIndex(r.user == k[1])] = true
		st.cur.absorb(r)
		st.old, st.found, a.pairFound[k] = st.cur, true, found
		return nil
	})
	if err != nil {
		return err
	}
	return lockRows(ctx, a.tx, a.t.Users, userColList, "user_id", ints(users), func(rs *sql.Rows) error {
		u, err := scanUser(rs)
		if err != nil {
			return err
		}
		st := a.users[u.id]
		st.found, st.old, st.cur = true, u, u
		return nil
	})
}

// lockRows reads and locks the rows of table whose key (a column or a row of columns) is one of
// keys, in chunks, calling each for every row.
func lockRows(ctx context.Context, tx *sql.Tx, table, cols, key string, keys [][]any, each func(*sql.Rows) error) error {
	for start := 0; start < len(keys); start += rowChunk {
		chunk := keys[start:min(start+rowChunk, len(keys))]
		marks := tableset.Placeholders(len(chunk[0]))
		if len(chunk[0]) > 1 {
			marks = "(" + marks + ")"
		}
		var args []any
		for _, k := range chunk {
			args = append(args, k...)
		}
		stmt := "SELECT " + cols + " FROM " + q(table) + " WHERE " + key + " IN (" +
			strings.TrimSuffix(strings.Repeat(marks+", ", len(chunk)), ", ") + ") FOR UPDATE"
		if err := scanAll(ctx, tx, stmt, args, each); err != nil {
			return tenantdb.WrapErr("apply: read "+table, err)
		}
	}
	return nil
}

func scanAll(ctx context.Context, tx *sql.Tx, stmt string, args []any, each func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func ints(ids []int64) [][]any {
	out := make([][]any, len(ids))
	for i, id := range ids {
		out[i] = []any{id}
	}
	return out
}

func pairsOf(ks [][2]int64) [][]any {
	out := make([][]any, len(ks))
	for i, k := range ks {
		out[i] = []any{k[0], k[1]}
	}
	return out
}

// fold folds one event into its row, unless the row already holds the event's stream version,
// and fits the row to its columns (see fit.go).
func (a *applier) fold(o op) error {
	v := o.env.StreamVersion
	if o.payload == nil {
		return nil
	}
	if uid, ok := profileUser(o.payload); ok {
		st := a.users[uid]
		if st.cur.version < v {
			st.cur = foldUser(st.cur, o.payload)
			st.cur.version, st.cur.updatedAt, st.changed = v, o.at(), true
			st.cur = st.cur.fit()
		}
		return nil
	}
	if gid := groupOf(o.payload); gid != 0 {
		st := a.groups[gid]
		if st.cur.version >= v {
			return nil
		}
		if _, create := o.payload.(*domain.GroupCreated); !create && !st.exists() {
			return fmt.Errorf("group %d: %s before group.created.v1: %w", gid, o.env.EventType, domain.ErrNotFound)
		}
		st.cur = foldGroup(st.cur, o.payload)
		st.cur.version, st.cur.updatedAt, st.changed = v, o.at(), true
		st.cur = st.cur.fit()
		return nil
	}
	if g, u, ok := membershipOf(o.payload); ok {
		st := a.members[[2]int64{int64(g), int64(u)}]
		if st.cur.version < v {
			st.cur = foldMember(st.cur, o.payload)
			st.cur.version, st.cur.updatedAt, st.changed = v, o.at(), true
			st.cur = st.cur.fit()
		}
		return nil
	}
	x, y := relationParties(o.payload)
	st := a.pairs[[2]int64{min(x, y), max(x, y)}]
	if st.cur.version < v {
		st.cur = foldPair(st.cur, o.payload)
		st.cur.version, st.cur.updatedAt, st.changed = v, o.at(), true
		st.cur = st.cur.fit()
	}
	return nil
}

// write writes back every changed row: rows that did not exist with a plain INSERT (a duplicate
// means a concurrent batch created the row: retryable), existing rows, locked since load, with an
// upsert that updates them. Rows go in key order, so concurrent batches lock in the same order.
func (a *applier) write(ctx context.Context) error {
	var fresh, existing [][]any
	split := func(found bool, vals []any) {
		if found {
			existing = append(existing, vals)
		} else {
			fresh = append(fresh, vals)
		}
	}
	flush := func(table string, cols []string, nkey int) error {
		err := writeRows(ctx, a.tx, table, cols, nkey, fresh, existing)
		fresh, existing = nil, nil
		return err
	}
	for _, st := range changed(a.groups) {
		split(st.found, st.cur.values())
	}
	if err := flush(a.t.Groups, groupCols, 1); err != nil {
		return err
	}
	for _, st := range changed(a.members) {
		split(st.found, st.cur.values())
	}
	if err := flush(a.t.Members, memberCols, 2); err != nil {
		return err
	}
	for _, k := range slices.SortedFunc(maps.Keys(a.pairs), cmpPair) {
		if st := a.pairs[k]; st.changed {
			for i, r := range st.cur.rows() {
				split(a.pairFound[k][i], r.values())
			}
		}
	}
	if err := flush(a.t.Relations, relationCols, 2); err != nil {
		return err
	}
	for _, st := range changed(a.users) {
		split(st.found, st.cur.values())
	}
	return flush(a.t.Users, userCols, 1)
}

// changed returns the changed rows of m in key order.
func changed[K int64 | [2]int64, T any](m map[K]*rowState[T]) []*rowState[T] {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(x, y K) int { return cmpKey(x, y) })
	var out []*rowState[T]
	for _, k := range keys {
		if m[k].changed {
			out = append(out, m[k])
		}
	}
	return out
}

func cmpKey[K int64 | [2]int64](x, y K) int {
	switch xv := any(x).(type) {
	case int64:
		return cmp.Compare(xv, any(y).(int64))
	case [2]int64:
		return cmpPair(xv, any(y).([2]int64))
	}
	return 0
}

func cmpPair(x, y [2]int64) int {
	if c := cmp.Compare(x[0], y[0]); c != 0 {
		return c
	}
	return cmp.Compare(x[1], y[1])
}

// writeRows inserts fresh rows and updates existing ones, in chunks.
func writeRows(ctx context.Context, tx *sql.Tx, table string, cols []string, nkey int, fresh, existing [][]any) error {
	sets := make([]string, 0, len(cols)-nkey)
	for _, c := range cols[nkey:] {
		sets = append(sets, c+" = VALUES("+c+")")
	}
	head := "INSERT INTO " + q(table) + " (" + strings.Join(cols, ", ") + ") VALUES "
	for _, part := range []struct {
		rows [][]any
		tail string
	}{{fresh, ""}, {existing, " ON DUPLICATE KEY UPDATE " + strings.Join(sets, ", ")}} {
		for start := 0; start < len(part.rows); start += rowChunk {
			chunk := part.rows[start:min(start+rowChunk, len(part.rows))]
			args := make([]any, 0, len(chunk)*len(cols))
			for _, r := range chunk {
				args = append(args, r...)
			}
			_, err := tx.ExecContext(ctx, head+tableset.RowPlaceholders(len(chunk), len(cols))+part.tail, args...)
			if tenantdb.IsMySQLError(err, tenantdb.ErrDupEntry) {
				return domain.Retryable("apply: insert into "+table, err)
			}
			if err != nil {
				return tenantdb.WrapErr("apply: write "+table, err)
			}
		}
	}
	return nil
}

// staleKeys records the cache entries whose content the batch changed, row by row.
func (a *applier) staleKeys() {
	for _, st := range changed(a.groups) {
		gid := st.cur.id
		a.touch(a.ks.groupProfile(gid))
		if !st.found || st.cur.settings != st.old.settings {
			a.touch(a.ks.groupSettings(gid))
		}
		if !st.found || st.cur.status != st.old.status {
			a.touch(a.ks.groupAll(gid)...)
		}
	}
	for _, st := range changed(a.members) {
		old, m := st.old, st.cur
		if m.isMember() != old.isMember() {
			a.touch(a.ks.groupMembers(m.group))
		}
		if m.moderates() != old.moderates() {
			a.touch(a.ks.groupAdmins(m.group))
		}
		if !m.mute().Equal(old.mute()) {
			a.touch(a.ks.groupMuted(m.group))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(a.pairs), cmpPair) {
		st := a.pairs[k]
		old, p := st.old, st.cur
		if p.friends != old.friends {
			a.touch(a.ks.friends(p.lo), a.ks.friends(p.hi))
		}
		if p.loBlocksHi != old.loBlocksHi {
			a.touch(a.ks.blocklist(p.lo))
		}
		if p.hiBlocksLo != old.hiBlocksLo {
			a.touch(a.ks.blocklist(p.hi))
		}
	}
	for _, st := range changed(a.users) {
		if st.cur != st.old {
			a.touch(a.ks.userProfile(st.cur.id))
		}
	}
}
