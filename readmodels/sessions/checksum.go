package sessions

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Summary summarises a sessions table so two copies (the live table and a rebuild) can be
// compared: Rows is the number of sessions.
type Summary = readmodels.TableSummary

// Checksum summarises tables.Sessions: each row hashes every column the events decide;
// updated_at is left out.
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (Summary, error) {
	var sum Summary
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return sum, fmt.Errorf("sessions: checksum: %w", err)
	}
	hash := "CAST(CONV(LEFT(SHA1(CONCAT_WS('|', user_id, session_id, node, user_agent, COALESCE(opened_at, ''), " +
		"COALESCE(closed_at, ''), close_reason, version)), 16), 16, 10) AS UNSIGNED)"
	stmt := "SELECT COUNT(*), COALESCE(BIT_XOR(" + hash + "), 0) FROM " + q(tables.Sessions)
	if err := db.QueryRowContext(ctx, stmt).Scan(&sum.Rows, &sum.Checksum); err != nil {
		return sum, tenantdb.WrapErr("sessions: checksum", err)
	}
	return sum, nil
}
