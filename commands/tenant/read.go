package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/pgerr"
)

const infoColumns = `tenant_id, status, settings, version, not_before, created_at, updated_at, retained_before`

// Get returns tenant as the registry holds it. Errors: *domain.DeniedError tenant_not_found for
// a tenant never provisioned; domain.ErrRetryable when PostgreSQL failed.
func (r *Registry) Get(ctx context.Context, tenant domain.TenantID) (Info, error) {
	info, err := scanInfo(r.pool.QueryRow(ctx, `SELECT `+infoColumns+` FROM tenants WHERE tenant_id = $1`, tenant.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		return Info{}, domain.Deny(domain.ReasonTenantNotFound)
	}
	if err != nil {
		return Info{}, dbErr("read tenant", err)
	}
	return info, nil
}

// RetainedBefore returns tenant's retention horizon (Info.RetainedBefore); zero for a tenant
// that is not provisioned. Errors: domain.ErrRetryable when PostgreSQL failed.
func (r *Registry) RetainedBefore(ctx context.Context, tenant domain.TenantID) (time.Time, error) {
	return retainedBefore(r.Get(ctx, tenant))
}

// List returns every tenant, by id. Errors: domain.ErrRetryable when PostgreSQL failed.
func (r *Registry) List(ctx context.Context) ([]Info, error) {
	rows, err := r.pool.Query(ctx, `SELECT `+infoColumns+` FROM tenants ORDER BY tenant_id`)
	if err != nil {
		return nil, dbErr("list tenants", err)
	}
	defer rows.Close()
	var out []Info
	for rows.Next() {
		info, err := scanInfo(rows)
		if err != nil {
			return nil, dbErr("list tenants", err)
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list tenants", err)
	}
	return out, nil
}

func scanInfo(row pgx.Row) (Info, error) {
	var (
		info             Info
		id, status       string
		settings         []byte
		nb, retained     *time.Time
		created, updated time.Time
	)
	if err := row.Scan(&id, &status, &settings, &info.Version, &nb, &created, &updated, &retained); err != nil {
		return Info{}, err
	}
	t, err := domain.NewTenantID(id)
	if err != nil {
		return Info{}, fmt.Errorf("stored tenant %q: %w", id, err)
	}
	if err := json.Unmarshal(settings, &info.Settings); err != nil {
		return Info{}, fmt.Errorf("stored settings of tenant %s: %w", id, err)
	}
	info.Tenant, info.Status, info.CreatedAt, info.UpdatedAt = t, domain.TenantStatus(status), created.UTC(), updated.UTC()
	if nb != nil {
		info.NotBefore = nb.UTC()
	}
	if retained != nil {
		info.RetainedBefore = retained.UTC()
	}
	return info, nil
}

// dbErr wraps a PostgreSQL failure for op: a transient one (internal/pgerr) is a
// *domain.RetryableError; a cancelled context and anything else stay plain wrapped errors.
func dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if pgerr.Transient(err) {
		return domain.Retryable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
