package tenantdb

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TenantPlaceholder is the part of Config.DatabaseTemplate replaced by the tenant id.
const TenantPlaceholder = "{tenant}"

// Config configures a Router.
type Config struct {
	// ServerDSN is the go-sql-driver/mysql DSN of the server, without a database name, e.g.
	// "user:pass@tcp(host:3306)/". Its parameters are kept; parseTime, loc and the other settings
	// the read models depend on are forced. Default "root@tcp(127.0.0.1:3306)/".
	ServerDSN string
	// DatabaseTemplate names a tenant's database; "{tenant}" is replaced by the tenant id. Apart from
	// the placeholder it may hold only [A-Za-z0-9_], and the longest name it can produce must fit
	// MySQL's 64 characters. Default "im_t_{tenant}".
	DatabaseTemplate string
	// MaxOpenConns caps the connections of one tenant's pool. Default 8.
	MaxOpenConns int
	// MaxIdleConns caps the idle connections kept per tenant; at most MaxOpenConns and at most
	// MaxIdleConnsLimit. Default 2.
	MaxIdleConns int
	// ConnMaxIdleTime closes connections idle for longer. Default 5 minutes.
	ConnMaxIdleTime time.Duration
	// PoolIdleTimeout evicts a tenant's pool that has not been used for this long (no DB call,
	// no connection in use or open, no connection opened or closed): a node that served a tenant
	// once does not keep its pool, and the pool's goroutine, for ever. An evicted pool is closed
	// only after another PoolIdleTimeout without use, so a caller still holding it finishes
	// what it does; the next DB call opens a new pool. Default 30 minutes; negative: never.
	PoolIdleTimeout time.Duration
}

// MaxIdleConnsLimit bounds Config.MaxIdleConns: idle connections are held per tenant, so a
// large value multiplied by many tenants would exhaust the server's max_connections.
const MaxIdleConnsLimit = 16

// maxTenantLen is the longest tenant id domain.NewTenantID accepts.
const maxTenantLen = 32

var (
	templatePartRe = regexp.MustCompile(`^[A-Za-z0-9_]*$`)
	databaseNameRe = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
)

func (c *Config) setDefaults() {
	if c.ServerDSN == "" {
		c.ServerDSN = "root@tcp(127.0.0.1:3306)/"
	}
	if c.DatabaseTemplate == "" {
		c.DatabaseTemplate = "im_t_" + TenantPlaceholder
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = 8
	}
	if c.MaxIdleConns == 0 {
		c.MaxIdleConns = 2
	}
	if c.ConnMaxIdleTime == 0 {
		c.ConnMaxIdleTime = 5 * time.Minute
	}
	if c.PoolIdleTimeout == 0 {
		c.PoolIdleTimeout = DefaultPoolIdleTimeout
	}
}

// DefaultPoolIdleTimeout is the default Config.PoolIdleTimeout.
const DefaultPoolIdleTimeout = 30 * time.Minute

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if cfg, err := mysql.ParseDSN(c.ServerDSN); err != nil {
		errs = append(errs, fmt.Errorf("tenantdb: ServerDSN: %w", err))
	} else if cfg.DBName != "" {
		errs = append(errs, errors.New("tenantdb: ServerDSN must not name a database"))
	}
	if strings.Count(c.DatabaseTemplate, TenantPlaceholder) != 1 {
		errs = append(errs, fmt.Errorf("tenantdb: DatabaseTemplate must contain %s exactly once", TenantPlaceholder))
	} else {
		pre, post, _ := strings.Cut(c.DatabaseTemplate, TenantPlaceholder)
		if !templatePartRe.MatchString(pre) || !templatePartRe.MatchString(post) {
			errs = append(errs, errors.New("tenantdb: DatabaseTemplate may hold only [A-Za-z0-9_] besides the placeholder"))
		}
		if len(pre)+len(post)+maxTenantLen > 64 {
			errs = append(errs, errors.New("tenantdb: DatabaseTemplate produces names longer than 64 characters"))
		}
	}
	if c.MaxOpenConns < 2 {
		errs = append(errs, errors.New("tenantdb: MaxOpenConns must be at least 2"))
	}
	if c.MaxIdleConns < 0 || c.MaxIdleConns > c.MaxOpenConns || c.MaxIdleConns > MaxIdleConnsLimit {
		errs = append(errs, fmt.Errorf("tenantdb: MaxIdleConns must be between 0 and min(MaxOpenConns, %d)", MaxIdleConnsLimit))
	}
	if c.ConnMaxIdleTime < 0 {
		errs = append(errs, errors.New("tenantdb: ConnMaxIdleTime must not be negative"))
	}
	return errors.Join(errs...)
}
