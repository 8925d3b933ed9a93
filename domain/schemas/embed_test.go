package schemas_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/schemas"
)

func TestEverySchemaIsEmbedded(t *testing.T) {
	t.Parallel()
	names := schemas.Names()
	want := []string{schemas.Envelope}
	for _, info := range domain.EventTypes() {
		want = append(want, string(info.Type))
	}
	for _, n := range want {
		if !slices.Contains(names, n) {
			t.Errorf("schema %s is not embedded", n)
			continue
		}
		raw, err := schemas.Read(n + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Title string `json:"title"`
		}
		if err := json.Unmarshal(raw, &s); err != nil || s.Title != n {
			t.Errorf("schema %s: title %q, %v", n, s.Title, err)
		}
	}
	if len(names) != len(want) {
		t.Errorf("%d schemas embedded, want %d", len(names), len(want))
	}
	for _, bad := range []string{"", "nope.v1", "../envelope", "envelope/x"} {
		if _, err := schemas.Read(bad); !errors.Is(err, schemas.ErrUnknown) {
			t.Errorf("Read(%q) = %v, want ErrUnknown", bad, err)
		}
	}
}
