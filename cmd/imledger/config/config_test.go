package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/spf13/pflag"
)

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "imledger.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Sources{})
	if err != nil {
		t.Fatal(err)
	}
	want := config.Defaults()
	if c.Postgres.URL != "postgres://postgres@127.0.0.1:5432/imledger?sslmode=disable" ||
		c.MySQL.ServerDSN != "root@tcp(127.0.0.1:3306)/" || c.MySQL.DatabaseTemplate != "im_t_{tenant}" ||
		c.Redis.Addr != "127.0.0.1:6379" || c.HTTP.Addr != ":8080" ||
		len(c.Kafka.Brokers) != 0 || !c.Kafka.UseEmbedded() || c.Kafka.Embedded.Addr != "127.0.0.1:9092" ||
		c.NodeID != want.NodeID || c.ShutdownTimeout != 20*time.Second {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `
node_id: from-file
shutdown_timeout: 7s
log: {level: debug, format: json}
http: {addr: ":7000"}
postgres: {url: "postgres://file@db:5432/f?sslmode=disable", max_conns: 3}
redis: {addr: "file-redis:6379"}
kafka: {brokers: ["file-kafka:9092"]}
`)
	environ := []string{
		"IM_HTTP_ADDR=:7001",
		"IM_POSTGRES_URL=postgres://env@db:5432/e?sslmode=disable",
		"IM_KAFKA_BROKERS=k1:9092,k2:9092",
		"IM_MYSQL_DATABASE_TEMPLATE=env_{tenant}",
		"IM_SEND_SEQ_KEY_PREFIX=env:",
		"IM_SEND_PENDING_WAIT=3s",
		"IM_NOT_A_KEY=1",
		"PATH=/usr/bin",
	}
	tests := []struct {
		name  string
		args  []string
		env   []string
		check func(t *testing.T, c config.Config)
	}{
		{"file over defaults", []string{"--config", file}, nil, func(t *testing.T, c config.Config) {
			if c.NodeID != "from-file" || c.HTTP.Addr != ":7000" || c.Log.Format != "json" ||
				c.Postgres.MaxConns != 3 || c.ShutdownTimeout != 7*time.Second ||
				!slices.Equal(c.Kafka.Brokers, []string{"file-kafka:9092"}) {
				t.Errorf("file values not applied: %+v", c)
			}
			if c.MySQL.ServerDSN != "root@tcp(127.0.0.1:3306)/" {
				t.Errorf("keys absent from the file must keep defaults, got mysql.server_dsn %q", c.MySQL.ServerDSN)
			}
		}},
		{"env over file", []string{"--config", file}, environ, func(t *testing.T, c config.Config) {
			if c.HTTP.Addr != ":7001" || c.Postgres.URL != "postgres://env@db:5432/e?sslmode=disable" ||
				c.MySQL.DatabaseTemplate != "env_{tenant}" || c.Send.Seq.KeyPrefix != "env:" ||
				c.Send.PendingWait != 3*time.Second {
				t.Errorf("env values not applied: %+v", c)
			}
			if !slices.Equal(c.Kafka.Brokers, []string{"k1:9092", "k2:9092"}) {
				t.Errorf("IM_KAFKA_BROKERS comma list: got %q", c.Kafka.Brokers)
			}
			if c.Redis.Addr != "file-redis:6379" || c.Postgres.MaxConns != 3 {
				t.Errorf("file values without env override lost: %+v", c)
			}
		}},
		{"flags over env", []string{"--config", file, "--http-addr", ":7002", "--kafka-brokers", "f1:1,f2:2"}, environ,
			func(t *testing.T, c config.Config) {
				if c.HTTP.Addr != ":7002" || !slices.Equal(c.Kafka.Brokers, []string{"f1:1", "f2:2"}) {
					t.Errorf("flag values not applied: %+v", c)
				}
				if c.Postgres.URL != "postgres://env@db:5432/e?sslmode=disable" {
					t.Errorf("unset flag overrode env: postgres.url %q", c.Postgres.URL)
				}
			}},
		{"empty broker list selects the embedded broker", []string{"--config", file},
			[]string{"IM_KAFKA_BROKERS=", "IM_KAFKA_EMBEDDED_ADDR=127.0.0.1:19092", "IM_KAFKA_TOPIC_PREFIX=dev.", "IM_KAFKA_PARTITIONS=3"},
			func(t *testing.T, c config.Config) {
				if !c.Kafka.UseEmbedded() {
					t.Errorf("IM_KAFKA_BROKERS= should clear the file's brokers, got %q", c.Kafka.Brokers)
				}
				if c.Kafka.Embedded.Addr != "127.0.0.1:19092" || c.Kafka.TopicPrefix != "dev." || c.Kafka.Partitions != 3 {
					t.Errorf("component keys not applied: %+v", c.Kafka)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(config.Sources{Flags: flags(t, tt.args...), Environ: tt.env})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		env  []string
		want []string
	}{
		{"unknown file key", "postgres: {urll: x}\n", nil, []string{"urll"}},
		{"bad values are all reported", "", []string{
			"IM_LOG_LEVEL=loud", "IM_LOG_FORMAT=xml", "IM_HTTP_ADDR=8080", "IM_POSTGRES_URL=",
			"IM_MYSQL_DATABASE_TEMPLATE=im_fixed", "IM_KAFKA_BROKERS=nohost", "IM_NODE_ID=a b",
		}, []string{"log.level", "log.format", "http.addr", "postgres.url", "mysql.database_template", "kafka.brokers", "node_id"}},
		{"mysql dsn with a database", "", []string{"IM_MYSQL_SERVER_DSN=root@tcp(127.0.0.1:3306)/im"}, []string{"mysql.server_dsn"}},
		{"bad duration", "", []string{"IM_SHUTDOWN_TIMEOUT=soon"}, []string{"shutdown_timeout"}},
		{"component validation", "kafka: {topic_prefix: \"a/b\", embedded: {addr: \"0.0.0.0:9092\"}}\nrelay: {min_poll: 1s, max_poll: 1ms}\n", nil,
			[]string{"topic prefix", "kafkabroker: addr", "relay: poll"}},
		{"relay.kafka is not a key", "relay: {kafka: {topic_prefix: x.}}\n", nil, []string{"relay.kafka"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var args []string
			if tt.file != "" {
				args = []string{"--config", writeFile(t, tt.file)}
			}
			_, err := config.Load(config.Sources{Flags: flags(t, args...), Environ: tt.env})
			if err == nil {
				t.Fatal("Load accepted an invalid configuration")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q: %v", w, err)
				}
			}
		})
	}
}

func TestPostgresURLErrorHidesPassword(t *testing.T) {
	t.Parallel()
	c := config.Defaults()
	c.Postgres.URL = "postgres://u:s3cret@host:notaport/db"
	err := c.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("want an error without the password, got %v", err)
	}
}

func TestMySQLMayBeDisabled(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Sources{Environ: []string{"IM_MYSQL_SERVER_DSN="}})
	if err != nil {
		t.Fatal(err)
	}
	if c.MySQLEnabled() {
		t.Fatal("an empty DSN must disable MySQL")
	}
}

func TestKeysHaveDistinctEnvNames(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, k := range config.Keys() {
		if other, dup := seen[k.Env]; dup {
			t.Errorf("%s and %s both map to %s", other, k.Name, k.Env)
		}
		seen[k.Env] = k.Name
		if strings.HasPrefix(k.Name, "relay.kafka") {
			t.Errorf("%s: the relay's Kafka settings come from the kafka section", k.Name)
		}
		if !strings.HasPrefix(k.Env, "IM_") {
			t.Errorf("%s: env %s lacks the IM_ prefix", k.Name, k.Env)
		}
	}
	for _, want := range []string{"IM_POSTGRES_URL", "IM_KAFKA_BROKERS", "IM_MYSQL_SERVER_DSN", "IM_EVENT_STORE_MAX_BATCH", "IM_SEND_SEQ_KEY_PREFIX", "IM_RELAY_BATCH_SIZE", "IM_REDIS_ADDR", "IM_HTTP_ADDR", "IM_NODE_ID"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("no key is set by %s", want)
		}
	}
}

func TestUnknownEnv(t *testing.T) {
	t.Parallel()
	got := config.UnknownEnv([]string{"IM_POSTGRESS_URL=x", "IM_POSTGRES_URL=y", "HOME=/root", "IM_LOG_LEVEL=debug"})
	if !slices.Equal(got, []string{"IM_POSTGRESS_URL"}) {
		t.Fatalf("got %q", got)
	}
}

func TestAuthKeys(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat("s", 32)
	file := writeFile(t, "auth: {keys: [{id: a, secret: \""+secret+"\"}, {id: b, secret: \""+secret+"b\"}], signing_key_id: b}\n")
	c, err := config.Load(config.Sources{Flags: flags(t, "--config", file)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Auth.Keys) != 2 || c.Auth.Keys[1].ID != "b" || c.Auth.Keys[1].Secret != secret+"b" || c.Auth.Signer().SigningKeyID != "b" {
		t.Fatalf("keys from the file: %v", c.Auth.Keys)
	}
	c, err = config.Load(config.Sources{Environ: []string{"IM_AUTH_KEYS=k1=" + secret + ", k2=" + secret + "=="}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Auth.Keys) != 2 || c.Auth.Keys[0].ID != "k1" || c.Auth.Keys[1].Secret != secret+"==" {
		t.Fatalf("keys from the environment: %v", c.Auth.Keys)
	}
	if s := c.Auth.Keys.String(); strings.Contains(s, secret) || s != "[k1,k2]" {
		t.Errorf("KeyList.String = %q, want the ids only", s)
	}

	for _, bad := range []string{"IM_AUTH_KEYS=k1", "IM_AUTH_KEYS=k1=short", "IM_AUTH_KEYS=k1=" + secret + ",k1=" + secret} {
		_, err := config.Load(config.Sources{Environ: []string{bad}})
		if err == nil || !strings.Contains(err.Error(), "auth") || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: want an auth error without the secret, got %v", bad[:16], err)
		}
	}
}

func TestComponentSections(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `
node_id: n7
redis: {key_prefix: "p:"}
hot: {prefix: "hot:"}
ws: {allowed_origins: ["https://a.example"], history_max_limit: 20, history_default_limit: 20}
projections: {retry: {max_retries: 2}, run: false}
`)
	c, err := config.Load(config.Sources{Flags: flags(t, "--config", file), Environ: []string{"IM_SEND_MAX_CONTENT_BYTES=1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.PresenceConfig(); p.NodeID != "n7" || p.KeyPrefix != "p:" {
		t.Errorf("presence: %+v", p)
	}
	if f := c.FanoutConfig(); f.NodeID != "n7" || f.KeyPrefix != "p:" {
		t.Errorf("fanout: %+v", f)
	}
	if c.HotConfig().Prefix != "hot:" || c.BusinessConfig().KeyPrefix != "p:" || c.SendConfig().Seq.KeyPrefix != "p:" {
		t.Errorf("prefixes: hot %q business %q seq %q", c.HotConfig().Prefix, c.BusinessConfig().KeyPrefix, c.SendConfig().Seq.KeyPrefix)
	}
	if w := c.WSConfig(); w.MaxContentBytes != 1000 || w.HistoryMaxLimit != 20 || !slices.Equal(w.AllowedOrigins, []string{"https://a.example"}) {
		t.Errorf("ws: %+v", w)
	}
	if c.Projections.Run || c.Projections.Retry.MaxRetries != 2 || c.InvalidationChannel() != "p:cache:invalidate" {
		t.Errorf("projections: %+v", c.Projections)
	}
	if c.DemoTenant().String() != "demo" {
		t.Errorf("demo tenant %q", c.DemoTenant())
	}

	tests := []struct{ yaml, want string }{
		{"presence: {node_id: x}\n", "presence.node_id"},
		{"fanout: {node_id: x}\n", "fanout.node_id"},
		{"sessions: {node: x}\n", "sessions.node"},
		{"projections: {kafka: {topic_prefix: x.}}\n", "projections.kafka"},
		{"redis: {key_prefix: \"a{b\"}\n", "redis.key_prefix"},
		{"demo: {tenant: \"Not A Tenant\"}\n", "demo.tenant"},
		{"ws: {history_max_limit: 1000}\n", "history_max_limit"},
		{"projections: {initial_offset: middle}\n", "initial offset"},
		{"http: {idempotency_pending_timeout: 48h}\n", "http.idempotency_pending_timeout"},
	}
	for _, tt := range tests {
		_, err := config.Load(config.Sources{Flags: flags(t, "--config", writeFile(t, tt.yaml))})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: want an error naming %s, got %v", tt.yaml, tt.want, err)
		}
	}
}
