package files

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/imledger/imledger/domain"
)

// SignedURL is a URL of object storage a client uses without a token until ExpiresAt.
type SignedURL struct {
	URL       string
	Method    string
	ExpiresAt time.Time
}

// DirectUpload returns the signed URL a pending file's uploader PUTs the bytes to, straight into
// object storage, before calling Complete. ok is false, with no error, when the bucket cannot
// sign upload URLs (a local directory) or Config.DirectURLs is off: the client uploads through
// the API then. A file that is not pending, or a caller who is not its uploader, gets ok false.
//
// The URL writes the file's object key; it can be used again until it expires, so Complete
// copies the object to a key of its own (inside the store: the bytes do not pass through the
// node) before it hashes and records it, and what a later PUT writes is never served.
func (s *Service) DirectUpload(ctx context.Context, f domain.FileRecord, caller domain.UserID) (SignedURL, bool, error) {
	if !s.cfg.DirectURLs || f.Status != domain.FileStatusPending || f.Uploader != caller {
		return SignedURL{}, false, nil
	}
	size := f.Size
	return s.sign(ctx, f.ObjectKey, http.MethodPut, func(as func(any) bool) error {
		var in *s3.PutObjectInput
		if as(&in) {
			in.ContentLength = aws.Int64(size) // signed: a body of another size is refused by the store
		}
		return nil
	})
}

// DirectDownload returns a signed URL that serves an uploaded file's bytes from object storage
// with its content type and an attachment disposition. ok is false, with no error, when the
// bucket cannot sign download URLs or Config.DirectURLs is off: the node's signed download path
// serves the file then. The caller checks the file may be served (not rejected, uploaded).
func (s *Service) DirectDownload(ctx context.Context, f domain.FileRecord, disposition string) (SignedURL, bool, error) {
	if !s.cfg.DirectURLs || f.Status != domain.FileStatusUploaded {
		return SignedURL{}, false, nil
	}
	ctype := f.ContentType
	return s.sign(ctx, f.ObjectKey, http.MethodGet, func(as func(any) bool) error {
		var in *s3.GetObjectInput
		if as(&in) {
			in.ResponseContentType = aws.String(ctype)
			in.ResponseContentDisposition = aws.String(disposition)
		}
		return nil
	})
}

// sign asks the bucket for a signed URL of key; ok is false when the bucket does not sign them.
func (s *Service) sign(ctx context.Context, key, method string, before func(func(any) bool) error) (SignedURL, bool, error) {
	exp := s.deps.Now().Add(s.cfg.URLTTL).Truncate(time.Second)
	u, err := s.deps.Bucket.SignedURL(ctx, key, &blob.SignedURLOptions{Method: method, Expiry: s.cfg.URLTTL, BeforeSign: before})
	if gcerrors.Code(err) == gcerrors.Unimplemented {
		return SignedURL{}, false, nil
	}
	if err != nil {
		return SignedURL{}, false, domain.Retryable("sign object URL", err)
	}
	return SignedURL{URL: u, Method: method, ExpiresAt: exp}, true, nil
}
