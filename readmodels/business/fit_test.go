package business_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/imledger/imledger/domain"
)

// withFields returns env with fields of its payload replaced as given, bypassing the domain:
// values an older build or another writer could have stored.
func withFields(t *testing.T, env domain.Envelope, fields map[string]any) domain.Envelope {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		p[k] = v
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	env.Payload = b
	return env
}

// TestValuesTheColumnsCannotHoldAreFitted applies events whose text is longer than its column and
// whose times are beyond DATETIME, among ordinary ones in the same batch: each row holds what its
// columns can, and the stream's later events apply.
func TestValuesTheColumnsCannotHoldAreFitted(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	longName := strings.Repeat("é", 100)
	created := w.create(7, 1, "team")
	created[0] = withFields(t, created[0], map[string]any{"name": longName, "intro": strings.Repeat("i", 600)})
	joined := w.join(7, 2, 3)
	muted := w.mute(7, 1, 2, time.Now().Add(time.Hour))
	// Go's JSON reads years 0-9999; MySQL documents DATETIME from 1000 on.
	muted[0] = withFields(t, muted[0], map[string]any{"until": "0500-01-01T00:00:00Z"})
	nick := w.nick(4, "four", "")
	nick[len(nick)-1] = withFields(t, nick[len(nick)-1], map[string]any{"nickname": strings.Repeat("n", 40), "signature": strings.Repeat("s", 200)})
	later := w.rename(7, 1, "renamed later")
	res := f.apply(ctx, t, concat(created, joined, muted, nick, later)...)
	if res.Applied != len(created)+len(joined)+len(muted)+len(nick)+len(later) {
		t.Fatalf("applied %d", res.Applied)
	}
	db := f.mysqlOnly(t)
	g, err := db.Group(ctx, f.tenant, 7)
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "renamed later" || g.MemberCount != 3 {
		t.Errorf("group after the later events: %+v", g)
	}
	var until time.Time
	if err := f.db(ctx, t).QueryRowContext(ctx, "SELECT muted_until FROM im_group_members WHERE group_id = 7 AND user_id = 2").Scan(&until); err != nil || until.Year() != 1000 {
		t.Errorf("a mute until the year 500 is stored as %v, %v; want 1000-01-01", until, err)
	}
	u, err := db.User(ctx, f.tenant, 4)
	if err != nil || utf8.RuneCountInString(u.Nickname) != 32 || len(u.Signature) != 128 {
		t.Errorf("profile %+v, %v", u, err)
	}
	// The name and intro were cut to their columns before the rename replaced them.
	w2 := newWorld(t, f.tenant)
	created2 := w2.create(8, 1, "x")
	created2[0] = withFields(t, created2[0], map[string]any{"name": longName, "intro": strings.Repeat("i", 600)})
	f.apply(ctx, t, created2...)
	g, err = db.Group(ctx, f.tenant, 8)
	if err != nil || g.Name != strings.Repeat("é", 64) || len(g.Intro) != 512 {
		t.Errorf("group 8: name %q, intro of %d characters, %v", g.Name, len(g.Intro), err)
	}
}
