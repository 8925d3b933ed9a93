package config

import (
	"fmt"

	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/transport/push"
)

// PushConfig configures offline push reminders of serve: the push package's settings and
// whether this node produces tasks and runs the worker.
type PushConfig struct {
	// Config holds consumer_group, key_prefix, window, dedup_ttl, quiet_for, queue_size,
	// concurrency, max_pending, retry.*, jpush.*, webhook.*.
	push.Config `koanf:",squash"`
	// Run makes serve produce push tasks at commit and consume im.message.push. Nodes share the
	// consumer group, so any number may run it. Default true; ignored when MySQL is off.
	Run bool `koanf:"run"`
}

// FilesConfig configures file uploads of serve: the files package's settings, the bucket and
// whether this node serves them.
type FilesConfig struct {
	// Config holds max_bytes, allowed_types, url_ttl, gc_grace, gc_interval, check_group.
	files.Config `koanf:",squash"`
	// Run serves the file endpoints, runs the security check consumer and the collector.
	// Default true; ignored when MySQL is off.
	Run bool `koanf:"run"`
	// BucketURL opens the object store with gocloud.dev/blob: s3://bucket?region=r (add
	// &endpoint=http://host:9000&use_path_style=true for S3-compatible stores) or file:///dir.
	// Empty: the local directory Dir.
	BucketURL string `koanf:"bucket_url"`
	// Dir is the local directory the files are kept in when BucketURL is empty. Default
	// $XDG_STATE_HOME/imledger/files (~/.local/state/imledger/files), beside the embedded
	// broker's data.
	Dir string `koanf:"dir"`
	// SigningKey signs download URLs (HMAC-SHA256); every node must share it. Empty: derived
	// from the signing auth key, or random per process when there is none (the demo).
	SigningKey string `koanf:"signing_key"`
}

// PushSettings is the push section with the Redis key prefix resolved.
func (c Config) PushSettings() push.Config {
	p := c.Push.Config
	p.KeyPrefix = c.prefix(p.KeyPrefix)
	return p
}

func (c Config) validatePushFiles() error {
	if err := c.Push.Config.Validate(); err != nil {
		return err
	}
	if err := c.Files.Config.Validate(); err != nil {
		return fmt.Errorf("files: %w", err)
	}
	return nil
}
