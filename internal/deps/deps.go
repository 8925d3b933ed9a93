//go:build tools

// Package deps pins modules that are wired in later packages.
package deps
import (
_ "github.com/twmb/franz-go/pkg/kfake"
_ "github.com/twmb/franz-go/pkg/kgo"
_ "github.com/ThreeDotsLabs/watermill"
_ "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
_ "github.com/IBM/sarama"
_ "github.com/jackc/pgx/v5"
_ "github.com/go-sql-driver/mysql"
_ "github.com/redis/go-redis/v9"
_ "github.com/gobwas/ws"
_ "github.com/coder/websocket"
_ "github.com/google/uuid"
_ "github.com/pressly/goose/v3"
_ "github.com/knadh/koanf/v2"
_ "github.com/knadh/koanf/providers/file"
_ "github.com/knadh/koanf/providers/env/v2"
_ "github.com/knadh/koanf/providers/posflag"
_ "github.com/knadh/koanf/providers/confmap"
_ "github.com/knadh/koanf/parsers/yaml"
_ "github.com/spf13/cobra"
_ "github.com/prometheus/client_golang/prometheus"
_ "github.com/danielgtaylor/huma/v2"
_ "github.com/go-redis/redis_rate/v10"
_ "github.com/schollz/progressbar/v3"
_ "github.com/HdrHistogram/hdrhistogram-go"
_ "gopkg.in/yaml.v3"
)
