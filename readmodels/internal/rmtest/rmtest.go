package rmtest

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Router returns a tenant router on the local server with the default database template; it is
// closed at cleanup.
func Router(t testing.TB) *tenantdb.Router {
	t.Helper()
	testenv.MySQLServer(t)
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// Tenant provisions a tenant with a unique id; its database is dropped at cleanup.
func Tenant(t testing.TB, r *tenantdb.Router) domain.TenantID {
	t.Helper()
	tenant := domain.MustTenantID(testenv.UniqueName("rm"))
	testenv.DropMySQLDatabasesAtCleanup(t, r.DatabaseName(tenant))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Provision(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	return tenant
}

// Topic parses a topic name or fails the test.
func Topic(t testing.TB, name string) domain.Topic {
	t.Helper()
	tp, err := domain.ParseTopic(name)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// SentAt is the send time Sent stamps on messages: recent, so hot caches keep them.
var SentAt = time.Now().UTC().Truncate(time.Millisecond)

func envelope(t testing.TB, tenant domain.TenantID, stream string, version int64, typ domain.EventType, actor domain.UserID, payload any) domain.Envelope {
	t.Helper()
	env, err := domain.NewEnvelope(tenant, stream, version, typ, domain.Actor{Type: domain.ActorUser, ID: actor.String()}, payload)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Sent is a sent event of a text message on topic at seq.
func Sent(t testing.TB, tenant domain.TenantID, topic string, seq int64, from domain.UserID, text string) domain.Envelope {
	t.Helper()
	tp := Topic(t, topic)
	content, _ := json.Marshal(text)
	p := domain.MessageSent{
		MessageID: topic + "-" + strconv.FormatInt(seq, 10), Topic: topic, GroupID: tp.GroupID(),
		Seq: seq, From: from, ClientMsgID: "c" + strconv.FormatInt(seq, 10), MsgType: domain.MsgText,
		Content: content, SentAt: SentAt.Add(time.Duration(seq) * time.Millisecond),
	}
	if tp.Kind() == domain.TopicDirect {
		p.To = tp.Peer(from)
	}
	return envelope(t, tenant, topic, seq, domain.SentEventType(tp.Kind()), from, p)
}

// Recalled is a recall of the message at seq.
func Recalled(t testing.TB, tenant domain.TenantID, topic string, seq int64, by domain.UserID) domain.Envelope {
	t.Helper()
	tp := Topic(t, topic)
	p := domain.MessageRecalled{Topic: topic, Seq: seq, By: by, RecalledAt: time.Now().UTC()}
	return envelope(t, tenant, domain.MessageOpsStreamID(tp, seq), 1, domain.MessageEventType(tp.Kind(), domain.ActionRecalled), by, p)
}

// Edited is an edit of the message at seq to content version (2 for the first edit).
func Edited(t testing.TB, tenant domain.TenantID, topic string, seq int64, by domain.UserID, version int64, text string) domain.Envelope {
	t.Helper()
	tp := Topic(t, topic)
	content, _ := json.Marshal(text)
	p := domain.MessageEdited{Topic: topic, Seq: seq, By: by, EditVersion: version, Content: content, EditedAt: time.Now().UTC()}
	return envelope(t, tenant, domain.MessageOpsStreamID(tp, seq), version-1, domain.MessageEventType(tp.Kind(), domain.ActionEdited), by, p)
}

// Deleted is a delete-for-me of the message at seq by user.
func Deleted(t testing.TB, tenant domain.TenantID, topic string, seq int64, user domain.UserID) domain.Envelope {
	t.Helper()
	tp := Topic(t, topic)
	p := domain.MessageDeletedForUser{Topic: topic, Seq: seq, User: user, DeletedAt: time.Now().UTC()}
	return envelope(t, tenant, domain.DeletionsStreamID(tp, user), seq, domain.MessageEventType(tp.Kind(), domain.ActionDeleted), user, p)
}

// ReadMarked is a read/receive mark of user in topic.
func ReadMarked(t testing.TB, tenant domain.TenantID, topic string, user domain.UserID, read, recv int64) domain.Envelope {
	t.Helper()
	tp := Topic(t, topic)
	p := domain.ReadMarked{Topic: topic, User: user, ReadSeq: read, RecvSeq: recv, At: time.Now().UTC()}
	return envelope(t, tenant, domain.ReadMarksStreamID(tp, user), max(read, 1), domain.MessageEventType(tp.Kind(), domain.ActionReadMarked), user, p)
}

// Skipped is a seq-skip marker at seq of topic.
func Skipped(t testing.TB, tenant domain.TenantID, topic string, seq int64) domain.Envelope {
	t.Helper()
	env, err := domain.NewSeqSkipped(tenant, Topic(t, topic), seq, domain.SkipGapTimeout,
		domain.Actor{Type: domain.ActorSystem, ID: "relay"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// WithContent returns env, a sent or edited event, with its payload's content replaced by raw as
// it is, bypassing every check of the domain: tests use it for content an older build or another
// writer could have stored, which the domain refuses today.
func WithContent(t testing.TB, env domain.Envelope, raw string) domain.Envelope {
	t.Helper()
	var p map[string]json.RawMessage
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	p["content"] = json.RawMessage(raw)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("content %.40q: %v", raw, err)
	}
	env.Payload = b
	return env
}

// Deep returns a JSON array nested depth levels deep: MariaDB's JSON columns refuse more than 32.
func Deep(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// WithHead returns env, a sent event, with head as its payload's head (mentions, replies).
func WithHead(t testing.TB, env domain.Envelope, head domain.Head) domain.Envelope {
	t.Helper()
	var p map[string]json.RawMessage
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	p["head"] = b
	if env.Payload, err = json.Marshal(p); err != nil {
		t.Fatal(err)
	}
	return env
}
