package ws

import (
	"bufio"
	"context"
	"io"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// A polled session (the default on Linux) has no goroutine of its own while its client is
// quiet: the gateway's poller starts a reading round when the socket becomes readable, the
// round reads and handles every frame that is there with a read buffer taken from a pool,
// gives the buffer back and re-arms the socket. Its idle and login deadlines are checked by the
// gateway's one sweeper, not by a timer per connection. Rounds of one session never overlap,
// and the state below hands the reader state (user, topics, ...) from one round to the next.
const (
	pollOff     int32 = iota // not started: readiness is ignored
	pollIdle                 // armed, waiting for the client
	pollReading              // a round runs
	pollEnded                // the session is closing; readiness is ignored
)

// startPolled starts a registered, tracked session: at once when the client's first frames came
// with the handshake, else when its socket becomes readable.
func (s *session) startPolled() {
	s.storeDeadline()
	if s.br != nil { // the handshake's reader holds frames
		s.pstate.Store(pollReading)
		s.g.rounds.run(s.round)
		return
	}
	s.pstate.Store(pollIdle)
	if s.isKilled() || s.g.poll.arm(s) != nil {
		s.endIfIdle(closeGone)
	}
}

// readable is the poller's call: the socket has something to read, or the peer closed it.
func (s *session) readable() {
	if s.pstate.CompareAndSwap(pollIdle, pollReading) {
		s.g.rounds.run(s.round)
	}
}

// round reads and handles the frames the client sent, until none is left in the buffer (a
// frame that arrived in part is waited for, up to the idle deadline), then re-arms the socket.
// A frame that ends the connection ends it on this goroutine.
func (s *session) round() {
	ctx := s.g.life
	br, pooled := s.br, false
	if br == nil {
		br, pooled = s.g.readers.Get().(*bufio.Reader), true
		br.Reset(s.conn)
	}
	s.br = nil // the handshake's reader serves the first round only
	var (
		cause = closeInternal
		ok    bool
	)
	s.safely(ctx, func() { cause, ok = s.readRound(ctx, br) })
	if pooled {
		br.Reset(nil)
		s.g.readers.Put(br)
	}
	if !ok {
		s.pstate.Store(pollEnded)
		s.end(cause)
		return
	}
	_ = s.conn.SetReadDeadline(time.Time{}) // no runtime timer stays behind for an idle socket
	s.storeDeadline()
	s.pstate.Store(pollIdle)
	if s.isKilled() || s.g.poll.arm(s) != nil {
		s.endIfIdle(closeGone)
	}
}

// readRound handles frames while br holds bytes; ok false: the connection ends with cause.
func (s *session) readRound(ctx context.Context, br *bufio.Reader) (cause closeCause, ok bool) {
	rd := s.frameReader(ctx, br)
	for {
		if cause, ok := s.readFrame(ctx, rd, false); !ok {
			return cause, false
		}
		if br.Buffered() == 0 {
			return closeCause{}, true
		}
	}
}

// storeDeadline sets when the sweeper closes the session if no frame comes, and why (see
// nextDeadline). Only the goroutine that owns the reader state calls it.
func (s *session) storeDeadline() {
	d, why := s.nextDeadline()
	s.due.Store(why)
	s.deadline.Store(d.UnixNano())
}

// endIfIdle ends a session that waits for its client; a running round ends it itself.
func (s *session) endIfIdle(cause closeCause) {
	if s.pstate.CompareAndSwap(pollIdle, pollEnded) {
		go s.end(cause)
	}
}

// end is a polled session's last act: what run does after its read loop, then what the
// gateway does after run.
func (s *session) end(cause closeCause) {
	ctx := s.g.life
	s.closeWith(cause)
	s.safely(ctx, func() { s.finish(ctx) })
	s.kill(closeGone)
	s.safely(ctx, func() { s.cleanup(ctx) })
	s.g.untrack(s)
	s.g.wg.Done()
}

// sweep closes polled sessions whose idle or login deadline passed or whose token expired, every
// interval, until stop is closed: one ticker for the gateway instead of a timer per connection.
func (g *Gateway) sweep(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var due []*session
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			due = g.expired(now.UnixNano(), due[:0])
			for i, s := range due {
				cause := closeIdle
				switch s.due.Load() {
				case dueLogin:
					cause = closeLoginTimeout
				case dueExpiry:
					cause = closeTokenExpired
				}
				s.endIfIdle(cause)
				due[i] = nil
			}
		}
	}
}

// expired appends the idle polled sessions whose deadline is before now to due.
func (g *Gateway) expired(now int64, due []*session) []*session {
	g.mu.Lock()
	defer g.mu.Unlock()
	for s := range g.sessions {
		if s.polled && s.pstate.Load() == pollIdle && now >= s.deadline.Load() {
			due = append(due, s)
		}
	}
	return due
}

// sweepInterval is how often the sweeper looks: an eighth of the shorter deadline, between
// 5 ms and 1 s, so a deadline is kept within about that much.
func sweepInterval(c Config) time.Duration {
	return min(max(min(c.IdleTimeout, c.LoginTimeout)/8, 5*time.Millisecond), time.Second)
}

// frameReader reads client frames from src.
func (s *session) frameReader(ctx context.Context, src *bufio.Reader) *wsutil.Reader {
	max := s.g.cfg.MaxFrameSize
	rd := &wsutil.Reader{Source: src, State: ws.StateServerSide, CheckUTF8: true, MaxFrameSize: max, MaxMessageSize: max}
	rd.OnIntermediate = func(h ws.Header, r io.Reader) error { return s.control(ctx, h, r) }
	return rd
}
