package business

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// TableSummary is one table's share of a Checksum.
type TableSummary = readmodels.TableSummary

// Summary summarises the business read model of one tenant, table by table.
type Summary struct {
	Groups    TableSummary
	Members   TableSummary
	Relations TableSummary
	Users     TableSummary
}

// rowHash turns a canonical row string into 64 bits: the first 16 hex digits of its SHA-1.
func rowHash(cols string) string { return tableset.RowHash(cols) }

// Checksum summarises tables so two copies (the live tables and a rebuild) can be compared. Each
// row hashes every column the events decide, version included; updated_at is left out, so the
// comparison does not depend on how a time is written, only on what the events say.
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (Summary, error) {
	var sum Summary
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return sum, fmt.Errorf("checksum: %w", err)
	}
	parts := []struct {
		table string
		cols  string
		into  *TableSummary
	}{
		{tables.Groups, "group_id, topic, name, avatar, intro, owner_id, join_approval, invite_policy, announce_policy, " +
			"mute_all, discoverable, COALESCE(announcement, ''), member_count, status, version, created_at", &sum.Groups},
		{tables.Members, "group_id, user_id, role, status, COALESCE(muted_until, ''), banned, invited_by, request_message, " +
			"COALESCE(joined_at, ''), version", &sum.Members},
		{tables.Relations, "user_id, peer_id, friend, blocked, request, request_message, COALESCE(friends_since, ''), version", &sum.Relations},
		{tables.Users, "user_id, login, nickname, avatar, signature, discoverable, version", &sum.Users},
	}
	for _, p := range parts {
		stmt := "SELECT COUNT(*), COALESCE(BIT_XOR(" + rowHash(p.cols) + "), 0) FROM " + q(p.table)
		if err := db.QueryRowContext(ctx, stmt).Scan(&p.into.Rows, &p.into.Checksum); err != nil {
			return sum, tenantdb.WrapErr("checksum "+p.table, err)
		}
	}
	return sum, nil
}

// TableCounts is the number of rows of each read-model table.
type TableCounts struct {
	Groups    int64
	Members   int64
	Relations int64
	Users     int64
}

// Counts returns the row count of every table of tables.
func (s *Store) Counts(ctx context.Context, tenant domain.TenantID, tables Tables) (TableCounts, error) {
	var c TableCounts
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return c, fmt.Errorf("counts: %w", err)
	}
	stmt := "SELECT (SELECT COUNT(*) FROM " + q(tables.Groups) + "), (SELECT COUNT(*) FROM " + q(tables.Members) +
		"), (SELECT COUNT(*) FROM " + q(tables.Relations) + "), (SELECT COUNT(*) FROM " + q(tables.Users) + ")"
	if err := db.QueryRowContext(ctx, stmt).Scan(&c.Groups, &c.Members, &c.Relations, &c.Users); err != nil {
		return c, tenantdb.WrapErr("counts", err)
	}
	return c, nil
}
