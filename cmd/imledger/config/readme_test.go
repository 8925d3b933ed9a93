package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/imledger/imledger/cmd/imledger/config"
)

// TestREADMEDocumentsEveryKey keeps the configuration reference in README.md complete.
func TestREADMEDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, k := range config.Keys() {
		row := "| `" + k.Name + "` | `" + k.Env + "` |"
		if !strings.Contains(readme, row) {
			t.Errorf("README.md has no configuration row for %s (%s)", k.Name, k.Env)
		}
	}
}
