package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imledger/imledger/internal/testenv"
)

// A --to-cursor of 0:0 is before every event: the range it closes is empty, so the export is
// refused and leaves nothing behind, instead of exporting the whole log as if no end were given.
func TestExportToCursorZeroIsRefused(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	if _, errOut, err := runCLI(t, "migrate", "--postgres-url", pg); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut)
	}
	out := filepath.Join(t.TempDir(), "new") + "/"
	stdout, _, err := runCLI(t, "export", "--postgres-url", pg, "--out", out, "--to-cursor", "0:0")
	if err == nil || !strings.Contains(err.Error(), "--to-cursor") {
		t.Errorf("export --to-cursor 0:0: %v, want a refusal naming --to-cursor\n%s", err, stdout)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused export created %s (%v)", out, err)
	}
}
