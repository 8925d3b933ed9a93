// Package schemas embeds the checked-in JSON Schemas of the stream contract: envelope.json and
// one <event_type>.json per registered event type, generated from the Go types of package domain
// (see domain.EventSchema; the domain tests keep the files equal to the types). The binary serves
// them over HTTP and prints them with `imledger schema`; readers need no Go code to validate a
// stream.
package schemas

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// FS returns the schema files, flat, named <name>.json.
func FS() fs.FS { return files }

// ErrUnknown is the error of a schema name that is not embedded.
var ErrUnknown = errors.New("no such schema")

// Envelope is the name of the envelope's schema.
const Envelope = "envelope"

// Names lists the embedded schemas without the .json suffix, sorted: "envelope" and every event
// type, current and superseded.
func Names() []string {
	entries, _ := files.ReadDir(".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Read returns the schema called name ("envelope" or an event type; a trailing ".json" is
// accepted). Errors: ErrUnknown.
func Read(name string) ([]byte, error) {
	name = strings.TrimSuffix(name, ".json")
	if name == "" || strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("schema %q: %w", name, ErrUnknown)
	}
	b, err := files.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, ErrUnknown)
	}
	return b, nil
}
