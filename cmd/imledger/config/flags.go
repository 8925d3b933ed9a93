package config

import "github.com/spf13/pflag"

// FlagConfig is the flag that names the YAML configuration file.
const FlagConfig = "config"

// flagKeys maps each configuration flag to its key.
var flagKeys = map[string]string{
	"node-id":       "node_id",
	"log-level":     "log.level",
	"log-format":    "log.format",
	"http-addr":     "http.addr",
	"postgres-url":  "postgres.url",
	"mysql-dsn":     "mysql.server_dsn",
	"redis-addr":    "redis.addr",
	"kafka-brokers": "kafka.brokers",
}

// RegisterFlags adds --config and the flags for the most-used keys to fs. A flag overrides the
// file and the environment only when given on the command line.
func RegisterFlags(fs *pflag.FlagSet) {
	d := Defaults()
	fs.String(FlagConfig, "", "YAML configuration file (optional)")
	fs.String("node-id", "", "node id (default: host name)")
	fs.String("log-level", "", "log level: debug, info, warn, error (default "+d.Log.Level+")")
	fs.String("log-format", "", "log format: text or json (default "+d.Log.Format+")")
	fs.String("http-addr", "", "HTTP listen address (default "+d.HTTP.Addr+")")
	fs.String("postgres-url", "", "PostgreSQL URL of the event store (default "+d.Postgres.URL+")")
	fs.String("mysql-dsn", "", "MySQL server DSN for tenant read models (default "+d.MySQL.ServerDSN+")")
	fs.String("redis-addr", "", "Redis address (default "+d.Redis.Addr+")")
	fs.StringSlice("kafka-brokers", nil, "Kafka seed brokers, comma-separated (default: embedded broker on "+d.Kafka.Embedded.Addr+")")
}
