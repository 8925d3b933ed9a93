//go:build linux

package ws

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// poller tells idle sessions when their socket becomes readable, from one epoll instance and
// one goroutine for the whole gateway, so an idle connection holds no goroutine (and no grown
// stack) and no read buffer while it waits.
//
// Each socket is registered one-shot: after an event, nothing more is reported for it until
// the session re-arms it, so one session never has two reading rounds at once. The socket
// stays owned by the net package, which keeps reading it through its own poller; epoll only
// says when there is something to read. A registration names the session by a number, never
// by the descriptor, so a descriptor closed and reused by a new connection cannot wake the
// wrong session.
type poller struct {
	epfd   int
	wakefd int // an eventfd that ends wait

	mu       sync.Mutex
	sessions map[uint64]*session
	next     uint64
	closed   bool
	done     chan struct{}
}

// wakeID is the registration number of the poller's own eventfd.
const wakeID = 0

// newPoller starts the poller's goroutine. It fails where epoll is not available.
func newPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("ws: epoll: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("ws: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	setEventID(&ev, wakeID)
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		_ = unix.Close(wakefd)
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("ws: epoll add: %w", err)
	}
	p := &poller{epfd: epfd, wakefd: wakefd, sessions: map[uint64]*session{}, next: wakeID, done: make(chan struct{})}
	go p.wait()
	return p, nil
}

func setEventID(ev *unix.EpollEvent, id uint64) {
	ev.Fd = int32(uint32(id))
	ev.Pad = int32(uint32(id >> 32))
}

func eventID(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// errPollerClosed is add's answer once close has begun.
var errPollerClosed = errors.New("ws: poller closed")

// add registers s's socket, armed: the first readiness starts a reading round. It sets
// s.pollID and s.raw before the socket can be reported.
func (p *poller) add(s *session, conn net.Conn) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("ws: poller: %T has no file descriptor", conn)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return fmt.Errorf("ws: poller: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errPollerClosed
	}
	p.next++
	id := p.next
	s.pollID, s.raw = id, rc
	p.sessions[id] = s
	p.mu.Unlock()
	var ctlErr error
	err = rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT}
		setEventID(&ev, id)
		ctlErr = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err = errors.Join(err, ctlErr); err != nil {
		p.forget(id)
		return fmt.Errorf("ws: poller add: %w", err)
	}
	return nil
}

// arm asks for the next readiness of s's socket. Readiness is level-triggered: data that
// arrived since the last round is reported at once. It fails once the socket is closed; the
// descriptor is used only while the net package guarantees it is still this socket's.
func (p *poller) arm(s *session) error {
	var ctlErr error
	err := s.raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT}
		setEventID(&ev, s.pollID)
		ctlErr = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, int(fd), &ev)
	})
	if err = errors.Join(err, ctlErr); err != nil {
		return fmt.Errorf("ws: poller arm: %w", err)
	}
	return nil
}

// remove forgets s's registration; call it before the socket is closed. (A closed descriptor
// leaves epoll on its own; removing it first keeps a reused descriptor number from ever
// meaning this session.)
func (p *poller) remove(s *session) {
	p.forget(s.pollID)
	_ = s.raw.Control(func(fd uintptr) {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
}

func (p *poller) forget(id uint64) {
	p.mu.Lock()
	delete(p.sessions, id)
	p.mu.Unlock()
}

// wait is the poller's goroutine: it starts a reading round for every session whose socket
// became readable (or was closed by the peer) until close.
func (p *poller) wait() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		for i := range n {
			id := eventID(&events[i])
			if id == wakeID {
				return
			}
			p.mu.Lock()
			s := p.sessions[id]
			p.mu.Unlock()
			if s != nil {
				s.readable()
			}
		}
	}
}

// close stops the poller's goroutine and releases its descriptors. Sessions still registered
// are not woken again.
func (p *poller) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(p.wakefd, one[:])
	<-p.done
	_ = unix.Close(p.wakefd)
	_ = unix.Close(p.epfd)
}
