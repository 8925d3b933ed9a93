package wsbench

import (
	"context"
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
	// Senders is how many clients publish: clients 0..Senders-1, so they spread over the groups.
	// Default every client. One sender in one group of N clients measures the fanout of one
	// conversation to N-1 readers.
	Senders int
	// Rate is the total messages per second over all senders. Default 1000, or unpaced when
	// InFlight is set: each sender then publishes as soon as it has a free slot.
	Rate float64
	// InFlight bounds the pubs one sender has written and not yet seen answered; a sender waits
	// for an answer before it writes more. 0 means no bound (the rate alone paces senders).
	// InFlight 1 with Rate 0 is a closed loop: the next pub is written when the ack arrives.
	InFlight int
	// Channel makes every client also subscribe to its user's channel ("me") after its group:
	// the load of a client that follows every conversation of its user.
	Channel bool
	// Idle makes the clients connect, log in, subscribe and then only hold their connections
	// for Duration, pinging as a live client does; nobody publishes.
	Idle bool
	// Duration is how long clients send (or, with Idle, hold). Default 10 s.
	Duration time.Duration
	// Monitor, when set, runs from the moment every client is set up until the sending (or
	// holding) window ends, when its context is cancelled; Run waits for it to return. Use it
	// to sample the server's memory and CPU while it is loaded.
	Monitor func(ctx context.Context)
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
	if o.Senders == 0 {
		o.Senders = o.Clients
	}
	if o.Rate == 0 && o.InFlight == 0 {
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
	if o.Senders < 0 || o.Senders > o.Clients {
		errs = append(errs, errors.New("wsbench: want 0 <= senders <= clients"))
	}
	if o.Rate < 0 || o.InFlight < 0 {
		errs = append(errs, errors.New("wsbench: rate and in-flight must not be negative"))
	}
	if o.Duration <= 0 || o.Drain < 0 || o.ContentBytes < 0 || o.DialConcurrency <= 0 {
		errs = append(errs, errors.New("wsbench: duration and dial concurrency must be positive; drain and content bytes not negative"))
	}
	if o.FirstUser <= 0 || o.FirstGroup <= 0 {
		errs = append(errs, errors.New("wsbench: first user and first group must be positive"))
	}
	return errors.Join(errs...)
}
