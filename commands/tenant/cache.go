package tenant

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
)

// CacheConfig configures a Cache.
type CacheConfig struct {
	// RefreshInterval is how often the whole registry is read again, so a change whose
	// notification was lost is picked up within it. Default 60 s.
	RefreshInterval time.Duration `koanf:"refresh_interval"`
	// MissTTL is how long a tenant found missing is answered from the cache before the registry
	// is asked again, so requests naming garbage tenants do not each cost a query. Default 1 s.
	MissTTL time.Duration `koanf:"miss_ttl"`
}

func (c *CacheConfig) setDefaults() {
	if c.RefreshInterval == 0 {
		c.RefreshInterval = time.Minute
	}
	if c.MissTTL == 0 {
		c.MissTTL = time.Second
	}
}

// Validate reports every bad field at once.
func (c CacheConfig) Validate() error {
	c.setDefaults()
	var errs []error
	if c.RefreshInterval <= 0 {
		errs = append(errs, errors.New("tenants.refresh_interval must be positive"))
	}
	if c.MissTTL < 0 {
		errs = append(errs, errors.New("tenants.miss_ttl must not be negative"))
	}
	return errors.Join(errs...)
}

// Source is where a Cache reads tenants; *Registry implements it.
type Source interface {
	Get(ctx context.Context, tenant domain.TenantID) (Info, error)
	List(ctx context.Context) ([]Info, error)
}

var _ Source = (*Registry)(nil)

// Cache is a node's in-process copy of the tenant registry (seed 004 §7.1). Every request checks
// its tenant against it without I/O once the tenant is known. It is filled by Load, read again
// every RefreshInterval by Run, and updated at once by Apply (a change this node made or heard of
// over the fanout) and Reload (im.config.event). A tenant it has not seen is looked up in the
// registry on first use; a missing one is remembered for MissTTL. It is safe for concurrent use.
type Cache struct {
	cfg CacheConfig
	src Source
	log *slog.Logger
	now func() time.Time

	mu      sync.RWMutex
	entries map[domain.TenantID]entry
}

type entry struct {
	info    Info
	missing bool      // the tenant did not exist when looked up at `at`
	at      time.Time // when a missing entry was looked up
}

// NewCache validates cfg and returns an empty Cache over src. A nil logger discards.
func NewCache(src Source, cfg CacheConfig, logger *slog.Logger) (*Cache, error) {
	if src == nil {
		return nil, errors.New("tenant: cache: a Source is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Cache{cfg: cfg, src: src, log: logger, now: time.Now, entries: map[domain.TenantID]entry{}}, nil
}

// Lookup returns tenant's entry. Errors: *domain.DeniedError tenant_not_found; a retryable error
// when the tenant is not cached and the registry could not be read.
func (c *Cache) Lookup(ctx context.Context, tenant domain.TenantID) (Info, error) {
	c.mu.RLock()
	e, ok := c.entries[tenant]
	c.mu.RUnlock()
	if ok && !e.missing {
		return e.info, nil
	}
	if ok && c.now().Sub(e.at) < c.cfg.MissTTL {
		return Info{}, domain.Deny(domain.ReasonTenantNotFound)
	}
	return c.fetch(ctx, tenant)
}

// RetainedBefore returns tenant's retention horizon as cached (Info.RetainedBefore); zero for a
// tenant that is not provisioned. Errors: a retryable error as Lookup.
func (c *Cache) RetainedBefore(ctx context.Context, tenant domain.TenantID) (time.Time, error) {
	return retainedBefore(c.Lookup(ctx, tenant))
}

// retainedBefore is the horizon of a lookup's answer: zero for a tenant never provisioned.
func retainedBefore(info Info, err error) (time.Time, error) {
	var denied *domain.DeniedError
	if errors.As(err, &denied) && denied.Reason == domain.ReasonTenantNotFound {
		return time.Time{}, nil
	}
	return info.RetainedBefore, err
}

// Check returns tenant's entry when the tenant exists and is active. Errors: *domain.DeniedError
// tenant_not_found or tenant_suspended; a retryable error as Lookup.
func (c *Cache) Check(ctx context.Context, tenant domain.TenantID) (Info, error) {
	info, err := c.Lookup(ctx, tenant)
	if err != nil {
		return Info{}, err
	}
	return info, info.Check()
}

// fetch reads tenant from the registry and caches the answer.
func (c *Cache) fetch(ctx context.Context, tenant domain.TenantID) (Info, error) {
	info, err := c.src.Get(ctx, tenant)
	var denied *domain.DeniedError
	switch {
	case errors.As(err, &denied) && denied.Reason == domain.ReasonTenantNotFound:
		c.mu.Lock()
		if cur, ok := c.entries[tenant]; !ok || cur.missing {
			c.entries[tenant] = entry{missing: true, at: c.now()}
		}
		c.mu.Unlock()
		return Info{}, err
	case err != nil:
		return Info{}, err
	}
	c.Apply(info)
	return c.get(tenant), nil
}

func (c *Cache) get(tenant domain.TenantID) Info {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.entries[tenant].info
}

// Apply records info unless the cache already holds a later version of the tenant.
func (c *Cache) Apply(info Info) {
	if info.Tenant.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.entries[info.Tenant]; ok && !cur.missing && cur.info.Version > info.Version {
		return
	}
	c.entries[info.Tenant] = entry{info: info}
}

// Reload reads tenant from the registry again, whatever the cache holds.
func (c *Cache) Reload(ctx context.Context, tenant domain.TenantID) error {
	_, err := c.fetch(ctx, tenant)
	var denied *domain.DeniedError
	if errors.As(err, &denied) {
		return nil
	}
	return err
}

// Load reads the whole registry into the cache.
func (c *Cache) Load(ctx context.Context) error {
	all, err := c.src.List(ctx)
	if err != nil {
		return err
	}
	for _, info := range all {
		c.Apply(info)
	}
	return nil
}

// Run calls Load every RefreshInterval until ctx ends; failures are logged and the cache keeps
// what it has. It returns nil.
func (c *Cache) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.Load(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "tenant cache refresh failed; serving what it holds", "err", err)
			}
		}
	}
}
