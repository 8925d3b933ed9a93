package message

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// CommittedMessage is a message as its send committed it: what realtime delivery needs.
type CommittedMessage struct {
	Tenant    domain.TenantID
	Topic     domain.Topic
	From      domain.UserID
	Seq       int64
	MessageID string
	MsgType   domain.MsgType
	Head      domain.Head
	Content   domain.Content // exactly as sent
	SentAt    time.Time
	// Route is where the Router said, in the allocate round trip, the topic's messages go; nil
	// without a Router or when its read failed.
	Route *Route
}

// Route is the nodes a Router read for a topic, and when.
type Route struct {
	Nodes  []string
	ReadAt time.Time
}

// Router reads, in the sequencer's allocate round trip to Redis, where each topic of a batch's
// messages is to be delivered, so that the CommitListener need not ask again after the commit:
// one round trip per message fewer (transport/fanout implements it). The route is read before
// the append, so a listener takes it only while it is fresh.
type Router interface {
	// QueueRoutes queues on b the reads of the routes of topics; routes, called after the round
	// trip, returns route i for topics[i], nil where it was not read.
	QueueRoutes(b *redisscript.Batch, topics []TopicRef) (routes func() []*Route)
}

// TopicRef names a topic of a tenant: a conversation stream.
type TopicRef struct {
	Tenant domain.TenantID
	Topic  domain.Topic
}

// CommitListener hears about messages at the point they commit (DESIGN §4: realtime fanout
// happens at the commit point, once per committed message, whatever became of the caller).
//
// The sequencer calls MessagesCommitted on its partition goroutine right after a batch commits
// and before it answers the batch's callers, with the messages that batch appended, in seq order
// per topic. It is called once per committed message: never for an answer from an earlier send
// (a duplicate), and also when the caller has given up. It must return quickly (queue, do not
// wait): the partition's next batch waits for it. A panic is recovered and logged.
type CommitListener interface {
	MessagesCommitted(ctx context.Context, msgs []CommittedMessage)
}

// The message changes a ChangeListener hears about.
const (
	ChangeRecall = "recall"
	ChangeEdit   = "edit"
)

// CommittedChange is a committed recall or edit of a message.
type CommittedChange struct {
	Tenant    domain.TenantID
	Topic     domain.Topic
	Seq       int64
	MessageID string
	By        domain.UserID
	What      string          // ChangeRecall or ChangeEdit
	Version   int64           // edit: the content version after the edit
	Content   json.RawMessage // edit: the new content, exactly as sent
	At        time.Time
}

// ChangeListener hears about recalls and edits right after they commit, on the caller's
// goroutine (the change is committed even when the caller's context has ended). It must return
// quickly; a panic is recovered and logged.
type ChangeListener interface {
	MessageChanged(ctx context.Context, c CommittedChange)
}

// CommittedRead is a user's read mark in a topic as a command moved it forward.
type CommittedRead struct {
	Tenant  domain.TenantID
	Topic   domain.Topic
	User    domain.UserID
	ReadSeq int64 // the read mark after the command
	At      time.Time
}

// ReadListener hears about read marks right after they move forward and commit (not about
// receive marks alone, nor about marks that did not move), on the caller's goroutine, even when
// the caller's context has ended. It must return quickly; a panic is recovered and logged.
type ReadListener interface {
	ReadMarked(ctx context.Context, r CommittedRead)
}

// AbandonedSeq is a seq a send was given and that will never hold its message.
type AbandonedSeq struct {
	Tenant domain.TenantID
	Topic  domain.Topic
	Seq    int64
}

// HoleRecorder hears about seqs that became holes: a send that got the seq failed for good (the
// store refused it, or it was abandoned after a failure), was answered by an earlier identical
// send, or took over the claim of an abandoned attempt and committed at another seq. It is
// called on the sequencer's partition goroutine after the batch's appends; it must return
// quickly. A panic is recovered and logged. A seq of a send whose outcome is unknown (its Redis
// reply was lost) is reported once a retry takes its claim over.
type HoleRecorder interface {
	SeqsAbandoned(ctx context.Context, holes []AbandonedSeq)
}

// safely runs fn, logging instead of propagating a panic: a listener must not take the
// sequencer's partition goroutine (or a command) down with it.
func safely(ctx context.Context, log *slog.Logger, what string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			log.ErrorContext(ctx, what+" panicked", slog.Any("panic", p))
		}
	}()
	fn()
}
