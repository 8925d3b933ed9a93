package ws

import (
	"bytes"
	_ "embed" // the AsyncAPI document
	"net/http"
)

// AsyncAPIPath is where a node serves the AsyncAPI document of this protocol, beside the REST
// API's /openapi.json.
const AsyncAPIPath = "/asyncapi.json"

// asyncAPI is the AsyncAPI 3.0 document of the protocol, checked in beside the code it describes.
// A test in cmd/imledger drives a real server through every frame kind and validates each frame
// against it; asyncapi_internal_test.go keeps it in step with the frame types and reasons here.
//
//go:embed asyncapi.json
var asyncAPI []byte

// AsyncAPIDocument returns the AsyncAPI 3.0 document (JSON) of the WebSocket protocol: every
// client frame, every server frame with its codes, params and stable reasons. The caller gets
// its own copy.
func AsyncAPIDocument() []byte { return bytes.Clone(asyncAPI) }

// AsyncAPIHandler serves the AsyncAPI document as application/json to GET and HEAD (HEAD without
// a body) and answers any other method 405. The document holds nothing secret, so it asks for no
// credentials.
func AsyncAPIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the AsyncAPI document is read-only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(asyncAPI)
	})
}
