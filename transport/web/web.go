package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// static is the page; sdk/src is the client SDK it runs on (the npm package's sources, served
// as they are at /sdk/): one client implementation for the page and for other clients.
//
//go:embed static sdk/src
var static embed.FS

// contentTypes lists the file kinds the page is made of; a file of another kind is not served.
// They are fixed here rather than taken from the system's MIME table, which varies by host.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// asset is one embedded file, read once at start-up.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// handler serves the embedded assets.
type handler struct {
	assets map[string]asset // by URL path, "/" for index.html
}

// Handler returns the handler of the demo page: GET or HEAD of "/" (index.html), of the page's
// files ("/app.js", "/app.css", ...) and of the SDK's modules the page imports ("/sdk/index.js",
// ...). Any other path is 404 and any other method 405, so it can be
// mounted at "/" of a ServeMux as the fallback of the API's routes. Every answer carries a strict
// Content-Security-Policy (scripts, styles and images from the page's origin only; connections
// to the page's origin only, over HTTP or WebSocket; no frames, plugins or inline code),
// X-Content-Type-Options nosniff and no-referrer. Files are revalidated by a content-hash ETag.
func Handler() http.Handler {
	h, err := newHandler(static)
	if err != nil {
		// The files are embedded at build time; a failure here is a broken build.
		panic(err)
	}
	return h
}

func newHandler(files fs.FS) (*handler, error) {
	h := &handler{assets: map[string]asset{}}
	for _, dir := range []struct{ dir, url string }{{"static", "/"}, {"sdk/src", "/sdk/"}} {
		if err := h.add(files, dir.dir, dir.url); err != nil {
			return nil, err
		}
	}
	if _, ok := h.assets["/"]; !ok {
		return nil, fmt.Errorf("web: static/index.html is missing")
	}
	return h, nil
}

// add reads every file under dir of files into the assets, served under the URL path prefix;
// index.html of the page's own directory is "/".
func (h *handler) add(files fs.FS, dir, prefix string) error {
	root, err := fs.Sub(files, dir)
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	return fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("web: %s/%s: no content type for this kind of file", dir, name)
		}
		body, err := fs.ReadFile(root, name)
		if err != nil {
			return fmt.Errorf("web: %w", err)
		}
		sum := sha256.Sum256(body)
		urlPath := prefix + name
		if urlPath == "/index.html" {
			urlPath = "/"
		}
		h.assets[urlPath] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy(r.Host))
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	a, ok := h.assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	// ServeContent answers If-None-Match with 304 and HEAD without a body; a zero modification
	// time leaves Last-Modified out.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// contentSecurityPolicy is the page's policy. Connections may go to the page's own origin:
// 'self' covers the REST API and, in browsers implementing CSP level 3, WebSocket URLs of the same
// host; the explicit ws:// and wss:// sources of the request's host cover the others. A host that
// is not a plain host[:port] adds nothing, so a forged Host header cannot widen the policy.
func contentSecurityPolicy(host string) string {
	connect := "'self'"
	if plainHost(host) {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src " + connect + "; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

// plainHost reports whether host is a DNS name or IP address with an optional port: letters,
// digits, '.', '-', ':' and the brackets of an IPv6 literal, nothing that could end a CSP source.
func plainHost(host string) bool {
	if host == "" || len(host) > 255 {
		return false
	}
	return strings.IndexFunc(host, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '-' || c == ':' || c == '[' || c == ']')
	}) < 0
}
