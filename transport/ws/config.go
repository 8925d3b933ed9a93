package ws

import (
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// Config configures a Gateway. The zero value is usable.
type Config struct {
	// MaxFrameSize bounds one client message (all its fragments), in bytes. A larger one is
	// answered with ctrl 413 frame_too_large and a close 1009. Default 64 KiB.
	MaxFrameSize int64 `koanf:"max_frame_size"`
	// MaxContentBytes bounds a pub's content. Default domain.DefaultMaxContentBytes.
	MaxContentBytes int `koanf:"max_content_bytes"`
	// SendQueueSize bounds each session's outbound queue: the frames waiting for the session's
	// writer, besides the ones it is writing. A session whose queue is full when a frame is due is
	// disconnected: nobody waits for a slow client. The queue takes memory only while it holds
	// frames. Default 256.
	SendQueueSize int `koanf:"send_queue_size"`
	// SocketSendBuffer sets SO_SNDBUF of each connection in bytes; 0 keeps the OS default, which
	// on Linux grows to megabytes. A small buffer bounds the memory a stuck client pins in the
	// kernel and gets it disconnected sooner (its send queue fills instead).
	SocketSendBuffer int `koanf:"socket_send_buffer"`
	// ReadBufferSize is the read buffer of a connection, in bytes, while it reads; a frame
	// larger than the buffer is read straight into the message. On Linux a connection takes it
	// from a pool when its socket becomes readable and gives it back when nothing is left to
	// read; with BlockingReads (and elsewhere) every connection holds it for its whole life.
	// Default 1024.
	ReadBufferSize int `koanf:"read_buffer_size"`
	// BlockingReads gives every connection a reader goroutine of its own, blocked in a read
	// while the client is quiet, instead of readiness notification (epoll) from one goroutine
	// for the gateway. An idle connection then costs a goroutine and a read buffer more.
	// Default false; readiness notification is used only on Linux.
	BlockingReads bool `koanf:"blocking_reads"`
	// WriteTimeout bounds one write to a client: a write blocked for longer (at least half of it,
	// at most all of it) fails and the client is disconnected. Default 10 s.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// IdleTimeout closes a connection that sent no frame (a ping counts) for this long. Clients
	// should ping at least every IdleTimeout/2. Default 60 s.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// LoginTimeout closes a connection that has not logged in this long after connecting.
	// Default 30 s.
	LoginTimeout time.Duration `koanf:"login_timeout"`
	// RequestTimeout bounds the work of one client frame (a send, a history page). Default 10 s.
	RequestTimeout time.Duration `koanf:"request_timeout"`
	// CloseGrace is how long a closing connection waits for the client's close frame before the
	// socket is closed. Default 1 s.
	CloseGrace time.Duration `koanf:"close_grace"`
	// HandshakeTimeout bounds writing the upgrade response. Default 5 s.
	HandshakeTimeout time.Duration `koanf:"handshake_timeout"`
	// AllowedOrigins lists the browser origins allowed to connect, as "https://app.example.com"
	// or "https://*.example.com"; "*" allows any. Empty means the page's own host only: the
	// Origin's host must equal the request's Host. A request without an Origin header (a
	// non-browser client) is always allowed; it needs a token anyway.
	AllowedOrigins []string `koanf:"allowed_origins"`
	// MaxConnections bounds the open connections of the gateway; an upgrade beyond it is refused
	// with 503 and Retry-After, so a node at capacity turns clients away instead of running out
	// of file descriptors, which would also cost it its database, Redis and Kafka connections.
	// Default: the process's open-file limit less ReservedFiles (no limit when that limit is
	// unlimited or unknown); negative: no limit.
	MaxConnections int `koanf:"max_connections"`
	// MaxTopicsPerSession bounds the topics one connection may subscribe to. Default 1000.
	MaxTopicsPerSession int `koanf:"max_topics_per_session"`
	// SubRate bounds the subs and leaves of one connection that change its subscriptions, per
	// second on average, with bursts of SubBurst: each announces presence (a pres frame) to the
	// topic's other sessions, so a client flapping sub and leave would flood them until they are
	// dropped as slow consumers. A sub or leave over it is answered 429 rate_limited (limit
	// ws_sub_leave, retry_after_ms) and changes nothing. Default 20; negative: no limit.
	SubRate float64 `koanf:"sub_rate"`
	// SubBurst is how many subs and leaves a connection may make at once before SubRate applies
	// (a client subscribing to its topics after connecting). Default 100.
	SubBurst int `koanf:"sub_burst"`
	// TypingInterval is the least time between two typing notes (kp) of one connection relayed
	// for one topic; a kp sooner than that after the last one relayed is dropped silently, so one
	// client cannot flood a topic's sessions with info frames. Default 1 s; negative: every kp
	// is relayed.
	TypingInterval time.Duration `koanf:"typing_interval"`
	// HistoryDefaultLimit is a get's page size when it names none. Default 50.
	HistoryDefaultLimit int `koanf:"history_default_limit"`
	// HistoryMaxLimit caps a get's page size; it must leave room in the send queue. Default 100.
	HistoryMaxLimit int `koanf:"history_max_limit"`
}

func (c *Config) setDefaults() {
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = 64 << 10
	}
	if c.MaxContentBytes == 0 {
		c.MaxContentBytes = domain.DefaultMaxContentBytes
	}
	if c.SendQueueSize == 0 {
		c.SendQueueSize = 256
	}
	if c.ReadBufferSize == 0 {
		c.ReadBufferSize = 1024
	}
	setDuration(&c.WriteTimeout, 10*time.Second)
	setDuration(&c.IdleTimeout, 60*time.Second)
	setDuration(&c.LoginTimeout, 30*time.Second)
	setDuration(&c.RequestTimeout, 10*time.Second)
	setDuration(&c.CloseGrace, time.Second)
	setDuration(&c.HandshakeTimeout, 5*time.Second)
	if c.MaxConnections == 0 {
		c.MaxConnections = defaultMaxConnections()
	}
	if c.MaxTopicsPerSession == 0 {
		c.MaxTopicsPerSession = 1000
	}
	if c.SubRate == 0 {
		c.SubRate = 20
	}
	if c.SubBurst == 0 {
		c.SubBurst = 100
	}
	setDuration(&c.TypingInterval, time.Second)
	if c.HistoryDefaultLimit == 0 {
		c.HistoryDefaultLimit = 50
	}
	if c.HistoryMaxLimit == 0 {
		c.HistoryMaxLimit = 100
	}
}

// ReservedFiles is what the default MaxConnections leaves of the open-file limit for the
// node's own sockets and files: its pools, the Kafka clients and the embedded broker.
const ReservedFiles = 1024

// defaultMaxConnections is the open-file limit less ReservedFiles, at least 1; -1 (no limit)
// when the limit is unlimited or cannot be read.
func defaultMaxConnections() int {
	n, ok := openFileLimit()
	if !ok {
		return -1
	}
	return max(n-ReservedFiles, 1)
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Validate reports every invalid field at once, with defaults applied.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.MaxFrameSize < 1024 {
		errs = append(errs, fmt.Errorf("ws: max_frame_size %d: want at least 1024", c.MaxFrameSize))
	}
	if c.MaxContentBytes <= 0 {
		errs = append(errs, errors.New("ws: max_content_bytes must be positive"))
	}
	if c.SendQueueSize < 8 {
		errs = append(errs, errors.New("ws: send_queue_size must be at least 8"))
	}
	for name, d := range map[string]time.Duration{"write_timeout": c.WriteTimeout, "idle_timeout": c.IdleTimeout,
		"login_timeout": c.LoginTimeout, "request_timeout": c.RequestTimeout, "close_grace": c.CloseGrace,
		"handshake_timeout": c.HandshakeTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("ws: %s must be positive", name))
		}
	}
	if c.SocketSendBuffer < 0 {
		errs = append(errs, errors.New("ws: socket_send_buffer must not be negative"))
	}
	if c.ReadBufferSize < 64 {
		errs = append(errs, errors.New("ws: read_buffer_size must be at least 64"))
	}
	if c.MaxTopicsPerSession <= 0 {
		errs = append(errs, errors.New("ws: max_topics_per_session must be positive"))
	}
	if c.SubRate > 0 && c.SubRate < 0.01 {
		errs = append(errs, errors.New("ws: sub_rate must be at least 0.01 a second, or negative for no limit"))
	}
	if c.SubBurst < 1 {
		errs = append(errs, errors.New("ws: sub_burst must be positive"))
	}
	if c.HistoryDefaultLimit <= 0 || c.HistoryDefaultLimit > c.HistoryMaxLimit {
		errs = append(errs, errors.New("ws: history_default_limit must be in [1, history_max_limit]"))
	}
	if c.HistoryMaxLimit+2 > c.SendQueueSize {
		errs = append(errs, errors.New("ws: history_max_limit must leave room in send_queue_size (at most send_queue_size-2)"))
	}
	return errors.Join(errs...)
}
