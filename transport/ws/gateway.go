package ws

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gobwas/ws"

	"github.com/imledger/imledger/internal/telemetry"
)

// Path is where the gateway is mounted.
const Path = "/v1/im/ws"

// Gateway is the WebSocket endpoint: an http.Handler that upgrades requests at Path and runs
// one session per connection. It is safe for concurrent use.
type Gateway struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	metrics  *metrics
	upgrader ws.HTTPUpgrader

	panics *telemetry.Panics

	// life is every session's context. A session outlives the request that opened it and ends by
	// its client, its deadlines or Shutdown, never by a context; keeping the request's context
	// instead would hold net/http's per-connection contexts (about 500 bytes) for as long.
	life context.Context

	poll      *poller   // nil: every session reads on a goroutine of its own
	readers   sync.Pool // *bufio.Reader of ReadBufferSize, for polled sessions' reading rounds
	sweepStop chan struct{}
	rounds    *rounds   // polled sessions' reading rounds; stops with the sweeper
	stopPoll  sync.Once // Shutdown stops the sweeper and the poller once no session is left

	mu       sync.Mutex
	sessions map[*session]struct{}
	admitted int // connections admitted and not yet released: being upgraded or in sessions
	closing  bool
	wg       sync.WaitGroup

	// Test hooks (export_test.go): called before a client frame is dispatched and before a
	// writer writes a batch, so tests can make them panic.
	frameHook atomic.Pointer[func(typ string)]
	writeHook atomic.Pointer[func()]
}

var _ http.Handler = (*Gateway)(nil)

// New validates cfg and deps and returns a Gateway.
func New(deps Deps, cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	var errs []error
	if deps.Tokens == nil {
		errs = append(errs, errors.New("ws: Tokens is required"))
	}
	if deps.Sender == nil {
		errs = append(errs, errors.New("ws: Sender is required"))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if deps.Hub == nil {
		deps.Hub = NewHub()
	}
	if deps.Publisher == nil {
		deps.Publisher = deps.Hub
	}
	if deps.Policy == nil {
		deps.Policy = DefaultPolicy{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	if deps.Panics == nil {
		if deps.Panics, err = telemetry.NewPanics(deps.Registerer); err != nil {
			return nil, fmt.Errorf("ws: %w", err)
		}
	}
	g := &Gateway{
		cfg: cfg, deps: deps, log: deps.Logger, metrics: m, panics: deps.Panics,
		upgrader: ws.HTTPUpgrader{Timeout: cfg.HandshakeTimeout},
		sessions: map[*session]struct{}{},
		life:     context.Background(),
	}
	if !cfg.BlockingReads {
		if g.poll, err = newPoller(); err != nil {
			g.log.Info("ws: readiness notification unavailable, one reader goroutine per connection", "err", err)
			g.poll = nil
		} else {
			size := cfg.ReadBufferSize
			g.readers.New = func() any { return bufio.NewReaderSize(nil, size) }
			g.sweepStop = make(chan struct{})
			g.rounds = newRounds(g.sweepStop)
			go g.sweep(sweepInterval(cfg), g.sweepStop)
		}
	}
	return g, nil
}

// Hub returns the gateway's topic registry.
func (g *Gateway) Hub() *Hub { return g.deps.Hub }

// ServeHTTP upgrades the request and starts the session in a goroutine of its own. A request whose
// Origin is not allowed is refused with 403 before the upgrade, one over the per-address connect
// limit with 429 and Retry-After (503 when the limiter's Redis is down); during Shutdown, and while
// Config.MaxConnections connections are open, every request is refused with 503.
//
// Returning right after the upgrade lets net/http drop what it keeps per connection (the
// request, its buffers, the handler goroutine's grown stack). On Linux an idle connection then
// costs its session and its subscriptions only: no goroutine, no read buffer and no timer (see
// poll_session.go); with Config.BlockingReads, or elsewhere, it also holds a small read buffer
// and one small goroutine.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.originAllowed(r) {
		g.metrics.refused.WithLabelValues("origin").Inc()
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	if !g.admitAddress(w, r) {
		return
	}
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	if g.cfg.MaxConnections > 0 && g.admitted >= g.cfg.MaxConnections {
		g.mu.Unlock()
		g.metrics.refused.WithLabelValues("max_connections").Inc()
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many connections", http.StatusServiceUnavailable)
		return
	}
	g.admitted++
	g.wg.Add(1)
	g.mu.Unlock()

	conn, rw, _, err := g.upgrader.Upgrade(r, w)
	if err != nil {
		g.release()
		if conn != nil {
			_ = conn.Close()
		}
		g.metrics.refused.WithLabelValues("handshake").Inc()
		g.log.DebugContext(r.Context(), "ws: upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && g.cfg.SocketSendBuffer > 0 {
		_ = tc.SetWriteBuffer(g.cfg.SocketSendBuffer)
	}
	// Keep net/http's reader only when the client already sent bytes after the handshake. A
	// polled session otherwise reads with a pooled reader, one reading round at a time.
	br := rw.Reader
	if br.Buffered() == 0 {
		br = nil
	}
	s := newSession(g, conn, br, r.RemoteAddr)
	if sc, ok := conn.(syscall.Conn); ok {
		s.raw, _ = sc.SyscallConn() // nil: every frame goes through the writer goroutine
	}
	s.polled = g.poll != nil && g.poll.add(s, conn) == nil
	if !s.polled && s.br == nil {
		s.br = bufio.NewReaderSize(conn, g.cfg.ReadBufferSize)
	}
	if !g.track(s) {
		g.release()
		s.kill(closeGoingAway)
		return
	}
	if s.polled {
		s.startPolled()
		return
	}
	go func() {
		defer g.wg.Done()
		defer g.untrack(s)
		s.run(g.life)
	}()
}

func (g *Gateway) track(s *session) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.sessions[s] = struct{}{}
	g.metrics.connections.Inc()
	return true
}

// release ends what ServeHTTP admitted for a connection that got no tracked session: it no
// longer counts against MaxConnections, and Shutdown no longer waits for it.
func (g *Gateway) release() {
	g.mu.Lock()
	g.admitted--
	g.mu.Unlock()
	g.wg.Done()
}

// untrack forgets an ended session; its connection no longer counts against MaxConnections.
func (g *Gateway) untrack(s *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sessions, s)
	g.admitted--
	g.metrics.connections.Dec()
}

// Sessions returns the number of open connections.
func (g *Gateway) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// Shutdown refuses new connections, closes every session with 1001 (going away), logging its
// user out of presence, and waits for them until ctx ends. Clients reconnect to another node
// and catch up by seq.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closing = true
	open := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		open = append(open, s)
	}
	g.mu.Unlock()
	for _, s := range open {
		s.goAway()
	}
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		g.stopPoll.Do(func() {
			if g.poll != nil {
				close(g.sweepStop)
				g.poll.close()
			}
		})
		return nil
	case <-ctx.Done():
		for _, s := range open {
			s.kill(closeGoingAway)
		}
		return ctx.Err()
	}
}

// originAllowed implements the Origin check; see Config.AllowedOrigins.
func (g *Gateway) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if len(g.cfg.AllowedOrigins) == 0 {
		return strings.EqualFold(u.Host, r.Host)
	}
	for _, allowed := range g.cfg.AllowedOrigins {
		if originMatches(allowed, u) {
			return true
		}
	}
	return false
}

// originMatches matches "*", "scheme://host[:port]" exactly, or "scheme://*.domain" against any
// subdomain, case-insensitively.
func originMatches(allowed string, origin *url.URL) bool {
	if allowed == "*" {
		return true
	}
	scheme, host, ok := strings.Cut(allowed, "://")
	if !ok || !strings.EqualFold(scheme, origin.Scheme) {
		return false
	}
	if suffix, wild := strings.CutPrefix(host, "*."); wild {
		h := strings.ToLower(origin.Host)
		return strings.HasSuffix(h, "."+strings.ToLower(suffix))
	}
	return strings.EqualFold(host, origin.Host)
}

// newSessionID returns 16 random hex characters.
func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
