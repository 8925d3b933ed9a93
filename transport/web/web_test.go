package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/imledger/imledger/transport/web"
)

func serve(t *testing.T, method, target string, header http.Header) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	web.Handler().ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServesThePageWithContentTypes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="app.js"></script>`},
		{"/app.js", "text/javascript; charset=utf-8", "from './sdk/index.js'"},
		{"/sdk/index.js", "text/javascript; charset=utf-8", "export { Client"},
		{"/sdk/client.js", "text/javascript; charset=utf-8", "export class Client"},
		{"/app.css", "text/css; charset=utf-8", "#messages"},
		{"/favicon.svg", "image/svg+xml", "<svg"},
	} {
		res := serve(t, http.MethodGet, c.path, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", c.path, res.StatusCode)
		}
		if got := res.Header.Get("Content-Type"); got != c.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.contentType)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", c.path, got)
		}
		if b := body(t, res); !strings.Contains(b, c.contains) {
			t.Errorf("GET %s: body lacks %q", c.path, c.contains)
		}
	}
}

func TestContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	res := serve(t, http.MethodGet, "http://chat.example:8080/", nil)
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{
		"default-src 'none'", "script-src 'self';", "style-src 'self';",
		"connect-src 'self' ws://chat.example:8080 wss://chat.example:8080;", "frame-ancestors 'none'", "base-uri 'none'",
	} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "data:", "http:", "https:"} {
		if strings.Contains(csp, bad) {
			t.Errorf("CSP %q allows %q", csp, bad)
		}
	}

	// A Host that could inject sources or directives adds nothing to connect-src.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Host = "evil.example;script-src"
	w := httptest.NewRecorder()
	web.Handler().ServeHTTP(w, r)
	csp = w.Result().Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self';") || strings.Contains(csp, "evil") {
		t.Errorf("forged Host: CSP %q", csp)
	}
}

func TestOnlyThePageIsServed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/nope", http.StatusNotFound},
		{http.MethodGet, "/static/app.js", http.StatusNotFound},
		{http.MethodGet, "/sdk/src/index.js", http.StatusNotFound},
		{http.MethodGet, "/sdk/package.json", http.StatusNotFound},
		{http.MethodGet, "/sdk/../app.js", http.StatusNotFound},
		{http.MethodGet, "/v1/im/anything", http.StatusNotFound},
		{http.MethodGet, "/../web.go", http.StatusNotFound},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/app.js", http.StatusMethodNotAllowed},
		{http.MethodHead, "/app.js", http.StatusOK},
	} {
		res := serve(t, c.method, c.path, nil)
		if res.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, res.StatusCode, c.status)
		}
		if res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: no Content-Security-Policy", c.method, c.path)
		}
	}
	if res := serve(t, http.MethodHead, "/", nil); body(t, res) != "" {
		t.Error("HEAD / returned a body")
	}
}

func TestETagRevalidation(t *testing.T) {
	t.Parallel()
	res := serve(t, http.MethodGet, "/app.js", nil)
	etag := res.Header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) {
		t.Fatalf("ETag %q", etag)
	}
	if res := serve(t, http.MethodGet, "/app.js", http.Header{"If-None-Match": {etag}}); res.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d, want 304", res.StatusCode)
	}
	if res := serve(t, http.MethodGet, "/app.js", http.Header{"If-None-Match": {`"other"`}}); res.StatusCode != http.StatusOK {
		t.Fatalf("stale If-None-Match: %d, want 200", res.StatusCode)
	}
}

// TestPageHasNoInlineCodeOrHTMLSinks guards the two promises the CSP and the XSS rule rest on:
// the HTML carries no inline script, style or event handler (the policy would block them), and
// the script never turns strings into markup or code.
func TestPageHasNoInlineCodeOrHTMLSinks(t *testing.T) {
	t.Parallel()
	html := body(t, serve(t, http.MethodGet, "/", nil))
	for _, re := range []string{`<script(\s[^>]*)?>[^<]`, `\sstyle=`, `<style`, `\son[a-z]+=`, `javascript:`} {
		if loc := regexp.MustCompile(re).FindStringIndex(html); loc != nil {
			t.Errorf("index.html matches %s at %q", re, html[loc[0]:min(loc[1]+20, len(html))])
		}
	}
	for _, script := range pageScripts(t) {
		js := body(t, serve(t, http.MethodGet, script, nil))
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
			"new Function", "setTimeout('", `setTimeout("`, "createContextualFragment", "DOMParser"} {
			if strings.Contains(js, sink) {
				t.Errorf("%s uses %s", script, sink)
			}
		}
	}
}

// pageScripts lists the page's scripts: app.js and every module of the SDK it imports, found by
// following the imports from app.js, so a module added to the SDK is checked too.
func pageScripts(t *testing.T) []string {
	t.Helper()
	imports := regexp.MustCompile(`(?m)^(?:import|export)\b[^'"]*['"](\./[^'"]+)['"]`)
	seen := map[string]bool{}
	queue := []string{"/app.js"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		res := serve(t, http.MethodGet, p, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s (imported): %d", p, res.StatusCode)
		}
		for _, m := range imports.FindAllStringSubmatch(body(t, res), -1) {
			queue = append(queue, path.Join(path.Dir(p), m[1]))
		}
	}
	if !seen["/sdk/client.js"] || !seen["/sdk/topicsync.js"] {
		t.Fatalf("the imports of app.js reach %v, not the SDK's client", seen)
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	return out
}
