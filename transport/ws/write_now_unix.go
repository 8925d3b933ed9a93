//go:build unix

package ws

import (
	"errors"
	"syscall"
)

// rawWrite is the state of one writeNow; a session keeps one, with its method value, so a write
// allocates nothing.
type rawWrite struct {
	b   []byte
	n   int
	err error
	fn  func(fd uintptr)
}

func (w *rawWrite) write(fd uintptr) {
	for {
		w.n, w.err = syscall.Write(int(fd), w.b)
		if !errors.Is(w.err, syscall.EINTR) {
			return
		}
	}
}

// writeNow writes b to the socket without waiting: it returns how much the kernel took, which
// is less than len(b) (possibly 0) when the socket's send buffer is full. Only the session's
// current writer may call it. The descriptor is used inside RawConn.Control, so a concurrent
// Close cannot hand it to another connection meanwhile.
func (s *session) writeNow(b []byte) (int, error) {
	w := &s.rawW
	if w.fn == nil {
		w.fn = w.write
	}
	w.b = b
	err := s.raw.Control(w.fn)
	n, werr := w.n, w.err
	w.b, w.err = nil, nil
	if n < 0 {
		n = 0
	}
	if errors.Is(werr, syscall.EAGAIN) {
		werr = nil
	}
	return n, errors.Join(err, werr)
}
