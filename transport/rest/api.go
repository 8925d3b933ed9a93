package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// Config configures the REST API.
type Config struct {
	// Version is the API version in the OpenAPI document's info. Default "dev".
	Version string
	// MaxBodyBytes caps a request body; a larger one is answered 413 too_large. Default 1 MiB.
	MaxBodyBytes int64
	// MaxContentBytes caps a message's serialized content, as the send handler's own limit
	// does; set both to the same value. Default domain.DefaultMaxContentBytes (64 KiB).
	MaxContentBytes int
	// Logger receives the causes of 5xx answers, which clients never see. Default: discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, with defaults applied, joined into one error.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("rest: MaxBodyBytes must not be negative"))
	}
	if c.MaxContentBytes < 0 {
		errs = append(errs, errors.New("rest: MaxContentBytes must not be negative"))
	}
	return errors.Join(errs...)
}

// Handlers are the command handlers behind the endpoints. A nil handler leaves its endpoints out
// of the API and the OpenAPI document.
type Handlers struct {
	// Send serves POST /v1/im/topics/{topic}/messages.
	Send MessageSender
}

// API is the REST API mounted on a ServeMux.
type API struct {
	cfg  Config
	huma huma.API
}

// New mounts the API on mux: the endpoints of the non-nil handlers and the OpenAPI 3.1 document
// at GET /openapi.json (and /openapi.yaml). It fails when cfg is invalid.
func New(mux *http.ServeMux, cfg Config, h Handlers) (*API, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := huma.DefaultConfig("imledger API", cfg.Version)
	hc.Info.Description = "imledger instant-messaging API. Every answer is the envelope " +
		"{code, data, reason, message, details, request_id, server_time}; 64-bit numbers are strings."
	hc.DocsPath = ""    // the built-in docs page loads scripts from a CDN
	hc.SchemasPath = "" // schemas stay inline in the document
	hc.CreateHooks = nil
	hc.Formats = map[string]huma.Format{
		"application/json": huma.DefaultJSONFormat,
		"json":             huma.DefaultJSONFormat,
	}
	a := &API{cfg: cfg, huma: humago.New(mux, hc)}
	a.huma.UseMiddleware(withRequestID)
	if h.Send != nil {
		a.registerSendMessage(h.Send)
	}
	return a, nil
}

// OpenAPI returns the API's OpenAPI document.
func (a *API) OpenAPI() *huma.OpenAPI { return a.huma.OpenAPI() }

// fail maps err to its answer and logs the cause of server-side failures, which the answer
// leaves out.
func (a *API) fail(ctx context.Context, err error, attrs ...any) error {
	e := MapError(ctx, err)
	switch {
	case e.status >= 500 && e.Reason == ReasonInternal:
		a.cfg.Logger.ErrorContext(ctx, "request failed", append(attrs, "request_id", e.RequestID, "err", err)...)
	case e.status >= 500:
		a.cfg.Logger.WarnContext(ctx, "request failed, retryable", append(attrs, "request_id", e.RequestID, "err", err)...)
	}
	return e
}
