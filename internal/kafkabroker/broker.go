package kafkabroker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config configures the embedded broker.
type Config struct {
	// Addr is the host:port the broker listens on and advertises to clients. Default
	// "127.0.0.1:9092". Port 0 picks a free port (see Broker.Addrs). Because the address is also
	// advertised in metadata, the host must be one clients can dial: 0.0.0.0, :: and an empty
	// host are rejected.
	Addr string

	// DataDir, when set, makes the broker keep topics, records and committed offsets in this
	// directory and reload them on the next Start, so restarting `imledger serve` loses nothing
	// that was flushed. Writes go through the page cache and are fsynced on Close, so a crash can
	// lose the newest records. Default "": everything lives in memory and is gone on Close.
	DataDir string

	// Partitions is the partition count of topics the broker creates on its own: topics created
	// with -1 partitions and, when AutoCreateTopics is set, topics created by a metadata request.
	// Default 12.
	Partitions int

	// AutoCreateTopics lets clients create a topic by asking for its metadata, as a Kafka broker
	// with auto.create.topics.enable does. Default false: imledger creates its topics explicitly.
	AutoCreateTopics bool
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:9092"
	}
	if c.Partitions == 0 {
		c.Partitions = 12
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
	return errors.Join(errs...)
}

// Broker is a running embedded broker. Close it when done.
type Broker struct {
	cluster *kfake.Cluster
	addrs   []string
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
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ClusterID("imledger-embedded"),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.WithLogger(slogAdapter{logger}),
		// kfake asks for 127.0.0.1:<port>; listen on the configured address instead.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, cfg.Addr) }),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if cfg.AutoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkabroker: start on %s: %w", cfg.Addr, err)
	}
	return &Broker{cluster: c, addrs: c.ListenAddrs()}, nil
}

// Addrs returns the seed broker addresses clients connect to, with the actual port when
// Config.Addr asked for port 0.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Close stops the broker, closing client connections, and with a data directory writes the
// state to disk first. Calling it again is a no-op.
func (b *Broker) Close() { b.cluster.Close() }

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
