package msgstore_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// randomHistory interleaves the message events of a few conversations: sends, recalls, edits,
// deletions and read marks, each valid where it appears.
func randomHistory(t *testing.T, tenant domain.TenantID, rng *rand.Rand, n int) []domain.Envelope {
	t.Helper()
	type conv struct {
		topic   string
		users   []domain.UserID
		seq     int64
		version map[int64]int64
	}
	convs := []*conv{
		{topic: "grp1", users: []domain.UserID{1, 2, 3}, version: map[int64]int64{}},
		{topic: "grp2", users: []domain.UserID{2, 3, 4}, version: map[int64]int64{}},
		{topic: "p2p1_2", users: []domain.UserID{1, 2}, version: map[int64]int64{}},
		{topic: "p2p2_3", users: []domain.UserID{2, 3}, version: map[int64]int64{}},
	}
	var out []domain.Envelope
	for len(out) < n {
		c := convs[rng.IntN(len(convs))]
		u := c.users[rng.IntN(len(c.users))]
		r := rng.IntN(10)
		switch {
		case c.seq == 0 || r < 4:
			c.seq++
			c.version[c.seq] = 1
			out = append(out, rmtest.Sent(t, tenant, c.topic, c.seq, u, "m"))
		case r == 4:
			out = append(out, rmtest.Recalled(t, tenant, c.topic, 1+rng.Int64N(c.seq), u))
		case r == 5:
			s := 1 + rng.Int64N(c.seq)
			c.version[s]++
			out = append(out, rmtest.Edited(t, tenant, c.topic, s, u, c.version[s], "e"))
		case r == 6:
			out = append(out, rmtest.Deleted(t, tenant, c.topic, 1+rng.Int64N(c.seq), u))
		default:
			read := rng.Int64N(c.seq + 1)
			out = append(out, rmtest.ReadMarked(t, tenant, c.topic, u, read, read+rng.Int64N(2)))
		}
	}
	return out
}

// Applying a history in a few large batches, where ops of different conversations are regrouped
// by action, or bulk-loading it, leaves the rows that applying it one event at a time leaves.
func TestBatchesRegroupedByActionEndAsOneByOne(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	db := f.db(ctx, t)
	one := f.tables.WithSuffix("_one")
	if err := msgstore.CreateTablesLike(ctx, db, f.tables, one); err != nil {
		t.Fatal(err)
	}
	bl, err := f.store.StartBulkLoad(ctx, f.tenant, f.tables, f.tables.WithSuffix("_bulk"))
	if err != nil {
		t.Fatal(err)
	}
	history := randomHistory(t, f.tenant, rand.New(rand.NewPCG(7, 11)), 400)
	for _, e := range history {
		if _, err := f.store.Apply(ctx, f.tenant, group, one, []domain.Envelope{e}); err != nil {
			t.Fatal(err)
		}
	}
	for start := 0; start < len(history); start += 150 {
		batch := history[start:min(start+150, len(history))]
		if _, err := f.store.Apply(ctx, f.tenant, group, f.tables, batch); err != nil {
			t.Fatal(err)
		}
		if _, err := bl.Apply(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  func(msgstore.Tables) string
		order string
	}{
		{func(t msgstore.Tables) string { return t.GroupMessages }, "topic, seqid"},
		{func(t msgstore.Tables) string { return t.DirectMessages }, "topic, seqid"},
		{func(t msgstore.Tables) string { return t.ReadMarks }, "user_id, topic"},
		{func(t msgstore.Tables) string { return t.Deletions }, "user_id, topic, seqid"},
	} {
		want := tableRows(ctx, t, db, tc.name(one), tc.order)
		if len(want) == 0 {
			t.Fatalf("%s is empty", tc.name(one))
		}
		for _, got := range []msgstore.Tables{f.tables, bl.Tables()} {
			if rows := tableRows(ctx, t, db, tc.name(got), tc.order); strings.Join(rows, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s differs from one event at a time:\n%s\n----\n%s", tc.name(got), strings.Join(rows, "\n"), strings.Join(want, "\n"))
			}
		}
	}
}
