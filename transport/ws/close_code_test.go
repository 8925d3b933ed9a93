package ws_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gobwas/ws"

	imws "github.com/imledger/imledger/transport/ws"
)

// closeBody is the body of a close frame with code and reason.
func closeBody(code uint16, reason string) []byte {
	b := binary.BigEndian.AppendUint16(nil, code)
	return append(b, reason...)
}

// TestClientCloseIsAnsweredPerRFC6455 sends close frames as a client may (and may not) and checks
// the server's answer: an invalid code (or a one-byte body) is answered 1002, a reason that is not
// UTF-8 1007, a valid code is echoed, an empty close is answered 1000.
func TestClientCloseIsAnsweredPerRFC6455(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	cases := []struct {
		name string
		body []byte
		want ws.StatusCode
	}{
		{"empty", nil, 1000},
		{"normal", closeBody(1000, "bye"), 1000},
		{"going away", closeBody(1001, ""), 1001},
		{"policy", closeBody(1008, "x"), 1008},
		{"try again later", closeBody(1013, ""), 1013},
		{"application", closeBody(3000, ""), 3000},
		{"private", closeBody(4999, "mine"), 4999},
		{"one byte", []byte{0x03}, 1002},
		{"zero", closeBody(0, ""), 1002},
		{"999", closeBody(999, ""), 1002},
		{"1004 reserved", closeBody(1004, ""), 1002},
		{"1005 no status", closeBody(1005, ""), 1002},
		{"1006 abnormal", closeBody(1006, ""), 1002},
		{"1015 tls", closeBody(1015, ""), 1002},
		{"1016 unassigned", closeBody(1016, ""), 1002},
		{"2999 unassigned", closeBody(2999, ""), 1002},
		{"5000", closeBody(5000, ""), 1002},
		{"65535", closeBody(65535, ""), 1002},
		{"bad utf-8 reason", closeBody(1000, "\xff\xfe"), 1007},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
			defer cancel()
			conn, _, _, err := ws.Dial(ctx, n.url())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			body := append([]byte(nil), tc.body...) // masking rewrites it
			if err := ws.WriteFrame(conn, ws.MaskFrameInPlace(ws.NewCloseFrame(body))); err != nil {
				t.Fatal(err)
			}
			for {
				//lint:ignore SA1019 the peer is this package's own server under test; its frames are small
				f, err := ws.ReadFrame(conn)
				if err != nil {
					t.Fatalf("no close frame from the server: %v", err)
				}
				if f.Header.OpCode != ws.OpClose {
					continue
				}
				if f.Header.Masked {
					f = ws.UnmaskFrameInPlace(f)
				}
				code, reason := ws.ParseCloseFrameData(f.Payload)
				if code != tc.want {
					t.Fatalf("close %x answered with %d %q, want %d", tc.body, code, reason, tc.want)
				}
				return
			}
		})
	}
}

// readCloseCode reads server frames until the close frame and returns its code; text frames
// before it are returned too.
func readCloseCode(t *testing.T, conn net.Conn) (ws.StatusCode, []string) {
	t.Helper()
	var texts []string
	for {
		//lint:ignore SA1019 the peer is this package's own server under test; its frames are small
		f, err := ws.ReadFrame(conn)
		if err != nil {
			t.Fatalf("no close frame from the server (text frames %q): %v", texts, err)
		}
		switch f.Header.OpCode {
		case ws.OpText:
			texts = append(texts, string(f.Payload))
		case ws.OpClose:
			code, _ := ws.ParseCloseFrameData(f.Payload)
			return code, texts
		}
	}
}

// TestMalformedDataIsClosedPerRFC6455: a binary message (every message is one JSON text) is
// answered with a close 1003 and never handled, also when it is not UTF-8; a frame length with its
// most significant bit set with 1002. Both read modes.
func TestMalformedDataIsClosedPerRFC6455(t *testing.T) {
	t.Parallel()
	mask := []byte{0x01, 0x02, 0x03, 0x04}
	cases := []struct {
		name  string
		frame func() []byte
		want  ws.StatusCode
	}{
		{"binary", func() []byte {
			var b bytes.Buffer
			_ = ws.WriteFrame(&b, ws.MaskFrameInPlace(ws.NewBinaryFrame([]byte("{\"ping\":{\"id\":\"a\xff\xfeb\"}}"))))
			return b.Bytes()
		}, ws.StatusUnsupportedData},
		{"binary UTF-8 JSON", func() []byte {
			var b bytes.Buffer
			_ = ws.WriteFrame(&b, ws.MaskFrameInPlace(ws.NewBinaryFrame([]byte(`{"ping":{"id":"b"}}`))))
			return b.Bytes()
		}, ws.StatusUnsupportedData},
		{"length MSB", func() []byte {
			return append([]byte{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0x05}, mask...)
		}, ws.StatusProtocolError},
	}
	for _, blocking := range []bool{false, true} {
		c := newCluster(t)
		n := c.node(t, fmt.Sprintf("node-%v", blocking), nodeOpts{cfg: imws.Config{BlockingReads: blocking}})
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s blocking=%v", tc.name, blocking), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
				defer cancel()
				conn, _, _, err := ws.Dial(ctx, n.url())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := conn.Write(tc.frame()); err != nil {
					t.Fatal(err)
				}
				code, texts := readCloseCode(t, conn)
				if code != tc.want || len(texts) != 0 {
					t.Fatalf("answered %q then close %d, want close %d only", texts, code, tc.want)
				}
			})
		}
	}
}
