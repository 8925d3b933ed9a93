package testenv

import (
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// S3Bucket serves an in-memory S3-compatible object store over a real HTTP server of its own and
// opens a gocloud.dev/blob bucket of it the way files.bucket_url opens an S3-compatible store
// (path-style requests to an endpoint of its own, static credentials). Its signed URLs work
// with a plain HTTP client. Both are closed when the test ends.
func S3Bucket(t testing.TB) *blob.Bucket {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("files"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	client := s3.NewFromConfig(aws.Config{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-test-key", "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(srv.URL); o.UsePathStyle = true })
	b, err := s3blob.OpenBucket(t.Context(), client, "files", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
