package rest

import (
	"encoding/json"
	"net/http"
	"path"
	"strings"
)

// RouteErrors wraps mux so that the answers given when no route takes a request are the JSON
// envelope like every other answer: 404 not_found for an unknown path and 405
// method_not_allowed (header Allow) for a path served with other methods. It replaces the
// text/plain 404 and 405 answers of the mux itself and of the handlers of catch-all patterns
// ("/", "/docs/": http.NotFound, http.Error); an answer of a specific route passes untouched.
// It clears the request's Pattern of the answers it replaces, so metrics middleware outside it
// counts them under one fixed route label, not under the catch-all's pattern.
func RouteErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect && cleanPath(r.URL.Path) != r.URL.Path {
			// The mux would answer a text/html redirect to the cleaned path ("/v1//im/unread",
			// "/v1/im/topics/grp1/../grp2"): no route has such a path, so it is an unknown route.
			writeRouteError(w, r, http.StatusNotFound, "")
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" && !strings.HasSuffix(pattern, "/") {
			mux.ServeHTTP(w, r) // a specific route: its answer is its own (and may hijack)
			return
		}
		mux.ServeHTTP(&routeErrorWriter{ResponseWriter: w, r: r, mux: mux}, r)
	})
}

// routeErrorWriter replaces a text/plain 404 or 405 with the envelope.
type routeErrorWriter struct {
	http.ResponseWriter
	r        *http.Request
	mux      *http.ServeMux
	wrote    bool
	replaced bool
}

func (w *routeErrorWriter) WriteHeader(code int) {
	if w.wrote {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.wrote = true
	plain := strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain")
	if !plain || (code != http.StatusNotFound && code != http.StatusMethodNotAllowed) {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	allow := w.Header().Get("Allow")
	if code == http.StatusNotFound {
		if methods := allowedMethods(w.mux, w.r); len(methods) > 0 {
			code, allow = http.StatusMethodNotAllowed, strings.Join(methods, ", ")
		}
	}
	w.r.Pattern = "" // counted as unmatched, whatever catch-all pattern took it
	writeRouteError(w.ResponseWriter, w.r, code, allow)
}

// writeRouteError answers r with the envelope of a 404 not_found or a 405 method_not_allowed
// (header Allow: allow).
func writeRouteError(w http.ResponseWriter, r *http.Request, code int, allow string) {
	id := r.Header.Get(HeaderRequestID)
	if !requestIDRe.MatchString(id) {
		id = newRequestID()
	}
	var e *Error
	if code == http.StatusNotFound {
		e = newError(id, code, ReasonNotFound, "no such route: "+r.URL.Path, nil)
	} else {
		e = newError(id, code, ReasonMethodNotAllowed, "method "+r.Method+" is not allowed here", map[string]any{"allow": allow})
	}
	body, _ := json.Marshal(e)
	body = append(body, '\n') // as every answer ends
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set(HeaderRequestID, id)
	if allow != "" {
		h.Set("Allow", allow)
	}
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// cleanPath is p as http.ServeMux cleans it before matching (its unexported cleanPath): rooted,
// without "." and ".." elements or repeated slashes, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			np = p
		} else {
			np += "/"
		}
	}
	return np
}

func (w *routeErrorWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(b), nil // the text the envelope replaced
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *routeErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// allowedMethods returns the methods for which mux has a specific route of r's path.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && !strings.HasSuffix(pattern, "/") {
			out = append(out, m)
		}
	}
	return out
}
