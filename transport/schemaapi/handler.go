package schemaapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/imledger/imledger/domain/schemas"
	"github.com/imledger/imledger/internal/kafka"
)

// Path is where the schemas are served; the index is Path itself.
const Path = "/v1/schemas/"

// Handler serves GET (and HEAD) Path, the index as JSON, and Path+"<name>.json" (or without the
// suffix), one schema as application/schema+json; an unknown name is 404 and any other method
// 405. topics gives the Kafka topic names of the index.
func Handler(topics kafka.Config) http.Handler {
	index, err := json.MarshalIndent(NewIndex(topics, Path), "", "  ")
	if err != nil {
		// The index is built from static registrations and always marshals.
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "schemas are read-only", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Path)
		w.Header().Set("Cache-Control", "public, max-age=300")
		if name == "" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(append(index, '\n'))
			return
		}
		doc, err := schemas.Read(name)
		if errors.Is(err, schemas.ErrUnknown) {
			http.Error(w, "no schema named "+name, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(doc)
	})
}
