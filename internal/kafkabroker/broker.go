package kafkabroker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures the embedded broker.
type Config struct {
	// Addr is the host:port the broker listens on and advertises to clients. Default
	// "127.0.0.1:9092". Port 0 picks a free port (see Broker.Addrs). Because the address is also
	// advertised in metadata, the host must be one clients can dial: 0.0.0.0, :: and an empty
	// host are rejected.
	Addr string

	// DataDir, when set, makes the broker keep topics, records and committed offsets in this
	// directory and reload them on the next Start. Every produce is written to the file (with
	// write(2), not a user-space buffer) before it is acknowledged, and so is every offset commit,
	// so a killed process (kill -9) loses nothing it acknowledged; only a crash of the machine
	// can lose what the operating system had not flushed yet, unless SyncWrites is set. The
	// directory is locked while the broker runs, so two brokers cannot share it. "" or InMemory:
	// everything lives in memory and is gone on Close. The package default is ""; `imledger
	// serve` defaults to DefaultDataDir(node_id).
	DataDir string

	// SyncWrites fsyncs every produced batch and offset commit before it is acknowledged, so
	// even a power loss keeps what was acknowledged, at a cost in throughput. Default false.
	SyncWrites bool

	// Partitions is the partition count of topics the broker creates on its own: topics created
	// with -1 partitions and, when AutoCreateTopics is set, topics created by a metadata request.
	// Default DefaultPartitions.
	Partitions int

	// AutoCreateTopics lets clients create a topic by asking for its metadata, as a Kafka broker
	// with auto.create.topics.enable does. Default false: imledger creates its topics explicitly.
	// With a DataDir, a topic created this way is recorded only on Close, so after a crash its
	// records are not found: create topics explicitly where that matters.
	AutoCreateTopics bool

	// RetentionBytes is about how many bytes of records each partition keeps once its consumer
	// groups have read them (see ApplyRetention for the rule). Default 32 MiB; negative: no
	// limit by size.
	RetentionBytes int64

	// RetentionTime is how long records are kept once their consumer groups have read them.
	// Default 24 h; negative: no limit by age.
	RetentionTime time.Duration

	// RetentionCheck is how often retention runs. Default 30 s.
	RetentionCheck time.Duration

	// SegmentBytes is the size at which a partition starts a new segment file. Retention
	// removes whole segments from disk (and from memory with an in-memory data directory), so
	// a partition holds up to about this much more than RetentionBytes. Default 8 MiB.
	SegmentBytes int
}

// DefaultPartitions is the default of Config.Partitions.
const DefaultPartitions = 12

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:9092"
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = 32 << 20
	}
	if c.RetentionTime == 0 {
		c.RetentionTime = 24 * time.Hour
	}
	if c.RetentionCheck == 0 {
		c.RetentionCheck = 30 * time.Second
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = 8 << 20
	}
}

// Validate reports every problem of c, with defaults applied to unset fields, joined into one
// error.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("kafkabroker: addr %q: %w", c.Addr, err))
	} else {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			errs = append(errs, fmt.Errorf("kafkabroker: addr %q: the host is advertised to clients and must be dialable, not unspecified", c.Addr))
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("kafkabroker: addr %q: bad port", c.Addr))
		}
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("kafkabroker: partitions: %d, want >= 1", c.Partitions))
	}
	if c.RetentionCheck < 0 {
		errs = append(errs, fmt.Errorf("kafkabroker: retention_check: %s, want > 0", c.RetentionCheck))
	}
	if c.SegmentBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("kafkabroker: segment_bytes: %d, want >= 1024", c.SegmentBytes))
	}
	return errors.Join(errs...)
}

// InMemory as Config.DataDir keeps the broker's state in memory only.
const InMemory = "memory"

// DefaultDataDir is where `imledger serve` keeps the embedded broker of node nodeID:
// $XDG_STATE_HOME/imledger/kafka/<node id>, with $XDG_STATE_HOME defaulting to ~/.local/state,
// or the system's temporary directory when there is no home directory.
func DefaultDataDir(nodeID string) string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			base = filepath.Join(home, ".local", "state")
		} else {
			base = os.TempDir()
		}
	}
	return filepath.Join(base, "imledger", "kafka", nodeID)
}

// Broker is a running embedded broker. Close it when done.
type Broker struct {
	cluster *kfake.Cluster
	addrs   []string
	unlock  func()
	dataDir string // "" in memory
	once    sync.Once

	ret     *retention
	stopRet context.CancelFunc
	retDone chan struct{}
}

// Start listens on cfg.Addr and serves the Kafka protocol until Close. With cfg.DataDir it first
// reloads the state persisted there. It fails if cfg is invalid, the address cannot be bound, or
// the data directory cannot be read. logger receives the broker's warnings and errors; nil
// discards them.
func Start(cfg Config, logger *slog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	id, err := newClusterID()
	if err != nil {
		return nil, err
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		// A fresh id per new log: a data directory keeps the id it was created with, so a broker
		// that lost its log (in memory, or a wiped directory) shows up as another cluster.
		kfake.ClusterID(id),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.WithLogger(slogAdapter{logger}),
		// kfake asks for 127.0.0.1:<port>; listen on the configured address instead.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, cfg.Addr) }),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(cfg.SegmentBytes)}),
	}
	unlock := func() {}
	dataDir, crashed := "", false
	if cfg.DataDir != "" && cfg.DataDir != InMemory {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("kafkabroker: data dir: %w", err)
		}
		if unlock, err = lockDir(cfg.DataDir); err != nil {
			return nil, err
		}
		clean, err := takeCleanMark(cfg.DataDir)
		if err != nil {
			unlock()
			return nil, err
		}
		dataDir, crashed = cfg.DataDir, hasLog(cfg.DataDir) && !clean
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	if cfg.AutoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("kafkabroker: start on %s: %w", cfg.Addr, err)
	}
	b := &Broker{cluster: c, addrs: c.ListenAddrs(), unlock: unlock, dataDir: dataDir, retDone: make(chan struct{})}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.WithLogger(nil))
	if err != nil {
		c.Close()
		unlock()
		return nil, fmt.Errorf("kafkabroker: retention client: %w", err)
	}
	if crashed {
		if err := closeDangling(c, b.addrs, cl, logger); err != nil {
			cl.Close()
			c.Close()
			unlock()
			return nil, err
		}
	}
	b.ret = &retention{cluster: c, client: cl, cfg: cfg, samples: map[partitionKey][]hwmSample{}}
	ctx, cancel := context.WithCancel(context.Background())
	b.stopRet = cancel
	go func() {
		defer close(b.retDone)
		b.ret.run(ctx, func(format string, args ...any) {
			logger.Warn(fmt.Sprintf(format, args...), "component", "kafkabroker")
		})
	}()
	return b, nil
}

// newClusterID returns "imledger-" and 16 random hex digits.
func newClusterID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("kafkabroker: cluster id: %w", err)
	}
	return "imledger-" + hex.EncodeToString(b[:]), nil
}

// Addrs returns the seed broker addresses clients connect to, with the actual port when
// Config.Addr asked for port 0.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Close stops the broker, closing client connections, and with a data directory writes the
// state to disk first and unlocks the directory. Calling it again is a no-op.
func (b *Broker) Close() {
	b.once.Do(func() {
		b.stopRet()
		<-b.retDone
		b.ret.client.Close()
		b.cluster.Close()
		if b.dataDir != "" {
			// Best effort: without the mark the next start reads the whole log once more.
			_ = os.WriteFile(filepath.Join(b.dataDir, cleanMark), nil, 0o600)
		}
		b.unlock()
	})
}

// slogAdapter passes kfake's warnings and errors to slog. Its info and debug lines (one per
// request) are dropped before they are formatted.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		a.l.Error(fmt.Sprintf(format, args...), "component", "kafkabroker")
	case kfake.LogLevelWarn:
		a.l.Warn(fmt.Sprintf(format, args...), "component", "kafkabroker")
	}
}
