package progress

import (
	"bytes"
	"strings"
	"testing"
)

// A finished bar shows its label and count and ends its line.
func TestBarFinishes(t *testing.T) {
	var buf bytes.Buffer
	b := Bar(&buf, 10, "export")
	if err := b.Add(10); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "export") || !strings.Contains(out, "10/10") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("bar output = %q, want the label, 10/10 and a final newline", out)
	}
}
