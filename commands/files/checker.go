package files

import (
	"context"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// CheckInput is what a Checker sees of an uploaded file.
type CheckInput struct {
	Name        string
	ContentType string // as declared at creation
	Size        int64  // bytes stored
	Head        []byte // the first 512 bytes (fewer for a smaller file)
}

// Verdict is a Checker's answer.
type Verdict struct {
	Approved bool
	Reason   string // stable snake_case reason of a rejection
}

// Checker decides whether a file may be served (the file safety adapter of seed 004). It fails
// only when it could not decide (a remote service down): the check is then retried.
type Checker interface {
	Check(ctx context.Context, in CheckInput) (Verdict, error)
}

// Rules is the built-in Checker: it rejects a file larger than MaxBytes ("too_large"), one whose
// declared type is not allowed ("type_not_allowed"), and one whose bytes are of another kind than
// declared ("type_mismatch": e.g. HTML or a script declared as an image), sniffed with the WHATWG
// algorithm of net/http.
type Rules struct {
	MaxBytes     int64
	AllowedTypes []string
}

var _ Checker = Rules{}

// Check implements Checker.
func (r Rules) Check(_ context.Context, in CheckInput) (Verdict, error) {
	if r.MaxBytes > 0 && in.Size > r.MaxBytes {
		return Verdict{Reason: "too_large"}, nil
	}
	declared := mediaType(in.ContentType)
	if !allowed(declared, r.AllowedTypes) {
		return Verdict{Reason: "type_not_allowed"}, nil
	}
	sniffed := mediaType(http.DetectContentType(in.Head))
	if !compatible(declared, sniffed) {
		return Verdict{Reason: "type_mismatch"}, nil
	}
	return Verdict{Approved: true}, nil
}

// mediaType is the type/subtype of a content type, or "" when it does not parse (no file
// created since creation normalised its type has one; such a type is allowed by no list).
func mediaType(s string) string {
	t, _, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(t, "/") {
		return ""
	}
	return t
}

func allowed(t string, list []string) bool {
	if t == "" {
		return false
	}
	for _, a := range list {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == t || (strings.HasSuffix(a, "/*") && strings.HasPrefix(t, strings.TrimSuffix(a, "*"))) {
			return true
		}
	}
	return false
}

// compatible reports whether bytes sniffed as sniffed may be served as declared. Markup and
// scripts are only ever served as what they are; octet-stream (no signature known) is compatible
// with anything but a declared text type's markup check above.
func compatible(declared, sniffed string) bool {
	active := sniffed == "text/html" || sniffed == "text/xml" || sniffed == "application/javascript"
	if active {
		return declared == sniffed
	}
	if sniffed == "application/octet-stream" || declared == "application/octet-stream" {
		return true
	}
	major := func(t string) string { return strings.SplitN(t, "/", 2)[0] }
	if major(declared) == "text" {
		return major(sniffed) == "text"
	}
	if major(declared) == major(sniffed) {
		return true
	}
	// Containers the sniffer names generically (zip for office files, etc.).
	return declared == "application/pdf" && sniffed == "application/pdf" || strings.HasPrefix(sniffed, "application/") && major(declared) == "application"
}

// humanSize is a size for messages.
func humanSize(n int64) string { return strconv.FormatInt(n, 10) + " bytes" }
