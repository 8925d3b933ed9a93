package ws

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"
)

// Frames written at once by the delivering goroutine and frames left to the writer (a socket
// buffer that takes only part of a frame) reach the client whole and in order.
func TestSendWireKeepsOrderAcrossPartialWrites(t *testing.T) {
	t.Parallel()
	cfg := Config{SendQueueSize: 4096}
	cfg.setDefaults()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{cfg: cfg, metrics: m, log: slog.New(slog.DiscardHandler), sessions: map[*session]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = sc.(*net.TCPConn).SetWriteBuffer(4096)
	_ = cc.(*net.TCPConn).SetReadBuffer(4096)
	s := newSession(g, sc, nil, "test")
	s.raw, _ = sc.(syscall.Conn).SyscallConn()
	defer s.kill(closeGone)

	var want bytes.Buffer
	for i := range 800 { // far more than the socket buffers hold while nobody reads
		w := wireFrame(fmt.Appendf(nil, `{"data":{"seq":"%d","content":"%0200d"}}`, i, i))
		want.Write(w)
		if !s.sendWire(w) {
			t.Fatalf("frame %d refused", i)
		}
	}
	s.qmu.Lock()
	queued := len(s.queue) > 0 || s.writing
	s.qmu.Unlock()
	if !queued {
		t.Error("every frame was written at once: the socket buffer never filled, so the partial path went untested")
	}
	_ = cc.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(cc, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		i := 0
		for i < len(got) && got[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("the stream differs from the frames sent at byte %d of %d", i, want.Len())
	}
}

// A reply to a client that keeps up (a pong, an ack) is written by the goroutine that handles
// the client's frame, in one system call: no writer goroutine starts for it, so none moves the
// socket's write deadline.
func TestRepliesAreWrittenAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, cc := loopbackSession(t, testGateway(t), ln, true)
	defer cc.Close()
	defer s.kill(closeGone)

	var want bytes.Buffer
	for i := range 3 {
		p := fmt.Appendf(nil, `{"ctrl":{"id":"%d","code":200,"text":"pong"}}`, i)
		want.Write(wireFrame(p))
		if !s.send(p) {
			t.Fatalf("reply %d refused", i)
		}
	}
	_ = cc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(cc, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("client read %q, want %q", got, want.Bytes())
	}
	s.qmu.Lock()
	writer := s.writing || !s.wdeadline.IsZero()
	s.qmu.Unlock()
	if writer {
		t.Fatal("a writer goroutine wrote the replies (it set the write deadline), want them written at once")
	}
}
