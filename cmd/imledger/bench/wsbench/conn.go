package wsbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gobwas/ws"
)

// wsConn is the client side of one WebSocket connection, kept lean: it runs next to the server
// it loads. Frames are read into a reused buffer; writes are masked and written whole, one
// at a time. Read from one goroutine; Write and Close from any.
type wsConn struct {
	conn net.Conn
	br   *bufio.Reader

	hdr  [ws.MaxHeaderSize - 2]byte // header scratch of the reader
	msg  []byte                     // the message being read
	ctrl []byte                     // a control frame's payload

	wmu       sync.Mutex
	wb        bytes.Buffer // under wmu
	closeSent bool         // under wmu
}

// maxMessage bounds a server message the client accepts.
const maxMessage = 4 << 20

// errClosed is returned by ReadMessage once the server closed the connection.
var errClosed = errors.New("wsbench: connection closed by the server")

// dial connects and upgrades, bounded by ctx.
func dial(ctx context.Context, url string) (*wsConn, error) {
	conn, br, _, err := ws.Dialer{}.Dial(ctx, url)
	if err != nil {
		return nil, err
	}
	if br == nil { // nothing arrived after the handshake
		br = bufio.NewReaderSize(conn, 4<<10)
	}
	return &wsConn{conn: conn, br: br}, nil
}

// ReadMessage returns the next data message; the bytes are valid until the next call. It answers
// pings, and returns errClosed after the server's close frame.
func (c *wsConn) ReadMessage() ([]byte, error) {
	c.msg = c.msg[:0]
	for {
		h, err := ws.ReadHeaderBuffer(c.br, c.hdr[:])
		if err != nil {
			return nil, err
		}
		if h.Length > maxMessage || int64(len(c.msg))+h.Length > maxMessage {
			return nil, fmt.Errorf("wsbench: message of more than %d bytes", maxMessage)
		}
		n := int(h.Length)
		if h.OpCode.IsControl() {
			c.ctrl = grow(c.ctrl[:0], n)
			if _, err := io.ReadFull(c.br, c.ctrl); err != nil {
				return nil, err
			}
			if err := c.control(h, c.ctrl); err != nil {
				return nil, err
			}
			continue
		}
		start := len(c.msg)
		c.msg = grow(c.msg, start+n)
		if _, err := io.ReadFull(c.br, c.msg[start:]); err != nil {
			return nil, err
		}
		if h.Masked {
			ws.Cipher(c.msg[start:], h.Mask, 0)
		}
		if h.Fin {
			return c.msg, nil
		}
	}
}

func (c *wsConn) control(h ws.Header, payload []byte) error {
	if h.Masked {
		ws.Cipher(payload, h.Mask, 0)
	}
	switch h.OpCode {
	case ws.OpPing:
		return c.write(ws.OpPong, payload)
	case ws.OpClose:
		_ = c.CloseWith(payload) // echo the close, as the protocol asks, unless ours went first
		return errClosed
	}
	return nil
}

// grow returns b resized to n bytes, reusing its array when it is large enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// writeTimeout bounds one frame write.
const writeTimeout = 10 * time.Second

// WriteText writes one text message.
func (c *wsConn) WriteText(p []byte) error { return c.write(ws.OpText, p) }

func (c *wsConn) write(op ws.OpCode, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(op, p)
}

func (c *wsConn) writeLocked(op ws.OpCode, p []byte) error {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(p)), Masked: true, Mask: ws.NewMask()}
	c.wb.Reset()
	if err := ws.WriteHeader(&c.wb, h); err != nil {
		return err
	}
	start := c.wb.Len()
	c.wb.Write(p)
	ws.Cipher(c.wb.Bytes()[start:], h.Mask, 0)
	if err := c.conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	_, err := c.conn.Write(c.wb.Bytes())
	if c.wb.Cap() > 64<<10 {
		c.wb = bytes.Buffer{} // do not keep a large message's buffer
	}
	return err
}

// CloseNormal sends a normal close frame; the reader sees the server's answer as errClosed.
func (c *wsConn) CloseNormal() error {
	return c.CloseWith(ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
}

// CloseWith sends a close frame with body, once; later calls do nothing.
func (c *wsConn) CloseWith(body []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return nil
	}
	c.closeSent = true
	return c.writeLocked(ws.OpClose, body)
}

// Close closes the socket.
func (c *wsConn) Close() error { return c.conn.Close() }
