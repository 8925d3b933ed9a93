package main

import (
	"path/filepath"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestComposeFileLoads loads compose.yaml as docker compose does (the whole file is interpolated
// whatever services are started), with and without IM_AUTH_SECRET and the admin keys: the
// recipe in docs/operators.md of starting only the dependencies must work without them, and with
// them the node gets its keys.
func TestComposeFileLoads(t *testing.T) {
	t.Parallel()
	file, err := filepath.Abs(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const producer = "id=ops-1;scope=*;actor=admin/ops;ed25519=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
	for _, tc := range []struct {
		name     string
		env      []string
		keys     string
		producer string
	}{
		{"without IM_AUTH_SECRET", nil, "", ""},
		{"with IM_AUTH_SECRET and the admin keys", []string{"IM_AUTH_SECRET=0123456789abcdef0123456789abcdef", "IM_ADMIN_PRODUCER_KEYS=" + producer},
			"k1=0123456789abcdef0123456789abcdef", producer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := cli.NewProjectOptions([]string{file}, cli.WithName("imledger"), cli.WithEnv(tc.env),
				cli.WithWorkingDirectory(filepath.Dir(file)))
			if err != nil {
				t.Fatal(err)
			}
			p, err := opts.LoadProject(t.Context())
			if err != nil {
				t.Fatalf("load compose.yaml: %v", err)
			}
			for _, name := range []string{"kafka", "postgres", "mysql", "redis", "imledger"} {
				if _, ok := p.Services[name]; !ok {
					t.Errorf("service %s missing", name)
				}
			}
			got := ""
			if v := p.Services["imledger"].Environment["IM_AUTH_KEYS"]; v != nil {
				got = *v
			}
			if got != tc.keys {
				t.Errorf("IM_AUTH_KEYS = %q, want %q", got, tc.keys)
			}
			got = ""
			if v := p.Services["imledger"].Environment["IM_ADMIN_PRODUCER_KEYS"]; v != nil {
				got = *v
			}
			if got != tc.producer {
				t.Errorf("IM_ADMIN_PRODUCER_KEYS = %q, want %q", got, tc.producer)
			}
		})
	}
}
