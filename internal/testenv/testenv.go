package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // MySQL driver for database/sql
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Service addresses, overridable with IM_TEST_* environment variables.
var (
	PostgresURL = env("IM_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	MySQLDSN    = env("IM_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/")
	RedisAddr   = env("IM_TEST_REDIS_ADDR", "127.0.0.1:6379")
)

const (
	startPostgres = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
	startMySQL    = "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
	startRedis    = `redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log`
)

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// UniqueName returns prefix + "_" + 10 random hex characters, lower case, usable as a database
// name, tenant id or key prefix.
func UniqueName(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return strings.ToLower(prefix) + "_" + hex.EncodeToString(b)
}

// Postgres creates a fresh database and returns its URL; the database is dropped at cleanup.
func Postgres(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresURL)
	if err != nil {
		t.Fatalf("PostgreSQL is not reachable at %s (%v); start it with: %s", PostgresURL, err, startPostgres)
	}
	defer conn.Close(ctx)
	name := UniqueName("imt")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, PostgresURL)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	cfg, err := pgx.ParseConfig(PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// MySQLServer checks that MySQL/MariaDB answers and returns the server DSN (no database), with
// parseTime and multiStatements enabled. Databases a test creates through it are its own to drop;
// use MySQLDatabasePrefix for names.
func MySQLServer(t testing.TB) string {
	t.Helper()
	dsn := MySQLDSN + "?parseTime=true&multiStatements=true"
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("MySQL/MariaDB is not reachable at %s (%v); start it with: %s", MySQLDSN, err, startMySQL)
	}
	return dsn
}

// DropMySQLDatabasesAtCleanup drops every MySQL database whose name starts with prefix when the
// test ends.
func DropMySQLDatabasesAtCleanup(t testing.TB, prefix string) {
	t.Helper()
	dsn := MySQLServer(t)
	t.Cleanup(func() {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return
		}
		defer db.Close()
		rows, err := db.Query("SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?", prefix+"%")
		if err != nil {
			return
		}
		var names []string
		for rows.Next() {
			var n string
			if rows.Scan(&n) == nil {
				names = append(names, n)
			}
		}
		rows.Close()
		for _, n := range names {
			_, _ = db.Exec("DROP DATABASE IF EXISTS `" + n + "`")
		}
	})
}

// Redis returns a client to the local Redis and a unique key prefix ending in ':'. Keys under
// the prefix are deleted at cleanup and the client closed.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis is not reachable at %s (%v); start it with: %s", RedisAddr, err, startRedis)
	}
	prefix := UniqueName("imt") + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				c.Del(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		_ = c.Close()
	})
	return c, prefix
}

// Kafka starts an embedded Kafka-protocol broker (kfake) on a free loopback port and returns its
// seed broker addresses. It is closed at cleanup. Topics are auto-created on first use.
func Kafka(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start embedded Kafka broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}
