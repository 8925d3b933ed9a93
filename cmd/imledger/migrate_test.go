package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/internal/testenv"
)

// missingDatabaseURL returns the URL of a database that does not exist yet on the test server;
// it is dropped at cleanup.
func missingDatabaseURL(t *testing.T) string {
	t.Helper()
	name := testenv.UniqueName("imt_migrate")
	cc, err := pgx.ParseConfig(testenv.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, testenv.PostgresURL); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cc.User, cc.Host, cc.Port, name)
}

func TestMigrateCreatesTheDatabaseAndIsIdempotent(t *testing.T) {
	t.Parallel()
	url := missingDatabaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 2 {
		root := newRootCmd()
		var out strings.Builder
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"migrate", "--postgres-url", url, "--log-format", "json"})
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		if created := strings.Contains(out.String(), "created the event store database"); created != (i == 0) {
			t.Errorf("run %d: created=%v, want %v:\n%s", i, created, i == 0, out.String())
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'events'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("events table after migrate: n=%d err=%v", n, err)
	}
}

func TestMigrateReportsABadURL(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	root.SetArgs([]string{"migrate", "--postgres-url", "postgres://u:s3cret@host:notaport/db"})
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(t.Context())
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "postgres.url") {
		t.Fatalf("want a postgres.url error without the password, got %v", err)
	}
}
