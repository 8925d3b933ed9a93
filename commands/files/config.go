package files

import (
	"errors"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultMaxBytes     = 100 << 20
	DefaultURLTTL       = 5 * time.Minute
	DefaultGCGrace      = 24 * time.Hour
	DefaultGCInterval   = 10 * time.Minute
	DefaultCheckGroup   = "imledger.files.security.v1"
	DefaultAllowedTypes = "image/*,video/*,audio/*,text/plain,application/pdf,application/zip,application/octet-stream"
)

// Config tunes the file service.
type Config struct {
	// MaxBytes is the largest file accepted, at creation and by the security check. Default 100 MiB.
	MaxBytes int64 `koanf:"max_bytes"`
	// AllowedTypes are the content types the security check approves: exact types or "major/*".
	// Default image/*, video/*, audio/*, text/plain, application/pdf, application/zip,
	// application/octet-stream.
	AllowedTypes []string `koanf:"allowed_types"`
	// URLTTL is the life of a signed download URL. Default 5m.
	URLTTL time.Duration `koanf:"url_ttl"`
	// GCGrace is how long an unreferenced file is kept after its creation. Default 24h.
	GCGrace time.Duration `koanf:"gc_grace"`
	// GCInterval is how often the collector looks for unreferenced files. Default 10m.
	GCInterval time.Duration `koanf:"gc_interval"`
	// CheckGroup is the Kafka consumer group of the security check. Default "imledger.files.security.v1".
	CheckGroup string `koanf:"check_group"`
	// UploadMemory bounds the bytes of upload bodies a node holds while they arrive (the REST
	// API's, see rest.Config.UploadMemory). 0: twice MaxBytes; at least MaxBytes.
	UploadMemory int64 `koanf:"upload_memory"`
	// DirectURLs signs object-storage URLs for uploads and downloads when the bucket can sign
	// them (S3 and S3-compatible stores), so a file's bytes need not pass through a node; off, or
	// with a bucket that cannot sign (a local directory), uploads and downloads go through the
	// API. The binary's default is true.
	DirectURLs bool `koanf:"direct_urls"`
	// UploadIdleTimeout ends an upload whose body stops arriving this long (the REST API's,
	// see rest.Config.UploadIdleTimeout). 0: 30 s; negative: no limit.
	UploadIdleTimeout time.Duration `koanf:"upload_idle_timeout"`
}

func (c *Config) setDefaults() {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if len(c.AllowedTypes) == 0 {
		c.AllowedTypes = strings.Split(DefaultAllowedTypes, ",")
	}
	if c.URLTTL == 0 {
		c.URLTTL = DefaultURLTTL
	}
	if c.GCGrace == 0 {
		c.GCGrace = DefaultGCGrace
	}
	if c.GCInterval == 0 {
		c.GCInterval = DefaultGCInterval
	}
	if c.CheckGroup == "" {
		c.CheckGroup = DefaultCheckGroup
	}
}

// Validate reports settings out of range.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBytes < 0 || c.URLTTL < 0 || c.GCGrace < 0 || c.GCInterval < 0 {
		errs = append(errs, errors.New("files: max_bytes, url_ttl, gc_grace and gc_interval must not be negative"))
	}
	if c.UploadMemory != 0 && c.UploadMemory < c.MaxBytes {
		errs = append(errs, errors.New("files.upload_memory must not be below files.max_bytes"))
	}
	for _, t := range c.AllowedTypes {
		if !strings.Contains(t, "/") {
			errs = append(errs, errors.New("files.allowed_types: "+t+" is not a content type"))
		}
	}
	return errors.Join(errs...)
}
