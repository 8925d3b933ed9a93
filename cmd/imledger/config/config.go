package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/commands/retention"
	"github.com/imledger/imledger/commands/session"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/ws"
)

// Config is the whole configuration of one imledger process. Every field has a default, so the zero
// YAML file and an empty environment give a working local setup (see Defaults).
type Config struct {
	// NodeID names this process among the nodes of a deployment: it tags logs, presence entries
	// and the node's fanout channel, so it must be unique among live nodes. 1-64 of
	// [A-Za-z0-9._-]. Default: the host name.
	NodeID string `koanf:"node_id"`
	// ShutdownTimeout bounds the whole graceful shutdown (HTTP drain, relay stop, pool close).
	// Default 20s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// Log configures the process logger.
	Log LogConfig `koanf:"log"`
	// HTTP configures the listener that serves the REST API and the ops endpoints.
	HTTP HTTPConfig `koanf:"http"`
	// Postgres configures the event store database.
	Postgres PostgresConfig `koanf:"postgres"`
	// MySQL configures the tenant read-model databases (readmodels/tenantdb): one server, one
	// database per tenant. An explicitly empty server_dsn disables MySQL.
	MySQL tenantdb.Config `koanf:"mysql"`
	// EventStore tunes the Postgres event store (commands/eventstore). Zero values take the
	// package defaults.
	EventStore eventstore.Config `koanf:"event_store"`
	// Send tunes the SendMessage handler (commands/message): content limit, sequencer partitions and
	// batching, and under send.seq the Redis key prefix (empty: redis.key_prefix) and idempotency
	// TTLs. Zero values take the package defaults.
	Send message.SendMessageConfig `koanf:"send"`
	// Relay tunes the outbox relay that publishes events to Kafka (commands/relay). Its Kafka
	// settings are the kafka section's; relay.kafka is not a key. Zero values take the package
	// defaults.
	Relay relay.Config `koanf:"relay"`
	// Redis configures the Redis server used for seq allocation, idempotency and hot state.
	Redis RedisConfig `koanf:"redis"`
	// Kafka configures the Kafka cluster the relay publishes to and the projectors consume.
	Kafka KafkaConfig `koanf:"kafka"`

	// Auth configures the access tokens (transport/auth).
	Auth AuthConfig `koanf:"auth"`
	// Account tunes registration, password hashing and tenant API keys (commands/account).
	// Zero values take the package defaults.
	Account account.Config `koanf:"account"`
	// Groups tunes the group, relation and profile command handlers (commands/group).
	Groups group.Config `koanf:"groups"`
	// SendPolicy tunes the send-path permission cache (commands/policy); other nodes' changes
	// reach it over the Redis channel <redis.key_prefix>cache:invalidate.
	SendPolicy policy.Config `koanf:"send_policy"`
	// MessageOps tunes recall, edit, delete-for-me and read marks (commands/message).
	MessageOps message.MessageOpsConfig `koanf:"message_ops"`
	// Sessions tunes the recorder of WebSocket session.opened.v1/session.closed.v1 events
	// (commands/session). Its node is node_id; sessions.node is not a key.
	Sessions session.RecorderConfig `koanf:"sessions"`
	// Presence tunes the online state in Redis (transport/presence). Its node id is node_id;
	// presence.node_id is not a key. An empty key_prefix means redis.key_prefix.
	Presence presence.Config `koanf:"presence"`
	// Fanout tunes cross-node delivery over Redis Pub/Sub (transport/fanout). Its node id is
	// node_id; fanout.node_id is not a key. An empty key_prefix means redis.key_prefix.
	Fanout fanout.Config `koanf:"fanout"`
	// WS tunes the WebSocket gateway (transport/ws). An empty max_content_bytes means
	// send.max_content_bytes.
	WS ws.Config `koanf:"ws"`
	// Channel tunes the per-user channel's log in Redis (transport/userchan): how many items
	// of a user it keeps and for how long. An empty key_prefix means redis.key_prefix.
	Channel userchan.Config `koanf:"channel"`
	// Projections tunes the projectors that build the read models from Kafka (projections). They
	// consume with the kafka section's settings; projections.kafka is not a key.
	Projections ProjectionsConfig `koanf:"projections"`
	// Hot tunes the Redis hot-message read model (readmodels/hot). An empty prefix means
	// redis.key_prefix.
	Hot hot.Config `koanf:"hot"`
	// Business tunes the caches of the group, relation and profile read model
	// (readmodels/business). An empty key_prefix means redis.key_prefix.
	Business business.Config `koanf:"business"`
	// Demo configures what serve sets up for trying imledger.
	Demo DemoConfig `koanf:"demo"`
	// Tenants tunes the in-process tenant cache every node checks requests against (and the
	// account guard, which is refreshed as often) (commands/tenant).
	Tenants tenant.CacheConfig `koanf:"tenants"`
	// Admin configures the admin command consumer (commands/admin).
	Admin AdminConfig `koanf:"admin"`
	// RateLimit configures the per-tenant rate limits of sends, REST requests, WebSocket
	// connects, group creation and friend requests (transport/ratelimit).
	RateLimit RateLimitConfig `koanf:"rate_limit"`
	// Verify configures verification codes and their SMS/e-mail gateway (commands/verify).
	Verify VerifyConfig `koanf:"verify"`
	// Shred configures crypto-shredding: the keeper of the tenant keys and the data-key cache
	// (commands/shred).
	Shred ShredConfig `koanf:"shred"`
	// ActionTokens tunes one-time action tokens (commands/actiontoken). An empty key_prefix
	// means redis.key_prefix.
	ActionTokens actiontoken.Config `koanf:"action_tokens"`
	// Push configures offline push reminders (transport/push). An empty key_prefix means
	// redis.key_prefix.
	Push PushConfig `koanf:"push"`
	// Files configures file uploads, their security check and collection (commands/files).
	Files FilesConfig `koanf:"files"`
	// Retention is the retention job (docs/retention.md).
	Retention retention.Config `koanf:"retention"`
}

// LogConfig configures the process logger.
type LogConfig struct {
	// Level is the lowest level written: debug, info, warn or error. Default info.
	Level string `koanf:"level"`
	// Format is text (human-readable key=value) or json (one object per line). Default text.
	Format string `koanf:"format"`
}

// HTTPConfig configures the HTTP listener.
type HTTPConfig struct {
	// Addr is the listen address, host:port or :port. Default ":8080".
	Addr string `koanf:"addr"`
	// ReadHeaderTimeout bounds reading a request's headers. Default 5s.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`
	// MaxBodyBytes caps a request body; larger bodies are refused. Default 1 MiB.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// PprofAddr serves Go's net/http/pprof profiles on a listener of their own, host:port.
	// Bind it to a private interface. Default empty: off.
	PprofAddr string `koanf:"pprof_addr"`
	// DevAuth accepts the headers X-IM-Tenant and X-IM-User as the principal of a request
	// without a bearer token: anyone can claim any user. For tests and local experiments only.
	// Default false.
	DevAuth bool `koanf:"dev_auth"`
	// RequireAPIKey makes the tenant API key (X-IM-API-Key, from `imledger tenant create`)
	// mandatory on every request, register and login included. Default false.
	RequireAPIKey bool `koanf:"require_api_key"`
	// IdempotencyTTL is how long an Idempotency-Key and its stored answer are kept. Default 24h.
	IdempotencyTTL time.Duration `koanf:"idempotency_ttl"`
	// IdempotencyPendingTimeout is how long a request may hold its key unfinished before the key
	// is taken to be abandoned. Default 1m; below idempotency_ttl.
	IdempotencyPendingTimeout time.Duration `koanf:"idempotency_pending_timeout"`
	// IdempotencyPurgeInterval is how often expired Idempotency-Key records are deleted.
	// Default 10m.
	IdempotencyPurgeInterval time.Duration `koanf:"idempotency_purge_interval"`
	// LoginPerIP is how many logins one client address may try per minute. Default 30.
	LoginPerIP int `koanf:"login_per_ip"`
	// LoginPerNameIP is how many logins of one login name one client address may try per
	// minute. Default 10.
	LoginPerNameIP int `koanf:"login_per_name_ip"`
	// LoginPerName is how many logins of one login name may be tried per minute from the
	// addresses that have not logged in to it within login_known_address_ttl. Default 100.
	LoginPerName int `koanf:"login_per_name"`
	// LoginKnownAddressTTL is how long a successful login exempts its client address from
	// login_per_name for that login name. Default 720h.
	LoginKnownAddressTTL time.Duration `koanf:"login_known_address_ttl"`
	// RegisterPerIP is how many registrations one client address may try per minute. Default 10.
	RegisterPerIP int `koanf:"register_per_ip"`
	// CodePerIP is how many verification-code requests one client address may make per minute.
	// Default 20.
	CodePerIP int `koanf:"code_per_ip"`
	// AccountPerUser is how many requests that check a user's password again (change the
	// password, bind a contact, delete the account) one user may make per minute. Default 5.
	AccountPerUser int `koanf:"account_per_user"`
	// ResetPerIP is how many password-reset requests one client address may make per minute.
	// Default 10.
	ResetPerIP int `koanf:"reset_per_ip"`
	// ResetPerLogin is how many reset tokens may be asked for one login name per minute.
	// Default 5.
	ResetPerLogin int `koanf:"reset_per_login"`
	// ResetTokenTTL is the lifetime of the token a verified password reset gets. Default 15m.
	ResetTokenTTL time.Duration `koanf:"reset_token_ttl"`
}

// PostgresConfig configures the event store database.
type PostgresConfig struct {
	// URL is a pgx connection URL. `imledger migrate` creates the database it names when missing.
	// Default "postgres://postgres@127.0.0.1:5432/imledger?sslmode=disable".
	URL string `koanf:"url"`
	// MaxConns caps the connection pool. Default 16.
	MaxConns int32 `koanf:"max_conns"`
}

// RedisConfig configures the Redis client.
type RedisConfig struct {
	// Addr is host:port of the Redis server. Default "127.0.0.1:6379".
	Addr string `koanf:"addr"`
	// Password authenticates to Redis when set. Default empty.
	Password string `koanf:"password"`
	// DB selects the Redis logical database. Default 0.
	DB int `koanf:"db"`
	// KeyPrefix starts every Redis key and channel imledger uses, unless a component section
	// sets its own. Default "im:". No braces or white space.
	KeyPrefix string `koanf:"key_prefix"`
}

// KafkaConfig configures the Kafka cluster: the client settings of internal/kafka (brokers,
// topic prefix, partitions, producer tuning; keys kafka.brokers, kafka.topic_prefix, ...) and the
// embedded broker started when no brokers are given (keys kafka.embedded.*).
type KafkaConfig struct {
	// Config holds the client settings. An empty Brokers list starts the embedded broker — for
	// trying imledger and for tests, not for production. In the environment:
	// IM_KAFKA_BROKERS=host1:9092,host2:9092.
	kafka.Config `koanf:",squash"`
	// Embedded configures the embedded broker (address default "127.0.0.1:9092"; data_dir
	// default: kafkabroker.DefaultDataDir(node_id), "memory" keeps it in memory).
	Embedded kafkabroker.Config `koanf:"embedded"`
}

// EmbeddedBroker returns the embedded broker's settings for node nodeID: an empty data_dir is
// DefaultDataDir(nodeID), "memory" is no directory.
func (c KafkaConfig) EmbeddedBroker(nodeID string) kafkabroker.Config {
	e := c.Embedded
	switch e.DataDir {
	case "":
		e.DataDir = kafkabroker.DefaultDataDir(nodeID)
	case kafkabroker.InMemory:
		e.DataDir = ""
	}
	return e
}

// Defaults returns the configuration used when nothing overrides it.
func Defaults() Config {
	host, err := os.Hostname()
	if err != nil || !nodeIDRe.MatchString(host) {
		host = "imledger"
	}
	return Config{
		NodeID:          host,
		ShutdownTimeout: 20 * time.Second,
		Log:             LogConfig{Level: "info", Format: "text"},
		HTTP: HTTPConfig{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20,
			IdempotencyTTL: 24 * time.Hour, IdempotencyPendingTimeout: time.Minute, IdempotencyPurgeInterval: 10 * time.Minute,
			LoginPerIP: 30, LoginPerNameIP: 10, LoginPerName: 100, LoginKnownAddressTTL: 30 * 24 * time.Hour, RegisterPerIP: 10,
			CodePerIP: 20, AccountPerUser: 5, ResetPerIP: 10, ResetPerLogin: 5, ResetTokenTTL: 15 * time.Minute},
		Postgres: PostgresConfig{
			URL:      "postgres://postgres@127.0.0.1:5432/imledger?sslmode=disable",
			MaxConns: 16,
		},
		MySQL:       tenantdb.Config{ServerDSN: "root@tcp(127.0.0.1:3306)/", DatabaseTemplate: "im_t_" + tenantdb.TenantPlaceholder},
		Redis:       RedisConfig{Addr: "127.0.0.1:6379", KeyPrefix: "im:"},
		Kafka:       KafkaConfig{Embedded: kafkabroker.Config{Addr: "127.0.0.1:9092"}},
		Auth:        AuthConfig{TokenTTL: 24 * time.Hour, MaxTTL: 30 * 24 * time.Hour, Leeway: 30 * time.Second},
		Projections: ProjectionsConfig{Run: true},
		Admin:       AdminConfig{Run: true, AllowUnsigned: true},
		Demo:        DemoConfig{Tenant: "demo"},
		RateLimit:   RateLimitConfig{Enabled: true},
		Verify: VerifyConfig{CodeLength: 6, TTL: 5 * time.Minute, ResendInterval: time.Minute, MaxAttempts: 5,
			CreatePerHour: 5, GatewayTimeout: 5 * time.Second},
		Shred:        ShredConfig{Enabled: true},
		ActionTokens: actiontoken.Config{DefaultTTL: 24 * time.Hour, MaxTTL: 30 * 24 * time.Hour},
		Push:         PushConfig{Run: true},
		Files:        FilesConfig{Run: true, Config: files.Config{DirectURLs: true}},
		Retention:    retention.Config{Run: true},
	}
}

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Validate reports every invalid field at once (errors.Join), each error naming its key. Component
// sections whose packages apply their defaults inside Validate (kafka, kafka.embedded, auth,
// account, message_ops, presence, fanout, ws, projections) are fully checked here; the others
// (event_store, send, groups, send_policy, hot, business, the pool sizes of mysql) are checked by
// their constructors when serve starts.
func (c Config) Validate() error {
	var errs []error
	if !nodeIDRe.MatchString(c.NodeID) {
		errs = append(errs, fmt.Errorf("node_id %q: want 1-64 of [A-Za-z0-9._-]", c.NodeID))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdown_timeout: must be positive"))
	}
	errs = append(errs, c.Log.Validate(), c.HTTP.Validate(), c.Postgres.Validate(),
		validateMySQL(c.MySQL), c.Redis.Validate(), c.Kafka.Validate(), c.Relay.Validate())
	if !reflect.ValueOf(c.Relay.Kafka).IsZero() {
		errs = append(errs, errors.New("relay.kafka: not a key; the relay uses the kafka section"))
	}
	errs = append(errs, c.validateComponents(), c.validatePushFiles(), c.Retention.Validate())
	return errors.Join(errs...)
}

// Validate checks the level and format names.
func (c LogConfig) Validate() error {
	var errs []error
	switch strings.ToLower(c.Level) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level %q: want debug, info, warn or error", c.Level))
	}
	switch strings.ToLower(c.Format) {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format %q: want text or json", c.Format))
	}
	return errors.Join(errs...)
}

// Validate checks the listen address and limits.
func (c HTTPConfig) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("http.addr %q: %w", c.Addr, err))
	}
	if c.ReadHeaderTimeout <= 0 {
		errs = append(errs, errors.New("http.read_header_timeout: must be positive"))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("http.max_body_bytes: must be positive"))
	}
	if c.IdempotencyPendingTimeout <= 0 || c.IdempotencyTTL <= c.IdempotencyPendingTimeout {
		errs = append(errs, errors.New("http.idempotency_pending_timeout: must be positive and below http.idempotency_ttl"))
	}
	if c.IdempotencyPurgeInterval <= 0 {
		errs = append(errs, errors.New("http.idempotency_purge_interval: must be positive"))
	}
	if c.LoginPerIP < 0 || c.LoginPerNameIP < 0 || c.LoginPerName < 0 || c.RegisterPerIP < 0 || c.CodePerIP < 0 {
		errs = append(errs, errors.New("http.login_per_ip, http.login_per_name_ip, http.login_per_name, http.register_per_ip, http.code_per_ip: must not be negative"))
	}
	if c.AccountPerUser < 0 || c.ResetPerIP < 0 || c.ResetPerLogin < 0 {
		errs = append(errs, errors.New("http.account_per_user, http.reset_per_ip, http.reset_per_login: must not be negative"))
	}
	if c.ResetTokenTTL < time.Second {
		errs = append(errs, errors.New("http.reset_token_ttl: must be at least 1s"))
	}
	if c.LoginKnownAddressTTL < 0 {
		errs = append(errs, errors.New("http.login_known_address_ttl: must not be negative"))
	}
	return errors.Join(errs...)
}

// Validate parses the URL with pgx's own parser.
func (c PostgresConfig) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("postgres.url: required"))
	} else if _, err := pgxpool.ParseConfig(c.URL); err != nil {
		// pgx errors can echo the password; report only that parsing failed.
		errs = append(errs, errors.New("postgres.url: not a valid PostgreSQL connection URL"))
	}
	if c.MaxConns <= 0 {
		errs = append(errs, errors.New("postgres.max_conns: must be positive"))
	}
	return errors.Join(errs...)
}

// MySQLEnabled reports whether a MySQL server is configured (mysql.server_dsn is not empty).
func (c Config) MySQLEnabled() bool { return c.MySQL.ServerDSN != "" }

// validateMySQL checks what tenantdb.NewRouter would reject about the server and the template;
// pool sizes are checked by NewRouter, which knows its own defaults.
func validateMySQL(c tenantdb.Config) error {
	if c.ServerDSN == "" {
		return nil
	}
	var errs []error
	cfg, err := mysql.ParseDSN(c.ServerDSN)
	switch {
	case err != nil:
		errs = append(errs, errors.New("mysql.server_dsn: not a valid MySQL DSN"))
	case cfg.DBName != "":
		errs = append(errs, fmt.Errorf("mysql.server_dsn: names database %q; give the server only, tenants get their own databases", cfg.DBName))
	}
	if strings.Count(c.DatabaseTemplate, tenantdb.TenantPlaceholder) != 1 {
		errs = append(errs, fmt.Errorf("mysql.database_template %q: must contain %s once", c.DatabaseTemplate, tenantdb.TenantPlaceholder))
	}
	return errors.Join(errs...)
}

// Validate checks the address and database number.
func (c RedisConfig) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("redis.addr %q: %w", c.Addr, err))
	}
	if c.DB < 0 {
		errs = append(errs, errors.New("redis.db: must not be negative"))
	}
	if c.KeyPrefix == "" || strings.ContainsAny(c.KeyPrefix, "{} \t\r\n") {
		errs = append(errs, fmt.Errorf("redis.key_prefix %q: required, without braces or white space", c.KeyPrefix))
	}
	return errors.Join(errs...)
}

// Validate checks the client settings and, when no brokers are given, the embedded broker's.
func (c KafkaConfig) Validate() error {
	var errs []error
	client := c.Config
	if c.UseEmbedded() {
		// The embedded broker's address is filled in at start-up.
		client.Brokers = []string{c.Embedded.Addr}
		errs = append(errs, c.Embedded.Validate())
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			errs = append(errs, fmt.Errorf("kafka.brokers %q: %w", b, err))
		}
	}
	errs = append(errs, client.Validate())
	return errors.Join(errs...)
}

// UseEmbedded reports whether the process must start its own Kafka-protocol broker.
func (c KafkaConfig) UseEmbedded() bool { return len(c.Brokers) == 0 }

// ClientOfServe is the client configuration of a tool that talks to a running deployment: with
// no kafka.brokers, to the embedded broker a local serve runs on kafka.embedded.addr.
func (c KafkaConfig) ClientOfServe() kafka.Config {
	k := c.Config
	if c.UseEmbedded() {
		k.Brokers = []string{c.Embedded.Addr}
	}
	return k
}
