package config_test

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"gopkg.in/yaml.v3"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
)

// composeFile is the part of compose.yaml the checks below read.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// listeners parses "NAME://host:port,..." into name → host:port.
func listeners(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(l, "://")
		if !ok {
			t.Fatalf("listener %q is not NAME://host:port", l)
		}
		out[name] = addr
	}
	return out
}

func TestComposeServices(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	published := map[string]string{"kafka": "9092:9092", "postgres": "5432:5432", "mysql": "3306:3306", "redis": "6379:6379", "imledger": "8080:8080"}
	for name, port := range published {
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("service %s missing", name)
			continue
		}
		if !slices.Contains(s.Ports, port) {
			t.Errorf("%s: ports %v do not publish %s, the default address", name, s.Ports, port)
		}
		if len(s.Healthcheck.Test) < 2 {
			t.Errorf("%s: no healthcheck", name)
		}
	}
	if len(c.Services) != len(published) {
		t.Errorf("services %v, want exactly %v", len(c.Services), published)
	}
}

func TestComposeKafkaKRaft(t *testing.T) {
	t.Parallel()
	k := readCompose(t).Services["kafka"]
	env := k.Environment
	if !strings.HasPrefix(k.Image, "apache/kafka:") {
		t.Errorf("kafka image %q, want apache/kafka", k.Image)
	}
	for _, v := range []string{"KAFKA_NODE_ID", "KAFKA_PROCESS_ROLES", "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS",
		"KAFKA_CONTROLLER_LISTENER_NAMES", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "KAFKA_CONTROLLER_QUORUM_VOTERS",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_INTER_BROKER_LISTENER_NAME", "CLUSTER_ID"} {
		if env[v] == "" {
			t.Errorf("kafka: %s not set", v)
		}
	}
	if env["KAFKA_PROCESS_ROLES"] != "broker,controller" || env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] != "1" {
		t.Errorf("kafka: want a combined single node with replication factor 1: %v", env)
	}
	if want := env["KAFKA_NODE_ID"] + "@kafka:"; !strings.HasPrefix(env["KAFKA_CONTROLLER_QUORUM_VOTERS"], want) {
		t.Errorf("kafka: quorum voters %q, want the node itself (%s...)", env["KAFKA_CONTROLLER_QUORUM_VOTERS"], want)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`).MatchString(env["CLUSTER_ID"]) {
		t.Errorf("kafka: CLUSTER_ID %q is not a base64url-encoded 16-byte id", env["CLUSTER_ID"])
	}
	protocols := map[string]string{}
	for _, p := range strings.Split(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], ",") {
		name, proto, _ := strings.Cut(p, ":")
		protocols[name] = proto
	}
	ls := listeners(t, env["KAFKA_LISTENERS"])
	adv := listeners(t, env["KAFKA_ADVERTISED_LISTENERS"])
	ctrl := env["KAFKA_CONTROLLER_LISTENER_NAMES"]
	for name := range ls {
		if protocols[name] == "" {
			t.Errorf("kafka: listener %s has no security protocol", name)
		}
	}
	if _, ok := ls[ctrl]; !ok {
		t.Errorf("kafka: controller listener %s is not among the listeners", ctrl)
	}
	_, voterPort, _ := net.SplitHostPort(strings.SplitN(env["KAFKA_CONTROLLER_QUORUM_VOTERS"], "@", 2)[1])
	if _, port, _ := net.SplitHostPort(ls[ctrl]); port != voterPort {
		t.Errorf("kafka: voter port %s is not the controller listener's %s", voterPort, ls[ctrl])
	}
	if _, ok := adv[ctrl]; ok {
		t.Errorf("kafka: the controller listener must not be advertised")
	}
	for name, addr := range adv {
		_, port, _ := net.SplitHostPort(addr)
		if _, lport, _ := net.SplitHostPort(ls[name]); lport != port {
			t.Errorf("kafka: advertised %s=%s does not match listener %s", name, addr, ls[name])
		}
	}
	if _, ok := adv[env["KAFKA_INTER_BROKER_LISTENER_NAME"]]; !ok {
		t.Errorf("kafka: inter-broker listener %s is not advertised", env["KAFKA_INTER_BROKER_LISTENER_NAME"])
	}
}

func TestComposeImledger(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	im := c.Services["imledger"]
	if im.Build.Context != "." || im.Build.Dockerfile != "Dockerfile" {
		t.Errorf("imledger must be built from ./Dockerfile, got %+v", im.Build)
	}
	for _, dep := range []string{"kafka", "postgres", "mysql", "redis"} {
		if im.DependsOn[dep].Condition != "service_healthy" {
			t.Errorf("imledger: depends_on %s: condition %q, want service_healthy", dep, im.DependsOn[dep].Condition)
		}
	}
	known := map[string]bool{}
	for _, k := range config.Keys() {
		known[k.Env] = true
	}
	// Compose interpolates ${VAR} and ${VAR:?message} from the operator's shell; these are the
	// variables the file expects the operator to set.
	producer, err := admintrust.GenerateProducerKey(admintrust.AlgEd25519, "ops-1", admintrust.PlatformScope, domain.Actor{Type: domain.ActorAdmin, ID: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := admintrust.GenerateSecretsKey("cs-1")
	if err != nil {
		t.Fatal(err)
	}
	operator := map[string]string{"IM_AUTH_SECRET": strings.Repeat("s", 48), "IM_ADMIN_PRODUCER_KEYS": producer.Producer,
		"IM_ADMIN_COMMAND_SECRET_KEYS": secrets.Open,
		"IM_VERIFY_HASH_KEY":           strings.Repeat("h", 32),
		"IM_SHRED_LOCAL_KEY":           base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))}
	// ${VAR:-default} and ${VAR:+alternative} follow Compose: the default when VAR is unset or
	// empty, the alternative only when VAR is set and not empty.
	interpolate := regexp.MustCompile(`\$\{([A-Z_]+)(?:(:[?+-])([^}]*))?\}`)
	var environ []string
	for k, v := range im.Environment {
		if !known[k] {
			t.Errorf("imledger: %s names no configuration key", k)
		}
		v = interpolate.ReplaceAllStringFunc(v, func(m string) string {
			sub := interpolate.FindStringSubmatch(m)
			name, op, word := sub[1], sub[2], sub[3]
			val, ok := operator[name]
			if !ok {
				t.Errorf("imledger: %s uses ${%s}, which the operator is not told to set", k, name)
			}
			switch {
			case op == ":-" && val == "":
				return word
			case op == ":+" && val != "":
				return word
			case op == ":+":
				return ""
			}
			return val
		})
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(config.Sources{Environ: environ})
	if err != nil {
		t.Fatalf("imledger's environment does not load: %v", err)
	}

	if len(cfg.Kafka.Brokers) > 0 && cfg.Verify.HashKey == "" {
		t.Errorf("imledger: real brokers and no verify.hash_key: serve would refuse to start")
	}
	if len(cfg.Kafka.Brokers) > 0 && cfg.Shred.LocalKey == "" && cfg.Shred.KeeperURL == "" {
		t.Errorf("imledger: real brokers and no shred.local_key or shred.keeper_url: serve would refuse to start")
	}
	pg, err := pgx.ParseConfig(cfg.Postgres.URL)
	if err != nil || pg.Host != "postgres" || pg.Port != 5432 {
		t.Errorf("postgres.url %q must point at the postgres service", cfg.Postgres.URL)
	}
	my, err := mysql.ParseDSN(cfg.MySQL.ServerDSN)
	if err != nil || my.Addr != "mysql:3306" {
		t.Errorf("mysql.server_dsn %q must point at the mysql service", cfg.MySQL.ServerDSN)
	}
	if cfg.Redis.Addr != "redis:6379" {
		t.Errorf("redis.addr %q must point at the redis service", cfg.Redis.Addr)
	}
	internal := listeners(t, c.Services["kafka"].Environment["KAFKA_ADVERTISED_LISTENERS"])[c.Services["kafka"].Environment["KAFKA_INTER_BROKER_LISTENER_NAME"]]
	if !slices.Equal(cfg.Kafka.Brokers, []string{internal}) || !strings.HasPrefix(internal, "kafka:") {
		t.Errorf("kafka.brokers %v, want the kafka service's advertised in-network listener %s", cfg.Kafka.Brokers, internal)
	}
	if len(cfg.Auth.Keys) == 0 {
		t.Error("imledger in compose must configure auth.keys: with real brokers serve refuses to start without them")
	}
	if a, err := cfg.AdminConsumer(); err != nil || len(a.ProducerKeys) != 1 || len(a.SecretKeys) != 1 || a.AllowUnsigned {
		t.Errorf("imledger in compose must take the operator's admin keys and refuse unsigned commands: %d producer keys, %d secrets keys, unsigned %v, %v",
			len(a.ProducerKeys), len(a.SecretKeys), a.AllowUnsigned, err)
	}
	if cfg.Kafka.UseEmbedded() {
		t.Error("imledger in compose must not start the embedded broker")
	}
	if _, port, _ := net.SplitHostPort(cfg.HTTP.Addr); !slices.Contains(im.Ports, fmt.Sprintf("%s:%s", port, port)) {
		t.Errorf("http.addr %q is not the published port %v", cfg.HTTP.Addr, im.Ports)
	}
	if hc := strings.Join(im.Healthcheck.Test, " "); !strings.Contains(hc, "/readyz") {
		t.Errorf("imledger healthcheck %q should probe /readyz", hc)
	}
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "FROM ") {
			froms = append(froms, line)
		}
	}
	if len(froms) < 2 || !strings.Contains(froms[0], "golang:") ||
		!(strings.Contains(froms[len(froms)-1], "-slim") || strings.Contains(froms[len(froms)-1], "distroless")) {
		t.Errorf("want a multi-stage build from golang onto a slim or distroless runtime, got %q", froms)
	}
	if !strings.Contains(string(b), "./cmd/imledger") || !strings.Contains(string(b), `CMD ["serve"]`) {
		t.Error("the image must build ./cmd/imledger and run serve")
	}
	if !strings.Contains(string(b), "curl") {
		t.Error("the runtime image needs curl for the compose health check")
	}
}
