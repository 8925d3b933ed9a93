package ws

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/smallmap"
	"github.com/imledger/imledger/transport/presence"
)

// outFrame is one queued server frame.
type outFrame struct {
	op      ws.OpCode
	payload []byte
	wire    bool // payload is the whole frame, header included (see wireFrame), or what is left of it
}

// wireFrame encodes a text frame whole, so a message delivered to many sessions is framed once.
func wireFrame(payload []byte) []byte {
	h := ws.Header{Fin: true, OpCode: ws.OpText, Length: int64(len(payload))}
	b := make([]byte, 0, ws.HeaderSize(h)+len(payload))
	buf := bytes.NewBuffer(b)
	_ = ws.WriteHeader(buf, h)
	buf.Write(payload)
	return buf.Bytes()
}

// closeCause is why a connection ends: the close frame to send (code 0: none) and a metric label.
type closeCause struct {
	code   ws.StatusCode
	reason string
	label  string
}

var (
	closeClient       = closeCause{ws.StatusNormalClosure, "", "client_close"}
	closeGone         = closeCause{0, "", "connection_lost"}
	closeGoingAway    = closeCause{ws.StatusGoingAway, "server shutting down", "shutdown"}
	closeIdle         = closeCause{ws.StatusPolicyViolation, "idle timeout", "idle"}
	closeLoginTimeout = closeCause{ws.StatusPolicyViolation, "login timeout", "login_timeout"}
	closeTooLarge     = closeCause{ws.StatusMessageTooBig, "frame too large", "frame_too_large"}
	closeBadUTF8      = closeCause{ws.StatusInvalidFramePayloadData, "invalid utf-8", "bad_utf8"}
	closeProtocol     = closeCause{ws.StatusProtocolError, "protocol error", "protocol_error"}
	closeBinary       = closeCause{ws.StatusUnsupportedData, "binary frames are not supported", "binary_frame"}
	closeSlow         = closeCause{0, "", "slow_consumer"}
	closeWriteFailed  = closeCause{0, "", "write_failed"}
	closeInternal     = closeCause{ws.StatusInternalServerError, "internal error", "panic"}
	closeWriterPanic  = closeCause{0, "", "panic"}
	closeTokenExpired = endedCause(ReasonTokenExpired)
)

// labelEnded is the metric label of a session the server ended for a reason it names (see
// endSession): a ban, a kick, a revocation, a suspension or the token's expiry.
const labelEnded = "ended"

// endedCause is the close of a session ended for reason: 1008 with the reason as text.
func endedCause(reason string) closeCause {
	return closeCause{code: ws.StatusPolicyViolation, reason: reason, label: labelEnded}
}

// session is one connection. The reader goroutine (run) owns the fields below "reader state";
// a writer goroutine owns the socket's write side while it runs; anyone may call send and kill.
//
// Frames wait in a slice, not in a buffered channel, and the writer goroutine runs only while
// there is something to write: an idle session holds neither a queue buffer, nor a write buffer,
// nor a writer's stack. The writer takes every queued frame at once and writes them through one
// pooled buffer, so a burst costs few system calls.
type session struct {
	g           *Gateway
	id          string
	conn        net.Conn
	br          *bufio.Reader
	remote      string
	connectedAt time.Time

	killed   chan struct{}
	killOnce sync.Once
	cause    atomic.Pointer[closeCause]
	closing  atomic.Bool // a close frame is queued
	drops    dropSet     // subscriptions the hub ended, for the reader to forget

	qmu        sync.Mutex
	queue      []outFrame    // frames no writer has taken yet, at most SendQueueSize
	spare      []outFrame    // the slice the last writer round emptied, reused by the next
	writing    bool          // a writer goroutine runs
	ended      bool          // nothing more is written: a close frame went out, a write failed or the session was killed
	wdeadline  time.Time     // the socket's write deadline; only the running writer touches it
	writerDone chan struct{} // closed when ended is set
	rawW       rawWrite      // writeNow's state; only the current writer touches it
	handled    chan bool     // handleOffStack's goroutine is done with its frame: true if it panicked

	// readiness-driven reading (poll_session.go); polled is set before the session starts
	polled   bool
	pollID   uint64
	raw      syscall.RawConn
	pstate   atomic.Int32 // pollIdle, pollReading or pollEnded
	due      atomic.Int32 // why it is closed at deadline: dueIdle, dueLogin or dueExpiry
	deadline atomic.Int64 // when an idle polled session is closed, in Unix nanoseconds

	// reader state
	ua      string
	tenant  domain.TenantID
	user    domain.UserID
	expires time.Time
	issued  time.Time // the token's issue time
	login   string    // the token's login session ("" for a token without one)
	pres    *presence.Session
	topics  smallmap.Map[string, domain.Topic]   // by name
	subTAT  time.Duration                        // the sub/leave limit's state (allowSubLeave)
	kps     *smallmap.Map[string, time.Duration] // when a kp was last relayed, by topic; nil until the first
	chanOn  bool                                 // subscribed to the user's channel ("me")

	// The per-user channel (channel.go): ch is the hub's state of it, guarded by Hub.mu;
	// presWatched is what presence was told the channel watches, guarded by chanSync.
	ch          *chanState
	chanSync    sync.Mutex
	presWatched map[string]domain.Topic
}

func newSession(g *Gateway, conn net.Conn, br *bufio.Reader, remote string) *session {
	return &session{
		g: g, id: newSessionID(), conn: conn, br: br, remote: remote, connectedAt: time.Now(),
		killed: make(chan struct{}), writerDone: make(chan struct{}),
	}
}

// send sends a text frame without ever blocking, as sendWire does: written at once when nothing
// is queued (a reply to a client that keeps up costs one system call and no writer goroutine),
// queued otherwise. A full queue means the client does not keep up: it is disconnected at once,
// and nobody else waits for it.
func (s *session) send(payload []byte) bool {
	if s.raw == nil || s.g.writeHook.Load() != nil { // a test's write hook sees replies as before
		return s.enqueue(outFrame{op: ws.OpText, payload: payload})
	}
	return s.sendWire(wireFrame(payload))
}

func (s *session) enqueue(f outFrame) bool {
	select {
	case <-s.killed:
		return false
	default:
	}
	s.qmu.Lock()
	if s.ended {
		s.qmu.Unlock()
		return false
	}
	if len(s.queue) >= s.g.cfg.SendQueueSize {
		s.qmu.Unlock()
		s.kill(closeSlow)
		return false
	}
	s.queue = append(s.queue, f)
	start := !s.writing
	s.writing = true
	s.qmu.Unlock()
	if start {
		go s.writeSafely()
	}
	return true
}

func (s *session) sendCtrl(c ctrl) { s.send(encodeCtrl(c)) }

// sendWire sends a whole frame (wireFrame) without ever blocking, as send does. When nothing is
// queued and no writer runs, it writes the frame at once on the caller's goroutine, as far as
// the socket's send buffer takes it, and starts a writer only for what is left: a delivery to a
// client that keeps up costs one system call and no goroutine.
func (s *session) sendWire(wire []byte) bool {
	if s.raw == nil {
		return s.enqueue(outFrame{op: ws.OpText, payload: wire, wire: true})
	}
	select {
	case <-s.killed:
		return false
	default:
	}
	s.qmu.Lock()
	if s.ended {
		s.qmu.Unlock()
		return false
	}
	if s.writing || len(s.queue) > 0 {
		s.qmu.Unlock()
		return s.enqueue(outFrame{op: ws.OpText, payload: wire, wire: true})
	}
	s.writing = true // this goroutine is the writer until it hands over
	s.qmu.Unlock()

	n, err := s.writeNow(wire)
	if err != nil {
		s.kill(closeWriteFailed)
	}
	s.qmu.Lock()
	if s.isKilled() {
		s.writing = false
		s.endLocked()
		s.qmu.Unlock()
		return false
	}
	if n < len(wire) {
		s.queue = append(s.queue, outFrame{})
		copy(s.queue[1:], s.queue)
		s.queue[0] = outFrame{op: ws.OpText, payload: wire[n:], wire: true}
	}
	if len(s.queue) == 0 {
		s.writing = false
		s.qmu.Unlock()
		return true
	}
	s.qmu.Unlock()
	go s.writeSafely()
	return true
}

// kill closes the socket at once, which ends the reader and any writer. The first cause is kept.
func (s *session) kill(cause closeCause) {
	s.killOnce.Do(func() {
		s.cause.CompareAndSwap(nil, &cause)
		close(s.killed)
		if s.polled {
			s.g.poll.remove(s) // before the descriptor can be reused
		}
		_ = s.conn.Close()
		s.qmu.Lock()
		if !s.writing {
			s.endLocked() // a running writer ends itself when its write fails or it looks again
		}
		s.qmu.Unlock()
		if s.polled {
			s.endIfIdle(cause) // nobody reads an idle polled socket: its close would go unnoticed
		}
	})
}

// endLocked stops all writing and tells finish; s.qmu is held.
func (s *session) endLocked() {
	if s.ended {
		return
	}
	s.ended = true
	s.queue, s.spare = nil, nil
	close(s.writerDone)
}

// closeWith queues a close frame after whatever is queued; the writer stops after writing it. A
// session ended for a reason (endedCause) first gets a ctrl without id naming it.
func (s *session) closeWith(cause closeCause) {
	if !s.closing.CompareAndSwap(false, true) {
		return
	}
	s.cause.CompareAndSwap(nil, &cause)
	if cause.label == labelEnded {
		s.lastWord(cause.reason)
	}
	if cause.code == 0 {
		s.kill(cause)
		return
	}
	s.enqueue(outFrame{op: ws.OpClose, payload: ws.NewCloseFrameBody(cause.code, cause.reason)})
}

// goAway starts a server-side close (shutdown) and kills the connection if the client has not
// finished closing within CloseGrace.
func (s *session) goAway() {
	s.closeWith(closeGoingAway)
	time.AfterFunc(s.g.cfg.CloseGrace+s.g.cfg.WriteTimeout, func() { s.kill(closeGoingAway) })
}

// run serves the connection until it ends, then cleans up. A panic anywhere in it is recovered
// (see safely): the connection closes with 1011 and the node and its other sessions go on.
func (s *session) run(ctx context.Context) {
	cause := closeInternal
	s.safely(ctx, func() { cause = s.readLoop(ctx) })
	s.closeWith(cause)
	s.safely(ctx, func() { s.finish(ctx) })
	s.kill(closeGone)
	s.safely(ctx, func() { s.cleanup(ctx) })
}

// safely runs fn and recovers a panic in it: the panic is logged with its stack and counted
// (imledger_panics_total{component="ws"}) and the connection is closed with 1011 (internal
// error). It reports whether fn panicked.
func (s *session) safely(ctx context.Context, fn func()) (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			s.g.panics.Recovered(ctx, s.g.log, "ws", v, "tenant_id", s.tenant.String(), "session", s.id, "remote", s.remote)
			s.closeWith(closeInternal)
		}
	}()
	fn()
	return false
}

// finish waits for the writer to send the close frame, gives the client CloseGrace to answer it
// (so unread input does not turn the close into a reset), closes the socket and counts the
// disconnect. run cleans up after it.
func (s *session) finish(ctx context.Context) {
	select {
	case <-s.writerDone:
	case <-time.After(s.g.cfg.WriteTimeout + time.Second):
		s.kill(closeWriteFailed)
		<-s.writerDone
	}
	select {
	case <-s.killed:
	default:
		_ = s.conn.SetReadDeadline(time.Now().Add(s.g.cfg.CloseGrace))
		if s.br != nil {
			_, _ = io.Copy(io.Discard, s.br)
		} else {
			_, _ = io.Copy(io.Discard, s.conn)
		}
	}
	s.kill(closeGone)
	if c := s.cause.Load(); c != nil {
		s.g.metrics.disconnects.WithLabelValues(c.label).Inc()
		s.g.log.DebugContext(ctx, "ws: connection closed", "cause", c.label, "tenant_id", s.tenant.String(),
			"session", s.id, "remote", s.remote, "duration", time.Since(s.connectedAt).Round(time.Millisecond))
	}
}

// readLoop reads client messages until the connection ends and returns how it should close.
func (s *session) readLoop(ctx context.Context) closeCause {
	rd := s.frameReader(ctx, s.br)
	for {
		if cause, ok := s.readFrame(ctx, rd, true); !ok {
			return cause
		}
	}
}

// readFrame reads one client message (or control frame) and handles it; ok false: the
// connection ends with cause. offStack handles a message on a goroutine of its own (see
// handleOffStack), for a reader that lives as long as the connection.
func (s *session) readFrame(ctx context.Context, rd *wsutil.Reader, offStack bool) (cause closeCause, ok bool) {
	_ = s.conn.SetReadDeadline(s.readDeadline())
	hdr, err := rd.NextFrame()
	if err != nil {
		return s.readError(err), false
	}
	if hdr.OpCode.IsControl() {
		if err := s.control(ctx, hdr, rd); err != nil {
			return s.readError(err), false
		}
		return closeCause{}, true
	}
	if hdr.OpCode == ws.OpBinary {
		// Every message is one JSON object, text: binary data is refused as RFC 6455 §7.4.1
		// says, with 1003, not read as JSON past the UTF-8 check of text frames.
		return closeBinary, false
	}
	payload, err := io.ReadAll(rd)
	if err != nil {
		return s.readError(err), false
	}
	if s.tokenExpired(time.Now()) {
		return closeTokenExpired, false
	}
	s.touch(ctx)
	if offStack {
		if s.handleOffStack(ctx, payload) {
			return closeInternal, false
		}
	} else if s.safely(ctx, func() { s.handle(ctx, payload) }) {
		return closeInternal, false
	}
	return closeCause{}, true
}

// handleOffStack handles a frame on a goroutine of its own and waits for it. Frames are still
// handled one at a time and in order; what changes is whose stack their work grows. Decoding,
// the token check and the Redis and PostgreSQL calls of a login or sub need several KiB of
// stack, which a goroutine keeps once grown: on the reader, which lives as long as the
// connection, an idle connection would hold that stack for hours. The handling goroutine ends
// with its frame and its stack goes back to the runtime. A panic while handling the frame is
// recovered on that goroutine (safely); handleOffStack then reports true and the reader ends
// the connection with 1011.
func (s *session) handleOffStack(ctx context.Context, payload []byte) (panicked bool) {
	if s.handled == nil {
		s.handled = make(chan bool)
	}
	go func() {
		s.handled <- s.safely(ctx, func() { s.handle(ctx, payload) })
	}()
	return <-s.handled
}

// readDeadline is the idle deadline, or the login deadline while not logged in, or the
// token's expiry when that comes first.
func (s *session) readDeadline() time.Time {
	d, _ := s.nextDeadline()
	return d
}

// Why a session's deadline (nextDeadline) ends it.
const (
	dueIdle   int32 = iota // no frame for IdleTimeout
	dueLogin               // no login within LoginTimeout
	dueExpiry              // the token expired
)

// nextDeadline is when the session ends if no frame comes, and why: the idle deadline, the login
// deadline while not logged in, the token's expiry once logged in, whichever comes first.
func (s *session) nextDeadline() (time.Time, int32) {
	d, why := time.Now().Add(s.g.cfg.IdleTimeout), dueIdle
	switch {
	case s.user == 0:
		if login := s.connectedAt.Add(s.g.cfg.LoginTimeout); login.Before(d) {
			d, why = login, dueLogin
		}
	case s.expires.Before(d):
		d, why = s.expires, dueExpiry
	}
	return d, why
}

// tokenExpired reports whether the session logged in with a token that has expired at now: such a
// session ends (closeTokenExpired), whatever it is doing.
func (s *session) tokenExpired(now time.Time) bool {
	return s.user != 0 && !now.Before(s.expires)
}

// clientClosed is the client's close frame, as an error that ends the read loop.
type clientClosed struct{ payload []byte }

func (clientClosed) Error() string { return "client closed" }

// answer is how the server answers the close frame (RFC 6455 §5.5.1, §7.4): a frame without a
// body with 1000, a valid code by echoing it, and a body that is malformed (one byte), carries a
// code no endpoint may send (below 1000, 1004-1006, 1015, 1016-2999 unassigned, 5000 and up) with
// 1002 protocol error, or a reason that is not UTF-8 with 1007.
func (c clientClosed) answer() closeCause {
	if len(c.payload) == 0 {
		return closeClient
	}
	if len(c.payload) == 1 {
		return closeProtocol
	}
	code, reason := ws.ParseCloseFrameData(c.payload)
	if !validCloseCode(code) {
		return closeProtocol
	}
	if !utf8.ValidString(reason) {
		return closeBadUTF8
	}
	cause := closeClient
	cause.code = code
	return cause
}

// validCloseCode reports whether a close frame may carry code: 1000-1003 and 1007-1011 (RFC
// 6455 §7.4.1), 1012-1014 (registered with IANA since), and 3000-4999 (libraries, frameworks and
// applications).
func validCloseCode(code ws.StatusCode) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// control answers a control frame: pong to ping, the close handshake to close.
func (s *session) control(ctx context.Context, h ws.Header, r io.Reader) error {
	payload, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	switch h.OpCode {
	case ws.OpPing:
		s.touch(ctx)
		s.enqueue(outFrame{op: ws.OpPong, payload: payload})
	case ws.OpClose:
		return clientClosed{payload: payload}
	}
	return nil
}

// readError turns a read failure into the way the connection closes.
func (s *session) readError(err error) closeCause {
	var (
		cc clientClosed
		ne net.Error
		pe ws.ProtocolError
	)
	switch {
	case errors.As(err, &cc):
		return cc.answer()
	case errors.Is(err, wsutil.ErrFrameTooLarge), errors.Is(err, wsutil.ErrMessageTooLarge):
		s.g.metrics.refused.WithLabelValues(ReasonFrameTooLarge).Inc()
		s.sendCtrl(errCtrl("", http.StatusRequestEntityTooLarge, ReasonFrameTooLarge, "frame too large"))
		return closeTooLarge
	case errors.Is(err, wsutil.ErrInvalidUTF8):
		return closeBadUTF8
	case errors.As(err, &pe), errors.Is(err, ws.ErrHeaderLengthMSB), errors.Is(err, ws.ErrHeaderLengthUnexpected):
		return closeProtocol // a length with its top bit set is a protocol error too (RFC 6455 §5.2)
	case errors.As(err, &ne) && ne.Timeout():
		if s.user == 0 && !time.Now().Before(s.connectedAt.Add(s.g.cfg.LoginTimeout)) {
			return closeLoginTimeout
		}
		if s.tokenExpired(time.Now()) {
			return closeTokenExpired
		}
		return closeIdle
	}
	return closeGone
}

// writeSafely runs the writer goroutine and recovers a panic in it: the panic is logged and
// counted, the socket is closed at once (the writer that would send a close frame is the one that
// failed) and the writer state is reset so nothing waits for it.
func (s *session) writeSafely() {
	defer func() {
		if v := recover(); v != nil {
			s.g.panics.Recovered(s.g.life, s.g.log, "ws", v, "tenant_id", s.tenant.String(), "session", s.id, "remote", s.remote, "in", "writer")
			s.kill(closeWriterPanic)
			s.qmu.Lock()
			s.writing = false
			s.endLocked()
			s.qmu.Unlock()
		}
	}()
	s.write()
}

// write is the writer goroutine: it writes queued frames until the queue is empty, a close frame
// is written, a write fails or the session is killed. enqueue starts it when it is not running.
func (s *session) write() {
	for {
		s.qmu.Lock()
		if s.isKilled() {
			s.writing = false
			s.endLocked()
			s.qmu.Unlock()
			return
		}
		if len(s.queue) == 0 {
			s.writing = false
			s.queue, s.spare = nil, nil // an idle session holds no queue
			s.qmu.Unlock()
			return
		}
		batch := s.queue
		s.queue, s.spare = s.spare[:0], nil
		s.qmu.Unlock()

		done := s.writeBatch(batch)
		clear(batch) // the payloads are shared with other sessions: do not pin them

		s.qmu.Lock()
		if done {
			s.writing = false
			s.endLocked()
			s.qmu.Unlock()
			return
		}
		if cap(batch) <= maxKeptBatch {
			s.spare = batch // a burst's larger slice goes; the next round starts small
		}
		s.qmu.Unlock()
	}
}

func (s *session) isKilled() bool {
	select {
	case <-s.killed:
		return true
	default:
		return false
	}
}

// maxKeptBatch is the largest emptied queue slice kept for the next round.
const maxKeptBatch = 64

// writerPool holds the buffers writers borrow for one round.
var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufferSize) }}

// writeBufferSize is the buffer a writer fills before a system call: a few dozen typical frames.
const writeBufferSize = 16 << 10

// writeBatch writes frames and flushes them. It reports whether the writer is done: a close
// frame was written (frames after it are dropped) or a write failed (the session is killed).
func (s *session) writeBatch(frames []outFrame) (done bool) {
	if hook := s.g.writeHook.Load(); hook != nil {
		(*hook)()
	}
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(s.conn)
	defer func() {
		bw.Reset(nil)
		writerPool.Put(bw)
	}()
	for i, f := range frames {
		if i%32 == 0 {
			s.extendWriteDeadline()
		}
		var err error
		if f.wire {
			_, err = bw.Write(f.payload)
		} else {
			err = ws.WriteFrame(bw, ws.NewFrame(f.op, true, f.payload))
		}
		if err != nil {
			s.kill(closeWriteFailed)
			return true
		}
		if f.op == ws.OpClose {
			_ = bw.Flush()
			return true
		}
	}
	if err := bw.Flush(); err != nil {
		s.kill(closeWriteFailed)
		return true
	}
	return false
}

// extendWriteDeadline makes sure the next write has at least half of WriteTimeout left before
// the socket's write deadline. Moving the deadline costs a timer update, so one deadline serves
// every write for half of WriteTimeout: a write blocked for between WriteTimeout/2 and
// WriteTimeout fails.
func (s *session) extendWriteDeadline() {
	now := time.Now()
	if now.Add(s.g.cfg.WriteTimeout / 2).Before(s.wdeadline) {
		return
	}
	s.wdeadline = now.Add(s.g.cfg.WriteTimeout)
	_ = s.conn.SetWriteDeadline(s.wdeadline)
}

// touch refreshes the session's presence; every inbound frame calls it (Touch is rate-limited).
func (s *session) touch(ctx context.Context) {
	if s.pres == nil {
		return
	}
	if err := s.pres.Touch(ctx); err != nil {
		s.g.log.DebugContext(ctx, "ws: presence refresh failed", "tenant_id", s.tenant.String(), "err", err)
	}
}

// cleanup removes the session from the hub and presence, and tells the topics it left.
func (s *session) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.g.cfg.RequestTimeout)
	defer cancel()
	s.forgetDrops()
	if s.chanOn {
		s.g.deps.Hub.channelOff(s) // presence forgets it at the logout
		s.chanOn = false
	}
	if s.user != 0 {
		s.g.deps.Hub.removeUser(s, s.tenant, s.user)
	}
	left := make([]domain.Topic, 0, s.topics.Len())
	for _, t := range s.topics.All() {
		s.g.deps.Hub.leave(hubKey{s.tenant, t.String()}, s)
		left = append(left, t)
	}
	s.topics = smallmap.Map[string, domain.Topic]{}
	if s.user != 0 && s.g.deps.Sessions != nil {
		reason := "closed"
		if c := s.cause.Load(); c != nil {
			reason = c.label
		}
		if err := s.g.deps.Sessions.Closed(ctx, s.tenant, s.user, s.id, reason); err != nil {
			s.g.log.WarnContext(ctx, "ws: session event not recorded", "tenant_id", s.tenant.String(), "err", err)
		}
	}
	if s.pres != nil {
		if err := s.pres.Logout(ctx); err != nil {
			s.g.log.WarnContext(ctx, "ws: presence logout failed", "tenant_id", s.tenant.String(), "err", err)
		}
	}
	s.publishOff(ctx, left) // after the logout, so the last of two sessions closing at once sees the other gone
}
