package push

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Notification is one reminder to one device. It says which conversation has news and how many
// messages the reminder stands for, never what they say.
type Notification struct {
	TenantID string
	UserID   string
	DeviceID string
	Token    string
	Platform string
	Type     string // group_message, direct_message or mention
	Topic    string // the conversation of the latest message the reminder stands for
	Seq      int64  // that message's seq
	Count    int    // how many messages the reminder stands for
}

// Provider delivers a reminder to a push service. Send fails with a *PermanentError when trying
// again cannot help (the service refused the request itself); any other error is retried.
type Provider interface {
	Name() string
	Send(ctx context.Context, n Notification) error
}

// PermanentError is a refusal that a retry would meet again.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// payload is the data every provider carries: seed 000's four fields and the count.
func (n Notification) payload() map[string]string {
	return map[string]string{"type": n.Type, "topic": n.Topic, "seq": strconv.FormatInt(n.Seq, 10),
		"tenant_id": n.TenantID, "count": strconv.Itoa(n.Count)}
}

// post sends body and classifies the answer: 2xx is success; 408, 429 and 5xx are retryable;
// other statuses (a redirect included) are permanent.
func post(ctx context.Context, c *http.Client, req *http.Request) error {
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("http %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	if resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return err
	}
	return &PermanentError{Err: err}
}

// JPush is a JPush-compatible provider: POST {url} with HTTP basic auth app_key:master_secret
// and a push object addressed to one registration id, with the reminder in the notification's
// extras.
type JPush struct {
	cfg    JPushConfig
	client *http.Client
}

// NewJPush returns the provider; cfg.Timeout bounds each call.
func NewJPush(cfg JPushConfig) *JPush {
	c := Config{JPush: cfg}
	c.setDefaults()
	return &JPush{cfg: c.JPush, client: newClient(c.JPush.Timeout)}
}

// newClient is an HTTP client for one push service: the worker calls it Concurrency at a time,
// so it keeps that many connections open instead of the default two (which would open and close
// a connection per call under load and run out of ports). A redirect is not followed: it would
// post the reminder (the device token, the JPush credentials on the same host) again to wherever
// it points, or turn into a GET whose 2xx counted as sent; post answers it as a refusal.
func newClient(timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 1024
	return &http.Client{Timeout: timeout, Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Name implements Provider.
func (j *JPush) Name() string { return "jpush" }

// Send implements Provider.
func (j *JPush) Send(ctx context.Context, n Notification) error {
	extras := n.payload()
	body := map[string]any{
		"platform": "all",
		"audience": map[string]any{"registration_id": []string{n.Token}},
		"notification": map[string]any{
			"alert":   j.cfg.Alert,
			"android": map[string]any{"alert": j.cfg.Alert, "extras": extras},
			"ios":     map[string]any{"alert": j.cfg.Alert, "extras": extras, "badge": "+" + strconv.Itoa(n.Count)},
		},
		"options": map[string]any{"apns_production": j.cfg.APNSProduction, "time_to_live": 86400},
	}
	b, err := json.Marshal(body)
	if err != nil {
		return &PermanentError{Err: err}
	}
	req, err := http.NewRequest(http.MethodPost, j.cfg.URL, bytes.NewReader(b))
	if err != nil {
		return &PermanentError{Err: err}
	}
	req.SetBasicAuth(j.cfg.AppKey, j.cfg.MasterSecret)
	req.Header.Set("Content-Type", "application/json")
	return post(ctx, j.client, req)
}

// Webhook is the generic webhook provider: POST {url} with a JSON body per reminder and device,
// signed with HMAC-SHA256 when a secret is set.
type Webhook struct {
	cfg    WebhookConfig
	client *http.Client
}

// NewWebhook returns the provider; cfg.Timeout bounds each call.
func NewWebhook(cfg WebhookConfig) *Webhook {
	c := Config{Webhook: cfg}
	c.setDefaults()
	return &Webhook{cfg: c.Webhook, client: newClient(c.Webhook.Timeout)}
}

// Name implements Provider.
func (w *Webhook) Name() string { return "webhook" }

// WebhookBody is what the webhook provider posts.
type WebhookBody struct {
	TenantID string `json:"tenant_id"`
	UserID   string `json:"user_id"`
	DeviceID string `json:"device_id"`
	Token    string `json:"token"`
	Platform string `json:"platform,omitempty"`
	Type     string `json:"type"`
	Topic    string `json:"topic"`
	Seq      string `json:"seq"`
	Count    int    `json:"count"`
}

// Send implements Provider.
func (w *Webhook) Send(ctx context.Context, n Notification) error {
	b, err := json.Marshal(WebhookBody{TenantID: n.TenantID, UserID: n.UserID, DeviceID: n.DeviceID, Token: n.Token,
		Platform: n.Platform, Type: n.Type, Topic: n.Topic, Seq: strconv.FormatInt(n.Seq, 10), Count: n.Count})
	if err != nil {
		return &PermanentError{Err: err}
	}
	req, err := http.NewRequest(http.MethodPost, w.cfg.URL, bytes.NewReader(b))
	if err != nil {
		return &PermanentError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if w.cfg.Secret != "" {
		mac := hmac.New(sha256.New, []byte(w.cfg.Secret))
		mac.Write(b)
		req.Header.Set("X-Imledger-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	return post(ctx, w.client, req)
}

// deliver calls p.Send on the retry schedule and returns the attempts it made and the last
// error (nil when sent).
func deliver(ctx context.Context, p Provider, n Notification, r RetryConfig) (int, error) {
	wait := r.InitialInterval
	var err error
	for attempt := 1; ; attempt++ {
		if err = p.Send(ctx, n); err == nil {
			return attempt, nil
		}
		var perm *PermanentError
		if errors.As(err, &perm) || attempt >= r.MaxAttempts {
			return attempt, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, r.MaxInterval)
	}
}
