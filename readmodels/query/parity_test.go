package query_test

import (
	"encoding/json"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/query"
)

// A page reads the same from Redis and from MySQL, field for field, whatever happened to its
// messages.
func TestRedisAndMySQLPagesAreIdentical(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	withHead := rmtest.Sent(t, f.tenant, "grp7", 4, 30, "with head")
	var p domain.MessageSent
	_ = withHead.Decode(&p)
	p.Head = domain.Head{Mentions: []domain.UserID{10, 20}, ReplySeq: 1}
	withHead.Payload, _ = json.Marshal(p)
	f.both(ctx, t,
		rmtest.Sent(t, f.tenant, "grp7", 1, 10, "plain"),
		rmtest.Sent(t, f.tenant, "grp7", 2, 20, "to edit"),
		rmtest.Sent(t, f.tenant, "grp7", 3, 10, "to recall"),
		withHead,
	)
	f.both(ctx, t, rmtest.Edited(t, f.tenant, "grp7", 2, 20, 2, "edited"), rmtest.Recalled(t, f.tenant, "grp7", 3, 10))

	fromRedis := f.history(ctx, t, f.cached, "grp7", 99, query.HistoryQuery{})
	fromMySQL := f.history(ctx, t, f.mysql, "grp7", 99, query.HistoryQuery{})
	if fromRedis.Source != query.SourceRedis || fromMySQL.Source != query.SourceMySQL {
		t.Fatalf("sources %s and %s", fromRedis.Source, fromMySQL.Source)
	}
	a, _ := json.Marshal(fromRedis)
	b, _ := json.Marshal(fromMySQL)
	if string(a) != string(b) {
		t.Fatalf("pages differ:\nredis %s\nmysql %s", a, b)
	}
	if m := fromMySQL.Messages[3]; m.Head == nil || len(m.Head.Mentions) != 2 || m.Head.ReplySeq != 1 {
		t.Fatalf("head lost: %+v", m.Head)
	}
	if m := fromMySQL.Messages[1]; m.Version != 2 || contentOf(m) != "edited" || !m.UpdatedAt.After(m.SentAt) {
		t.Fatalf("edited message %+v", m)
	}
}
