package policy

import (
	"context"
	"strings"

	"github.com/imledger/imledger/domain"
)

// Key names one cached state across nodes: a tenant and a stream id.
type Key struct {
	Tenant   domain.TenantID
	StreamID string
}

// String is the wire form "<tenant>/<stream id>" carried by the invalidation channel (tenant ids
// never contain '/').
func (k Key) String() string { return k.Tenant.String() + "/" + k.StreamID }

// ParseKey parses the wire form. Errors: *domain.ValidationError for a bad tenant or an empty
// stream id.
func ParseKey(s string) (Key, error) {
	t, stream, ok := strings.Cut(s, "/")
	tenant, err := domain.NewTenantID(t)
	if err != nil {
		return Key{}, err
	}
	if !ok || stream == "" {
		return Key{}, &domain.ValidationError{Field: "stream_id", Reason: "required"}
	}
	return Key{Tenant: tenant, StreamID: stream}, nil
}

// Source delivers the invalidation keys other nodes publish (transport backs it with Kafka
// im.cache.invalidate or Redis Pub/Sub). Subscribe calls fn for each key, one at a time, until ctx
// ends or the subscription fails, and then returns; fn is quick and never blocks. Keys published
// while no subscription is established may be lost: the Policy's TTL covers that.
type Source interface {
	Subscribe(ctx context.Context, fn func(Key)) error
}

// Publisher sends invalidation keys to the other nodes. Publish should return quickly (a Redis
// PUBLISH, a buffered Kafka produce): it runs after a command committed, before the command
// answers.
type Publisher interface {
	Publish(ctx context.Context, keys []Key) error
}
