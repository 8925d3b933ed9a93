package wsbench

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/imledger/imledger/domain"
)

// TokenIssuer issues login tokens (transport/auth.Signer implements it).
type TokenIssuer interface {
	Issue(tenant domain.TenantID, user domain.UserID, ttl time.Duration) (string, error)
}

// Options configure a Run. Zero fields take the defaults named below.
type Options struct {
	// URLs are the gateways, e.g. ws://127.0.0.1:8080/v1/im/ws; client i connects to
	// URLs[i mod len(URLs)], so clients of one group spread over the nodes. At least one.
	URLs []string
	// Tenant the clients log in to. Required.
	Tenant domain.TenantID
	// Tokens issues a token per client. Required.
	Tokens TokenIssuer
	// Clients is the number of connections, one user each. Default 100.
	Clients int
	// Groups is the number of group topics; client i joins group i mod Groups. Default 10.
	Groups int
	// Rate is the total messages per second over all clients. Default 1000.
	Rate float64
	// Duration is how long clients send. Default 10 s.
	Duration time.Duration
	// Drain is how long to wait after sending for outstanding acks and deliveries. Default 3 s.
	Drain time.Duration
	// ContentBytes pads each message's content to about this size. Default 64.
	ContentBytes int
	// FirstUser is the first client's user id; clients use FirstUser..FirstUser+Clients-1.
	// Default 1_000_000.
	FirstUser int64
	// FirstGroup is the first group id; topics are grp<FirstGroup>..grp<FirstGroup+Groups-1>.
	// Default 1_000_000.
	FirstGroup int64
	// DialConcurrency bounds connections being set up at once. Default 32.
	DialConcurrency int
	// Logger receives progress. Default discards.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Clients == 0 {
		o.Clients = 100
	}
	if o.Groups == 0 {
		o.Groups = 10
	}
	if o.Rate == 0 {
		o.Rate = 1000
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Drain == 0 {
		o.Drain = 3 * time.Second
	}
	if o.ContentBytes == 0 {
		o.ContentBytes = 64
	}
	if o.FirstUser == 0 {
		o.FirstUser = 1_000_000
	}
	if o.FirstGroup == 0 {
		o.FirstGroup = 1_000_000
	}
	if o.DialConcurrency == 0 {
		o.DialConcurrency = 32
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid option at once, with defaults applied.
func (o Options) Validate() error {
	o.setDefaults()
	var errs []error
	if len(o.URLs) == 0 {
		errs = append(errs, errors.New("wsbench: at least one url is required"))
	}
	for _, s := range o.URLs {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") {
			errs = append(errs, fmt.Errorf("wsbench: url %q must be ws:// or wss://", s))
		}
	}
	if o.Tenant.IsZero() {
		errs = append(errs, errors.New("wsbench: tenant is required"))
	}
	if o.Tokens == nil {
		errs = append(errs, errors.New("wsbench: a token issuer is required"))
	}
	if o.Clients <= 0 || o.Groups <= 0 || o.Groups > o.Clients {
		errs = append(errs, errors.New("wsbench: want 0 < groups <= clients"))
	}
	if o.Rate <= 0 || o.Duration <= 0 || o.Drain < 0 || o.ContentBytes < 0 || o.DialConcurrency <= 0 {
		errs = append(errs, errors.New("wsbench: rate, duration and dial concurrency must be positive; drain and content bytes not negative"))
	}
	if o.FirstUser <= 0 || o.FirstGroup <= 0 {
		errs = append(errs, errors.New("wsbench: first user and first group must be positive"))
	}
	return errors.Join(errs...)
}
