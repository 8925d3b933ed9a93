package tenantdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/migrations"
	"github.com/imledger/imledger/readmodels"
)

// dialTimeout bounds connecting to the server, so an unreachable server fails fast and retryably.
const dialTimeout = 5 * time.Second

// Router maps tenants to their MySQL databases. It is safe for concurrent use. Pools are opened on
// first use and evicted when unused for Config.PoolIdleTimeout (see evict.go), or kept until
// Close when eviction is off.
type Router struct {
	cfg       Config
	base      *mysql.Config
	pre, post string
	nameRe    *regexp.Regexp

	mu      sync.Mutex
	server  *sql.DB
	pools   map[string]*pool
	retired []*pool // evicted, closed once unused for another PoolIdleTimeout
	closed  bool
	janitor chan struct{} // closed by Close to stop the eviction goroutine; nil until it starts
	evicted int64         // pools evicted so far
}

// NewRouter validates cfg (after filling defaults) and returns a Router. It opens no connection.
func NewRouter(cfg Config) (*Router, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, err := mysql.ParseDSN(cfg.ServerDSN)
	if err != nil {
		return nil, fmt.Errorf("tenantdb: ServerDSN: %w", err)
	}
	pre, post, _ := strings.Cut(cfg.DatabaseTemplate, TenantPlaceholder)
	return &Router{
		cfg:    cfg,
		base:   base,
		pre:    pre,
		post:   post,
		nameRe: regexp.MustCompile("^" + regexp.QuoteMeta(pre) + "([a-z0-9][a-z0-9_]{0,31})" + regexp.QuoteMeta(post) + "$"),
		pools:  map[string]*pool{},
	}, nil
}

// DatabaseName returns the name of tenant's database. It is "" for the zero tenant.
func (r *Router) DatabaseName(tenant domain.TenantID) string {
	if tenant.IsZero() {
		return ""
	}
	return r.pre + tenant.String() + r.post
}

// dbName is DatabaseName re-checked against a strict pattern before any SQL sees it; tenant ids are
// validated by domain.NewTenantID already, this is the second line of defence.
func (r *Router) dbName(tenant domain.TenantID) (string, error) {
	name := r.DatabaseName(tenant)
	if !databaseNameRe.MatchString(name) || !r.nameRe.MatchString(name) {
		return "", &domain.ValidationError{Field: "tenant_id", Reason: "bad_format", Detail: "not usable in a database name"}
	}
	return name, nil
}

// quoteIdent quotes a name that already matched databaseNameRe.
func quoteIdent(name string) string { return "`" + name + "`" }

// dsn returns the DSN of database name ("" for the server) with the settings the read models need:
// times parsed as UTC, placeholders interpolated client-side (one round trip per statement) and
// multi-statements only where asked for.
func (r *Router) dsn(name string, multiStatements bool) string {
	c := r.base.Clone()
	c.DBName = name
	c.ParseTime = true
	c.Loc = time.UTC
	c.InterpolateParams = true
	c.MultiStatements = multiStatements
	if c.Timeout == 0 {
		c.Timeout = dialTimeout
	}
	return c.FormatDSN()
}

// Provision creates tenant's database (utf8mb4) if it does not exist and applies the read-model
// migrations to it. It is idempotent and safe to run from several processes at once. A bad tenant
// id fails with domain.ErrInvalid before any SQL runs; an unreachable server with
// domain.ErrRetryable.
func (r *Router) Provision(ctx context.Context, tenant domain.TenantID) error {
	name, err := r.dbName(tenant)
	if err != nil {
		return fmt.Errorf("provision tenant: %w", err)
	}
	server, err := r.serverDB()
	if err != nil {
		return err
	}
	q := "CREATE DATABASE IF NOT EXISTS " + quoteIdent(name) + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
	if _, err := server.ExecContext(ctx, q); err != nil {
		return WrapErr("provision tenant "+tenant.String()+": create database", err)
	}
	// goose runs one statement at a time, but a migration may use StatementBegin/End blocks:
	// this short-lived pool is the only one with multi-statements on.
	db, err := sql.Open("mysql", r.dsn(name, true))
	if err != nil {
		return fmt.Errorf("provision tenant %s: %w", tenant, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(3)
	if err := migrations.UpMySQL(ctx, db); err != nil {
		return WrapErr("provision tenant "+tenant.String(), err)
	}
	return nil
}

// DB returns the connection pool of tenant's database, opening it on first use. The pool belongs
// to the Router: callers must not close it, and should call DB again for each piece of work
// rather than keep the pool (a pool unused for Config.PoolIdleTimeout is evicted, and closed after
// as long again). If the database does not exist the error wraps domain.ErrNotFound and
// readmodels.ErrNotProvisioned; if the server is unreachable, domain.ErrRetryable.
func (r *Router) DB(ctx context.Context, tenant domain.TenantID) (*sql.DB, error) {
	name, err := r.dbName(tenant)
	if err != nil {
		return nil, fmt.Errorf("tenant database: %w", err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("tenant database: router closed")
	}
	if p, ok := r.pools[name]; ok {
		p.lastUsed = time.Now()
		r.mu.Unlock()
		return p.db, nil
	}
	r.mu.Unlock()

	db, err := sql.Open("mysql", r.dsn(name, false))
	if err != nil {
		return nil, fmt.Errorf("tenant database %s: %w", name, err)
	}
	db.SetMaxOpenConns(r.cfg.MaxOpenConns)
	db.SetMaxIdleConns(r.cfg.MaxIdleConns)
	db.SetConnMaxIdleTime(r.cfg.ConnMaxIdleTime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		if IsMySQLError(err, errUnknownDatabase) {
			return nil, fmt.Errorf("tenant %s: database %s: %w: %w", tenant, name, readmodels.ErrNotProvisioned, domain.ErrNotFound)
		}
		return nil, WrapErr("tenant database "+name, err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		_ = db.Close()
		return nil, errors.New("tenant database: router closed")
	}
	if existing, ok := r.pools[name]; ok {
		_ = db.Close()
		existing.lastUsed = time.Now()
		return existing.db, nil
	}
	r.pools[name] = &pool{db: db, lastUsed: time.Now()}
	r.startJanitorLocked()
	return db, nil
}

// Tenants lists the tenants whose database exists on the server, recognised by the database name
// template, sorted by id.
func (r *Router) Tenants(ctx context.Context) ([]domain.TenantID, error) {
	server, err := r.serverDB()
	if err != nil {
		return nil, err
	}
	rows, err := server.QueryContext(ctx, "SELECT schema_name FROM information_schema.schemata")
	if err != nil {
		return nil, WrapErr("list tenants", err)
	}
	defer rows.Close()
	var out []domain.TenantID
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, WrapErr("list tenants", err)
		}
		m := r.nameRe.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		if t, err := domain.NewTenantID(m[1]); err == nil {
			out = append(out, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, WrapErr("list tenants", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// serverDB returns the small pool used for server-level statements, opening it on first use.
func (r *Router) serverDB() (*sql.DB, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("tenant database: router closed")
	}
	if r.server == nil {
		db, err := sql.Open("mysql", r.dsn("", false))
		if err != nil {
			return nil, fmt.Errorf("tenant server: %w", err)
		}
		db.SetMaxOpenConns(2)
		db.SetMaxIdleConns(1)
		db.SetConnMaxIdleTime(r.cfg.ConnMaxIdleTime)
		r.server = db
	}
	return r.server, nil
}

// Close closes every pool the Router opened. Later calls to DB, Provision and Tenants fail.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.janitor != nil {
		close(r.janitor)
	}
	var errs []error
	for name, p := range r.pools {
		if err := p.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", name, err))
		}
	}
	for _, p := range r.retired {
		if err := p.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close an evicted pool: %w", err))
		}
	}
	r.retired = nil
	if r.server != nil {
		if err := r.server.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close server pool: %w", err))
		}
	}
	r.pools = nil
	return errors.Join(errs...)
}
