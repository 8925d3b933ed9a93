package migrations_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

// The admin trust migration redacts the passwords that failures recorded before it kept in
// plaintext, whatever the case of their keys and however the record was stored, and leaves the
// other commands' failures alone.
func TestAdminTrustMigrationRedactsStoredPasswords(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	const secret = "correct horse battery staple"
	rows := []struct {
		typ, command string
		keep         bool
	}{
		{"user.reset_password", `{"event_id":"e1","event_type":"user.reset_password","payload":{"user_id":"42","password":"` + secret + `"}}`, false},
		{"user.reset_password", `{"event_id":"e2","Payload":{"user_id":"42","PassWord":"` + secret + `"}}`, false},
		{"user.reset_password", `{"event_id":"e3","payload":"` + secret + `"}`, false},
		{"user.reset_password", `{"record_base64":"` + secret + `"}`, false},
		{"user.ban", `{"event_id":"e5","payload":{"user_id":"42","reason":"password ` + secret + `"}}`, true},
	}
	for i, r := range rows {
		if _, err := db.ExecContext(ctx, `INSERT INTO admin_command_failures (consumer_group, tenant_id, event_id, command_type, command, error, attempts)
			VALUES ('g', 'acme', gen_random_uuid(), $1, $2::jsonb, 'boom', 1)`, r.typ, r.command); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	if err := migrations.UpPostgres(ctx, db); err != nil {
		t.Fatal(err)
	}
	res, err := db.QueryContext(ctx, `SELECT command_type, command::text FROM admin_command_failures ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	i := 0
	for ; res.Next(); i++ {
		var typ, command string
		if err := res.Scan(&typ, &command); err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(command, secret); has != rows[i].keep {
			t.Errorf("row %d (%s) after the migration: %s", i, typ, command)
		}
		if !rows[i].keep && !strings.Contains(command, `{"redacted": true}`) {
			t.Errorf("row %d has no redaction marker: %s", i, command)
		}
		if i == 0 && !strings.Contains(command, `"user_id": "42"`) {
			t.Errorf("row 0 lost its other fields: %s", command)
		}
	}
	if i != len(rows) {
		t.Fatalf("%d rows after the migration, want %d", i, len(rows))
	}
	var keyID string
	if err := db.QueryRowContext(ctx, `SELECT column_default FROM information_schema.columns WHERE table_name = 'events' AND column_name = 'actor_key_id'`).Scan(&keyID); err != nil {
		t.Fatalf("events.actor_key_id: %v", err)
	}
}
