package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob" // s3:// bucket URLs (S3 and S3-compatible stores)
)

// openBucket opens the file store: files.bucket_url when set (s3://bucket?region=...&endpoint=...
// for S3-compatible stores, file:///path), else a local directory files.dir, created if missing.
func openBucket(ctx context.Context, url, dir string) (*blob.Bucket, error) {
	if url != "" {
		b, err := blob.OpenBucket(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("files.bucket_url: %w", err)
		}
		return b, nil
	}
	if dir == "" {
		dir = defaultFilesDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("files.dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("files.dir: %w", err)
	}
	b, err := fileblob.OpenBucket(abs, &fileblob.Options{NoTempDir: false})
	if err != nil {
		return nil, fmt.Errorf("files.dir: %w", err)
	}
	return b, nil
}

// defaultFilesDir is $XDG_STATE_HOME/imledger/files, else ~/.local/state/imledger/files, else
// under the temporary directory: where the embedded broker keeps its data too.
func defaultFilesDir() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			base = filepath.Join(home, ".local", "state")
		} else {
			base = os.TempDir()
		}
	}
	return filepath.Join(base, "imledger", "files")
}
