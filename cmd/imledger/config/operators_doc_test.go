package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/imledger/imledger/cmd/imledger/config"
)

// TestOperatorsDocDocumentsEveryKey keeps the configuration reference in docs/operators.md
// complete.
func TestOperatorsDocDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../docs/operators.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, k := range config.Keys() {
		row := "| `" + k.Name + "` | `" + k.Env + "` |"
		if !strings.Contains(doc, row) {
			t.Errorf("docs/operators.md has no configuration row for %s (%s)", k.Name, k.Env)
		}
	}
}
