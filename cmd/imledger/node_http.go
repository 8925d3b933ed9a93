package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/internal/telemetry"
	"github.com/imledger/imledger/readmodels/login"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/transport/httpserver"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/schemaapi"
	"github.com/imledger/imledger/transport/web"
	"github.com/imledger/imledger/transport/ws"
)

// startHTTP mounts the ops endpoints, the REST API, the WebSocket gateway and its AsyncAPI
// document, the stream contract's schemas and the chat page on one mux, binds the listener and
// serves in the background.
func (n *node) startHTTP(ctx context.Context) error {
	health, err := httpserver.NewOps(httpserver.Config{
		Checks: n.checks(), Gatherer: n.reg, Logger: n.log.With("component", "readyz"),
	})
	if err != nil {
		return err
	}
	n.health = health
	mux := http.NewServeMux()
	health.Register(mux)
	if err := n.mountREST(ctx, mux); err != nil {
		return err
	}
	mux.Handle(ws.Path, n.gateway)
	mux.Handle(ws.AsyncAPIPath, ws.AsyncAPIHandler())
	mux.Handle(schemaapi.Path, schemaapi.Handler(n.cfg.Kafka.Config))
	mux.Handle("/", web.Handler())
	ln, err := net.Listen("tcp", n.cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http listen on %s: %w", n.cfg.HTTP.Addr, err)
	}
	n.ln = ln
	n.srv = &http.Server{
		// Unknown routes and methods answer the envelope and count as route "unmatched".
		Handler:           telemetry.HTTPMetrics(n.reg)(rest.RouteErrors(mux)),
		ReadHeaderTimeout: n.cfg.HTTP.ReadHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := n.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case n.errc <- fmt.Errorf("http server: %w", err):
			default:
			}
		}
	}()
	n.log.Info("serving HTTP", "addr", ln.Addr().String())
	return nil
}

// mountREST mounts the REST API with every handler the node has, and starts the purge of expired
// Idempotency-Key records. REST sends, recalls and edits reach online sessions through the
// handlers' commit listeners, as the gateway's own do.
func (n *node) mountREST(ctx context.Context, mux *http.ServeMux) error {
	idem, err := rest.NewPostgresIdempotency(n.pool, n.log.With("component", "idempotency"))
	if err != nil {
		return err
	}
	h := n.cfg.HTTP
	cfg := rest.Config{
		Version: buildVersion(), MaxBodyBytes: h.MaxBodyBytes, MaxContentBytes: n.cfg.Send.MaxContentBytes,
		Logger: n.log.With("component", "rest"), Panics: n.panics, DevAuth: h.DevAuth, RequireAPIKey: h.RequireAPIKey,
		TokenTTL: n.cfg.Auth.TokenTTL, IdempotencyTTL: h.IdempotencyTTL, IdempotencyPendingTimeout: h.IdempotencyPendingTimeout,
		RateLimitPrefix: n.cfg.RateLimitPrefix(), LoginPerIP: h.LoginPerIP, LoginPerNameIP: h.LoginPerNameIP,
		LoginPerName: h.LoginPerName, LoginKnownAddressTTL: h.LoginKnownAddressTTL, RegisterPerIP: h.RegisterPerIP,
		CodePerIP: h.CodePerIP, AccountPerUser: h.AccountPerUser, ResetPerIP: h.ResetPerIP, ResetPerLogin: h.ResetPerLogin,
		ResetTokenTTL: h.ResetTokenTTL,
	}
	handlers := rest.Handlers{
		Send: n.state.sender, MessageOps: n.ops, ReadPolicy: n.readPolicy(),
		Presence: n.presence, PresencePolicy: n.policy, Groups: n.groups, Accounts: n.accounts, Tokens: n.signer, APIKeys: n.accounts,
		Idempotency: idem, Redis: n.rdb, Gate: n.gate,
	}
	if n.gate != nil {
		handlers.CodePolicy = n.gate
	}
	if n.state.limiter != nil {
		handlers.Limiter = n.state.limiter
	}
	if n.state.codes != nil {
		handlers.Codes = n.state.codes
	}
	if n.state.atokens != nil {
		handlers.ActionTokens = n.state.atokens
	}
	// The account self-service: logins start sessions; logout, sign-out, password change and
	// reset; "delete my account" erases the account through governance (crypto-shredding).
	if n.self != nil {
		handlers.Self = n.self
		if n.governance != nil && n.keys != nil {
			handlers.Eraser = n.governance
		}
	}
	if n.router != nil {
		handlers.SessionList = login.New(n.router)
	}
	if n.reader != nil {
		conv := query.NewConversationReader(n.reader, n.biz)
		handlers.History, handlers.Unread, handlers.Business = n.reader, conv, n.biz
		handlers.Conversations, handlers.FriendRequests, handlers.Search = conv, n.biz, n.biz
	}
	if n.pf.settings != nil {
		handlers.Push = n.pf.settings
	}
	if n.pf.files != nil {
		handlers.Files, handlers.FileRefs, handlers.FileURLs = n.pf.files, n.pf.filedb, n.pf.urls
		fc := n.pf.files.Config()
		cfg.MaxFileBytes, cfg.UploadMemory, cfg.UploadIdleTimeout = fc.MaxBytes, fc.UploadMemory, fc.UploadIdleTimeout
		var tenants rest.TenantChecker
		if n.gate != nil {
			tenants = n.gate
		}
		mux.Handle("GET "+rest.DownloadPath, rest.FileDownload(n.pf.files, n.pf.urls, tenants))
	}
	api, err := rest.New(mux, cfg, handlers)
	if err != nil {
		return err
	}
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "imledger_rest_upload_bytes_held",
		Help: "Bytes of upload bodies the node holds now; at most files.upload_memory."},
		func() float64 { return float64(api.UploadBytesHeld()) }))
	n.aux = append(n.aux, n.spawn(ctx, "idempotency purge", func(ctx context.Context) error {
		return idem.RunPurge(ctx, h.IdempotencyPurgeInterval)
	}))
	return nil
}
