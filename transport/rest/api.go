package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/internal/telemetry"
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
	// Panics counts the panics of handlers (imledger_panics_total{component="rest"}); each is
	// logged with its stack and answered 500 internal. Default: logged only.
	Panics *telemetry.Panics

	// DevAuth also accepts the development headers X-IM-Tenant and X-IM-User as the principal
	// of a request without an Authorization header. Anyone can claim any user with them: for
	// tests and the local demo only. Default off.
	DevAuth bool
	// RequireAPIKey makes the tenant API key (X-IM-API-Key) mandatory on every request besides
	// the bearer token, and on register and login. A key given when not required is still
	// checked. Default off (the demo has no keys).
	RequireAPIKey bool
	// TokenTTL is the lifetime of the tokens login issues. Default 24 h.
	TokenTTL time.Duration

	// IdempotencyTTL is how long an Idempotency-Key and its stored answer are kept. Default 24 h.
	IdempotencyTTL time.Duration
	// IdempotencyPendingTimeout is how long a request may hold its key unfinished; a claim older
	// than this is taken to be abandoned (the node died) and the next request with the key runs
	// again. Keep it above the longest request time. Default 1 min.
	IdempotencyPendingTimeout time.Duration

	// RateLimitPrefix prefixes the Redis keys of the login and register rate limits.
	// Default "im:rl:".
	RateLimitPrefix string
	// LoginPerIP is how many logins one client address may try per minute, whatever the login
	// names. Default 30.
	LoginPerIP int
	// LoginPerNameIP is how many logins of one login name one client address may try per
	// minute: a password guesser is slowed down without touching the owner at another address.
	// Default 10.
	LoginPerNameIP int
	// LoginPerName is how many logins of one login name may be tried per minute from all the
	// addresses that have not logged in to it within LoginKnownAddressTTL, so guessing from many
	// addresses is bounded while the owner, at an address it logged in from, is never locked out
	// by it. Default 100.
	LoginPerName int
	// LoginKnownAddressTTL is how long a successful login keeps its client address known to the
	// login name (exempt from LoginPerName). Default 30 days.
	LoginKnownAddressTTL time.Duration
	// RegisterPerIP is how many registrations one client address may try per minute. Default 10.
	RegisterPerIP int
	// CodePerIP is how many verification-code requests (send, status, verify) one client address
	// may make per minute. Default 20.
	CodePerIP int
	// AccountPerUser is how many of the requests that check a user's password again (change the
	// password, bind a contact, delete the account) one user may make per minute, right or wrong.
	// Default 5.
	AccountPerUser int
	// ResetPerIP is how many password-reset requests (for a reset token, and the reset itself)
	// one client address may make per minute. Default 10.
	ResetPerIP int
	// ResetPerLogin is how many reset tokens may be asked for one login name per minute, from
	// every address together. Default 5.
	ResetPerLogin int
	// ResetTokenTTL is the lifetime of the one-time token a verified password reset gets.
	// Default 15 min.
	ResetTokenTTL time.Duration
	// MaxFileBytes caps the body of a file upload. Default 100 MiB.
	MaxFileBytes int64
	// UploadMemory bounds the bytes of upload bodies (bodies over MaxBodyBytes) the node holds
	// in memory at once: each is read whole before it runs, for its Idempotency-Key's request
	// hash, and counts at its Content-Length (MaxFileBytes without one) until its request ends.
	// An upload that does not fit is refused at once with 503 retry; one user holds at most
	// MaxFileBytes of it and one tenant at most half of it (at least MaxFileBytes), beyond which
	// the upload is refused with 429 rate_limited. At least MaxFileBytes. Default 2 × MaxFileBytes.
	UploadMemory int64
	// UploadIdleTimeout ends an upload whose body stops arriving for this long with 408
	// request_timeout, giving its share of UploadMemory back. Default 30 s; negative: no limit.
	UploadIdleTimeout time.Duration
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
	if c.TokenTTL == 0 {
		c.TokenTTL = 24 * time.Hour
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.IdempotencyPendingTimeout == 0 {
		c.IdempotencyPendingTimeout = time.Minute
	}
	if c.RateLimitPrefix == "" {
		c.RateLimitPrefix = "im:rl:"
	}
	if c.LoginPerIP == 0 {
		c.LoginPerIP = 30
	}
	if c.LoginPerNameIP == 0 {
		c.LoginPerNameIP = 10
	}
	if c.LoginPerName == 0 {
		c.LoginPerName = 100
	}
	if c.LoginKnownAddressTTL == 0 {
		c.LoginKnownAddressTTL = 30 * 24 * time.Hour
	}
	if c.RegisterPerIP == 0 {
		c.RegisterPerIP = 10
	}
	if c.CodePerIP == 0 {
		c.CodePerIP = 20
	}
	if c.AccountPerUser == 0 {
		c.AccountPerUser = 5
	}
	if c.ResetPerIP == 0 {
		c.ResetPerIP = 10
	}
	if c.ResetPerLogin == 0 {
		c.ResetPerLogin = 5
	}
	if c.ResetTokenTTL == 0 {
		c.ResetTokenTTL = 15 * time.Minute
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 100 << 20
	}
	if c.UploadMemory == 0 {
		c.UploadMemory = 2 * c.MaxFileBytes
	}
	if c.UploadIdleTimeout == 0 {
		c.UploadIdleTimeout = 30 * time.Second
	}
}

// Validate reports every problem of c, with defaults applied, joined into one error.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("rest: MaxBodyBytes must not be negative"))
	}
	if c.MaxFileBytes < 0 || c.UploadMemory < c.MaxFileBytes {
		errs = append(errs, errors.New("rest: MaxFileBytes must not be negative, and UploadMemory not below it"))
	}
	if c.MaxContentBytes < 0 {
		errs = append(errs, errors.New("rest: MaxContentBytes must not be negative"))
	}
	if c.TokenTTL < 0 || c.IdempotencyTTL < 0 || c.IdempotencyPendingTimeout < 0 {
		errs = append(errs, errors.New("rest: TokenTTL, IdempotencyTTL and IdempotencyPendingTimeout must not be negative"))
	}
	if c.IdempotencyPendingTimeout >= c.IdempotencyTTL {
		errs = append(errs, errors.New("rest: IdempotencyPendingTimeout must be shorter than IdempotencyTTL"))
	}
	if c.LoginPerIP < 0 || c.LoginPerNameIP < 0 || c.LoginPerName < 0 || c.RegisterPerIP < 0 || c.CodePerIP < 0 ||
		c.AccountPerUser < 0 || c.ResetPerIP < 0 || c.ResetPerLogin < 0 {
		errs = append(errs, errors.New("rest: rate limits must not be negative"))
	}
	if c.ResetTokenTTL < time.Second {
		errs = append(errs, errors.New("rest: ResetTokenTTL must be at least 1s"))
	}
	if c.LoginKnownAddressTTL < 0 {
		errs = append(errs, errors.New("rest: LoginKnownAddressTTL must not be negative"))
	}
	return errors.Join(errs...)
}

// Handlers are the collaborators behind the endpoints. A nil field leaves its endpoints out of
// the API and the OpenAPI document; New refuses combinations that cannot work (authenticated
// endpoints without a way to authenticate, writes without an idempotency store, login without
// a token issuer or rate limiter).
type Handlers struct {
	// Send serves POST /v1/im/topics/{topic}/messages.
	Send MessageSender
	// MessageOps serves recall, edit, delete-for-me and read marks.
	MessageOps MessageOperator
	// History serves GET /v1/im/topics/{topic}/messages; Unread the unread counts.
	History HistoryReader
	Unread  UnreadReader
	// ReadPolicy decides who may read a topic (history, unread, delete-for-me, read marks) and
	// a group's member list. Required with History, Unread, MessageOps or Business.
	ReadPolicy ReadPolicy
	// Presence serves GET /v1/im/users/{uid}/presence.
	Presence PresenceReader
	// PresencePolicy decides who may read a user's presence. Required with Presence.
	PresencePolicy PresenceVisibility
	// Groups are the group, relation and profile command handlers (POST/PUT/PATCH/DELETE under
	// /v1/im/groups, /v1/im/friends, /v1/im/blocks and PATCH /v1/im/users/me).
	Groups *group.Handlers
	// Business serves the reads of groups, members, friends, blocks and profiles.
	Business BusinessReader
	// Search serves GET /v1/im/search/users, /v1/im/search/groups, the batch profile read
	// GET /v1/im/users and the pending group requests GET /v1/im/groups/requests.
	Search SearchReader
	// Conversations serves GET /v1/im/conversations; FriendRequests GET /v1/im/friends/requests.
	Conversations  ConversationLister
	FriendRequests FriendRequestReader

	// Accounts serves POST /v1/im/auth/register and /v1/im/auth/login.
	Accounts AccountService
	// Tokens verifies bearer tokens and issues them at login (*auth.Signer). Required unless
	// Config.DevAuth is on.
	Tokens TokenService
	// APIKeys verifies tenant API keys. Required with Config.RequireAPIKey.
	APIKeys APIKeyVerifier
	// Idempotency stores Idempotency-Key records. Required when any write endpoint is served.
	Idempotency IdempotencyStore
	// Redis holds the login and register rate limits. Required with Accounts.
	Redis redis.UniversalClient
	// Gate checks tenants and principals against the tenant registry and account governance.
	// Optional: without it every tenant a client names is served.
	Gate Gate
	// Limiter applies the per-tenant rate limits of REST requests (per user, per API key),
	// group creation and friend requests. Optional: without it only the login and register
	// limits apply. Sends are limited by the Send handler given (ratelimit.LimitSends).
	Limiter RateLimiter
	// Codes serves the verification-code endpoints under /v1/im/verify and consumes the codes
	// register and login need when CodePolicy says the tenant requires them. Optional.
	Codes CodeService
	// CodePolicy says which tenants require a code to register or log in. Optional: without it
	// none does.
	CodePolicy CodePolicy
	// ActionTokens serves the action-token endpoints under /v1/im/action-tokens. Optional.
	ActionTokens ActionTokenService

	// Self serves the account self-service under /v1/im/account (logout, logout everywhere,
	// sign-out of one session, password change) and makes every login start a login session
	// (claim sid). With Codes it also serves binding a contact; with Codes and ActionTokens the
	// password reset by verification code. Optional: without it logins issue tokens without a
	// session, as before. Needs Tokens, Redis and Idempotency.
	Self SelfService
	// SessionList serves GET /v1/im/account/sessions from the read model. Optional.
	SessionList SessionLister
	// Eraser serves POST /v1/im/account/delete (with Self, which checks the password first).
	// Optional: without it there is no such endpoint.
	Eraser AccountEraser

	// Push serves the device and mute endpoints under /v1/im/push.
	Push PushSettings
	// Files serves /v1/im/files; FileRefs and FileURLs are required with it.
	Files    FileService
	FileRefs FileReferences
	FileURLs FileURLSigner
}

// API is the REST API mounted on a ServeMux.
type API struct {
	cfg     Config
	h       Handlers
	huma    huma.API
	limiter *redis_rate.Limiter
	bodies  *bodyBudget // Config.UploadMemory
}

// New mounts the API on mux: the endpoints of the non-nil handlers, the OpenAPI 3.1 document
// at GET /openapi.json (and /openapi.yaml) and its human-readable page at GET /docs. It fails when cfg is invalid or h misses a
// collaborator the served endpoints need.
func New(mux *http.ServeMux, cfg Config, h Handlers) (*API, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkHandlers(cfg, h); err != nil {
		return nil, err
	}
	a := &API{cfg: cfg, h: h, huma: humago.New(mux, humaConfig(cfg)), bodies: newBodyBudget(cfg.UploadMemory, cfg.MaxFileBytes)}
	if h.Redis != nil {
		a.limiter = redis_rate.NewLimiter(h.Redis)
	}
	// recoverPanics runs innermost, so a panic is answered like any 500: the idempotency
	// middleware releases the key and the answer carries the request id.
	// checkInput refuses text a decoder would change before the idempotency middleware claims
	// a key for it or huma decodes it.
	a.huma.UseMiddleware(withRequestID, withRemoteAddr, a.authenticate, a.checkInput, a.idempotent, a.recoverPanics)
	a.registerAll()
	a.document()
	if a.h.Files != nil {
		a.documentDownload()
	}
	docs := a.docsPage()
	mux.Handle("GET "+DocsPath, docs)
	mux.Handle("GET "+DocsPath+"/", docs)
	return a, nil
}

// UploadBytesHeld is the bytes of upload bodies the node holds now, within Config.UploadMemory
// (exported as imledger_rest_upload_bytes_held).
func (a *API) UploadBytesHeld() int64 { return a.bodies.held() }

// checkHandlers refuses handlers that miss what another needs: every broken handlerRule, in
// their order.
func checkHandlers(cfg Config, h Handlers) error {
	var errs []error
	for _, r := range handlerRules {
		if r.broken(cfg, h) {
			errs = append(errs, errors.New(r.msg))
		}
	}
	return errors.Join(errs...)
}

// servesWrites and servesReads tell whether h serves the authenticated writes and reads.
func servesWrites(h Handlers) bool {
	return h.Send != nil || h.MessageOps != nil || h.Groups != nil || h.ActionTokens != nil
}

func servesReads(h Handlers) bool {
	return h.History != nil || h.Unread != nil || h.Presence != nil || h.Business != nil ||
		h.Conversations != nil || h.FriendRequests != nil || h.Search != nil
}

// handlerRules are what the handlers need of each other: a rule is broken when a handler is
// set without what it needs, and its message says what.
var handlerRules = []struct {
	msg    string
	broken func(cfg Config, h Handlers) bool
}{
	{"rest: Tokens is required to authenticate requests (or turn DevAuth on)", func(cfg Config, h Handlers) bool {
		return (servesWrites(h) || servesReads(h)) && h.Tokens == nil && !cfg.DevAuth
	}},
	{"rest: Idempotency is required for the write endpoints", func(_ Config, h Handlers) bool {
		return servesWrites(h) && h.Idempotency == nil
	}},
	{"rest: ReadPolicy is required for topic reads and member lists", func(_ Config, h Handlers) bool {
		return (h.History != nil || h.Unread != nil || h.MessageOps != nil || h.Business != nil) && h.ReadPolicy == nil
	}},
	{"rest: Codes needs Redis for the per-address limits", func(_ Config, h Handlers) bool {
		return h.Codes != nil && h.Redis == nil
	}},
	{"rest: Accounts needs Tokens to issue tokens and Redis for rate limits", func(_ Config, h Handlers) bool {
		return h.Accounts != nil && (h.Tokens == nil || h.Redis == nil)
	}},
	{"rest: Idempotency is required for the push and file endpoints", func(_ Config, h Handlers) bool {
		return (h.Push != nil || h.Files != nil) && h.Idempotency == nil
	}},
	{"rest: Files needs FileRefs, ReadPolicy and a FileURLs key", func(_ Config, h Handlers) bool {
		return h.Files != nil && (h.FileRefs == nil || h.ReadPolicy == nil || len(h.FileURLs.Key) == 0)
	}},
	{"rest: Push needs ReadPolicy for mutes", func(_ Config, h Handlers) bool {
		return h.Push != nil && h.ReadPolicy == nil
	}},
	{"rest: Presence needs PresencePolicy to respect blocks", func(_ Config, h Handlers) bool {
		return h.Presence != nil && h.PresencePolicy == nil
	}},
	{"rest: Self needs Tokens to issue session tokens, Redis for rate limits and Idempotency", func(_ Config, h Handlers) bool {
		return h.Self != nil && (h.Tokens == nil || h.Redis == nil || h.Idempotency == nil)
	}},
	{"rest: Eraser needs Self to check the password", func(_ Config, h Handlers) bool {
		return h.Eraser != nil && h.Self == nil
	}},
	{"rest: RequireAPIKey needs APIKeys", func(cfg Config, h Handlers) bool {
		return cfg.RequireAPIKey && h.APIKeys == nil
	}},
}

func humaConfig(cfg Config) huma.Config {
	hc := huma.DefaultConfig("imledger API", cfg.Version)
	hc.Info.Description = "imledger instant-messaging API. Every answer is the envelope " +
		"{code, data, reason, message, details, request_id, server_time}; 64-bit numbers are strings. " +
		"Authenticated endpoints take `Authorization: Bearer <token>` from POST /v1/im/auth/login" +
		" (and X-IM-API-Key when the server requires tenant API keys); their writes take an Idempotency-Key."
	hc.DocsPath = ""    // the built-in docs page loads scripts from a CDN
	hc.SchemasPath = "" // schemas stay inline in the document
	hc.CreateHooks = nil
	hc.Formats = map[string]huma.Format{
		"application/json": jsonFormat,
		"json":             jsonFormat,
	}
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securityBearer: {Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			Description: "Access token from POST /v1/im/auth/login."},
		securityAPIKey: {Type: "apiKey", In: "header", Name: HeaderAPIKey,
			Description: "Tenant API key; required when the server runs with require_api_key."},
	}
	return hc
}

// registerAll registers the endpoints of the configured handlers.
func (a *API) registerAll() {
	if a.h.Accounts != nil {
		a.registerAuth()
	}
	if a.h.Send != nil {
		a.registerSendMessage(a.h.Send)
	}
	if a.h.History != nil {
		a.registerHistory()
	}
	if a.h.Unread != nil {
		a.registerUnread()
	}
	if a.h.MessageOps != nil {
		a.registerMessageOps()
	}
	if a.h.Presence != nil {
		a.registerPresence()
	}
	if a.h.Groups != nil {
		a.registerGroupCommands()
		a.registerMemberCommands()
		a.registerRelationCommands()
		a.registerUpdateProfile()
	}
	if a.h.Business != nil {
		a.registerBusinessReads()
	}
	if a.h.Search != nil {
		a.registerSearch()
		a.registerGroupRequests()
	}
	if a.h.Conversations != nil {
		a.registerConversations()
	}
	if a.h.FriendRequests != nil {
		a.registerFriendRequests()
	}
	if a.h.Codes != nil {
		a.registerVerifyCodes()
	}
	if a.h.ActionTokens != nil {
		a.registerActionTokens()
	}
	if a.h.Self != nil {
		a.registerSelfService()
	}
	if a.h.SessionList != nil {
		a.registerSessionList()
	}
	if a.h.Push != nil {
		a.registerPush()
	}
	if a.h.Files != nil {
		a.registerFiles()
	}
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
