package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/imledger/imledger/domain"
)

// Delivery is one code to deliver.
type Delivery struct {
	Tenant  domain.TenantID
	Scene   Scene
	Channel Channel
	To      string // the phone number or e-mail address, in clear: for the gateway only
	// TargetHash is To's keyed hash, as stored; safe to log.
	TargetHash string
	Code       string
	TTL        time.Duration
}

// Sender delivers codes. An error means the code did not go out: Create then withdraws it.
type Sender interface {
	Send(ctx context.Context, d Delivery) error
}

// LogSender logs that a code would be sent, with the tenant, scene, channel and the target's
// hash, never the code or the target: for running serve without a gateway. Nobody receives the
// code, so flows that need one cannot complete until a gateway is configured.
type LogSender struct {
	Logger *slog.Logger
}

var _ Sender = (*LogSender)(nil)

// Send logs the delivery at info level.
func (s *LogSender) Send(ctx context.Context, d Delivery) error {
	log := s.Logger
	if log == nil {
		return nil
	}
	log.InfoContext(ctx, "verification code not delivered: no gateway configured",
		"tenant_id", d.Tenant.String(), "scene", string(d.Scene), "channel", string(d.Channel), "target_hash", d.TargetHash)
	return nil
}

// HTTPSenderConfig configures an HTTPSender.
type HTTPSenderConfig struct {
	// URL receives a POST of {tenant_id, scene, channel, to, code, ttl_seconds} as JSON for each
	// code; any 2xx answer is success. Required.
	URL string
	// Token, when set, is sent as Authorization: Bearer <Token>.
	Token string
	// Timeout bounds one POST. Default 5 s.
	Timeout time.Duration
}

// HTTPSender posts codes to an SMS or e-mail gateway over HTTP.
type HTTPSender struct {
	cfg    HTTPSenderConfig
	client *http.Client
}

var _ Sender = (*HTTPSender)(nil)

// NewHTTPSender returns an HTTPSender; it fails without a URL.
func NewHTTPSender(cfg HTTPSenderConfig) (*HTTPSender, error) {
	if cfg.URL == "" {
		return nil, errors.New("verify: the gateway URL is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	// A redirect is not followed: it would post the code and the number again to wherever it
	// points (with the token, on the same host), or turn into a GET whose 2xx counted as
	// delivered. It is answered like any other non-2xx.
	return &HTTPSender{cfg: cfg, client: &http.Client{Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// Send posts d to the gateway. A non-2xx answer (a redirect included) or a transport failure is
// a retryable error.
func (s *HTTPSender) Send(ctx context.Context, d Delivery) error {
	body, err := json.Marshal(map[string]any{"tenant_id": d.Tenant.String(), "scene": d.Scene, "channel": d.Channel,
		"to": d.To, "code": d.Code, "ttl_seconds": int(d.TTL.Seconds())})
	if err != nil {
		return fmt.Errorf("verify: encode delivery: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("verify: gateway request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return domain.Retryable("verify: gateway", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return domain.Retryable("verify: gateway", fmt.Errorf("gateway answered %s", resp.Status))
	}
	return nil
}
