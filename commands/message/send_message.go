package message

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// MaxTraceIDLen is the longest trace id a SendMessage may carry.
const MaxTraceIDLen = 128

// SendMessage asks to append one message to a conversation (DESIGN §4, seed 000 §5.4). Build it
// with NewSendMessage from transport input; Handle checks it again.
type SendMessage struct {
	Tenant      domain.TenantID
	From        domain.UserID
	Topic       domain.Topic
	ClientMsgID domain.ClientMsgID // the sender's idempotency id, unique per sender and topic
	MsgType     domain.MsgType
	Content     domain.Content
	Head        domain.Head
	TraceID     string
	// Actor is who asked for the send; the zero value means the sender itself (a user).
	Actor domain.Actor

	// sealed is Content sealed under the sender's data key (DESIGN §7a), set by Handle when the
	// handler has a Sealer: what the event stores. Content stays the plaintext the commit
	// listener delivers.
	sealed json.RawMessage
}

// SendMessageInput is a send as transport receives it, before validation.
type SendMessageInput struct {
	Tenant      string
	From        string // "123" or "usr123"
	Topic       string // "grp<id>" or "p2p<low>_<high>"
	ClientMsgID string
	MsgType     string // empty means text
	Content     json.RawMessage
	Head        json.RawMessage // optional
	TraceID     string
}

// NewSendMessage validates in. Bad input is a *domain.ValidationError naming the field
// (tenant_id, from, topic, client_msg_id, msg_type, content, head, trace_id) and a stable reason;
// a sender who is not one of the two users of a 1:1 topic is rejected as topic/not_party.
// maxContentBytes <= 0 means domain.DefaultMaxContentBytes.
func NewSendMessage(in SendMessageInput, maxContentBytes int) (SendMessage, error) {
	var (
		cmd SendMessage
		err error
	)
	if cmd.Tenant, err = domain.NewTenantID(in.Tenant); err != nil {
		return SendMessage{}, err
	}
	if cmd.From, err = domain.ParseUserID(in.From); err != nil {
		return SendMessage{}, asField(err, "from")
	}
	if cmd.Topic, err = domain.ParseTopic(in.Topic); err != nil {
		return SendMessage{}, asField(err, "topic")
	}
	if cmd.ClientMsgID, err = domain.NewClientMsgID(in.ClientMsgID); err != nil {
		return SendMessage{}, err
	}
	if cmd.MsgType, err = domain.ParseMsgType(in.MsgType); err != nil {
		return SendMessage{}, err
	}
	if cmd.Content, err = domain.NewContent(in.Content, maxContentBytes); err != nil {
		return SendMessage{}, err
	}
	if len(in.Head) > 0 && string(in.Head) != "null" {
		if err := json.Unmarshal(in.Head, &cmd.Head); err != nil {
			if ve := (*domain.ValidationError)(nil); errors.As(err, &ve) {
				return SendMessage{}, ve // head.mentions/bad_format: a value, not the JSON, is wrong
			}
			return SendMessage{}, invalidField("head", "bad_json", domain.DescribeJSONError(err))
		}
	}
	cmd.TraceID = in.TraceID
	if err := cmd.validate(maxContentBytes); err != nil {
		return SendMessage{}, err
	}
	return cmd, nil
}

// validate checks a command that may have been built without NewSendMessage. It deduplicates the
// head's mentions in a copy.
func (c *SendMessage) validate(maxContentBytes int) error {
	if maxContentBytes <= 0 {
		maxContentBytes = domain.DefaultMaxContentBytes
	}
	switch {
	case c.Tenant.IsZero():
		return invalidField("tenant_id", "required", "")
	case c.From <= 0:
		return invalidField("from", "required", "")
	case c.Topic.IsZero():
		return invalidField("topic", "required", "")
	case c.ClientMsgID.String() == "":
		return invalidField("client_msg_id", "required", "")
	case c.Content.Size() == 0:
		return invalidField("content", "required", "")
	case c.Content.StoredSize() > maxContentBytes:
		return invalidField("content", "too_large", fmt.Sprintf("at most %d bytes", maxContentBytes))
	case c.Topic.Kind() == domain.TopicDirect && !c.Topic.Has(c.From):
		return invalidField("topic", "not_party", "the sender is not one of the two users of this 1:1 topic")
	case len(c.TraceID) > MaxTraceIDLen:
		return invalidField("trace_id", "too_long", fmt.Sprintf("at most %d bytes", MaxTraceIDLen))
	case !storableText(c.TraceID):
		return invalidField("trace_id", domain.ReasonBadText, "valid UTF-8 without U+0000")
	}
	if _, err := domain.ParseMsgType(string(c.MsgType)); err != nil {
		return err
	}
	c.Head.Mentions = append([]domain.UserID(nil), c.Head.Mentions...)
	return c.Head.Validate()
}

// SendResult is the answer to a send. It is returned only after the event is committed.
type SendResult struct {
	Seq       int64     // the message's seq in its topic (the stream version)
	MessageID string    // the message id, which is also the event id (UUIDv7)
	Duplicate bool      // true when an earlier send with the same client_msg_id answered
	SentAt    time.Time // when the message was first sent
}

// SendPolicy decides whether a user may send to a topic. CanSend returns nil to allow, a
// *domain.DeniedError to refuse, or a retryable error when it could not decide.
type SendPolicy interface {
	CanSend(ctx context.Context, tenant domain.TenantID, from domain.UserID, topic domain.Topic) error
}

// AllowAll is the SendPolicy that allows every send.
type AllowAll struct{}

// CanSend always returns nil.
func (AllowAll) CanSend(context.Context, domain.TenantID, domain.UserID, domain.Topic) error {
	return nil
}

// FileAccess decides whether a sender may reference files in a message (head.files), so that
// naming a file cannot share what the sender may not read. CanReference returns nil when from
// may reference every file of ids, a *domain.DeniedError (domain.ReasonFileNotReadable, or
// file_rejected for the sender's own rejected file) when one is refused, or a retryable error
// when it could not decide. *files.Access implements it.
type FileAccess interface {
	CanReference(ctx context.Context, tenant domain.TenantID, from domain.UserID, ids []string) error
}

// NoFiles is the FileAccess of a node without file records: it refuses every message that
// references a file.
type NoFiles struct{}

// CanReference refuses any file.
func (NoFiles) CanReference(context.Context, domain.TenantID, domain.UserID, []string) error {
	return domain.Deny(domain.ReasonFileNotReadable)
}

// MessageStore is the part of the event store SendMessage writes through.
type MessageStore interface {
	// AppendBatch writes events in one transaction, each at its own stream version, and reports
	// Appended, VersionTaken or Duplicate (with the stored event) per event.
	AppendBatch(ctx context.Context, events []domain.Envelope) ([]eventstore.AppendResult, error)
	// LastVersion returns a stream's highest stored version, 0 when empty.
	LastVersion(ctx context.Context, tenant domain.TenantID, streamID string) (int64, error)
}

var _ MessageStore = (*eventstore.Store)(nil)

// seqAllocator is what the handler needs from commands/seq.
type seqAllocator interface {
	MarkDoneAndAllocate(ctx context.Context, done []seq.Done, reqs []seq.Request, ride func(*redisscript.Batch)) ([]seq.Allocation, error)
	Seed(ctx context.Context, topics []seq.TopicFloor) error
	Reallocate(ctx context.Context, reqs []seq.Realloc) []seq.Allocation
	MarkFailed(ctx context.Context, reqs []seq.Request) error
	Claim(ctx context.Context, k seq.Key) (seq.Claim, error)
	NewNonce() string
	Mine(o seq.Owner) bool
	Alive(ctx context.Context, o seq.Owner) (bool, error)
	RunHeartbeat(ctx context.Context, log *slog.Logger)
}

var _ seqAllocator = (*seq.Allocator)(nil)

// SendMessageDeps are the collaborators of a SendMessageHandler.
type SendMessageDeps struct {
	Store  MessageStore          // required
	Redis  redis.UniversalClient // required: seqs, idempotency claims and the node's heartbeat
	Policy SendPolicy            // default AllowAll
	Files  FileAccess            // who may reference which file in head.files; default NoFiles
	Logger *slog.Logger          // default discards
	// Listener hears about every message at the point it commits: realtime delivery. Optional.
	Listener CommitListener
	// Router reads the routes of a batch's topics in its allocate round trip, for the Listener
	// (CommittedMessage.Route). Optional.
	Router Router
	// Holes hears about the seqs that became holes, so they can be made final. Optional.
	Holes HoleRecorder
	// Sealer seals the content under the sender's data key before it is appended (DESIGN §7a);
	// in the steady state a cached key, no round trip. Optional: nil stores plaintext.
	Sealer domain.Sealer

	Registerer prometheus.Registerer // optional: the sequencer's metrics
}

// SendMessageHandler handles SendMessage. Sends are routed by tenant and topic to one of
// Config.Partitions sequencer goroutines, which allocate seqs in Redis and append to the event
// store in batches (group commit). Within one node a topic's seq order is its commit order.
// Every committed message goes to the CommitListener at its commit. Run keeps the node's
// heartbeat; Close stops taking sends.
type SendMessageHandler struct {
	cfg      SendMessageConfig
	store    MessageStore
	seqs     seqAllocator
	policy   SendPolicy
	files    FileAccess
	listener CommitListener // nil: none
	router   Router         // nil: none
	holes    HoleRecorder   // nil: none
	sealer   domain.Sealer  // nil: content is stored as sent
	log      *slog.Logger
	metrics  *sendMetrics
	flights  sync.Map // nonces of this node's attempts in flight (see fly)

	parts     []*partition
	mu        sync.RWMutex   // guards closed and enqueuing.Add against Close
	closed    bool           // no new sends are queued
	closing   chan struct{}  // closed by Close: callers waiting for room give up
	enqueuing sync.WaitGroup // callers between the closed check and their queue
	wg        sync.WaitGroup // the partitions
}

// NewSendMessageHandler validates cfg and starts the partitions.
func NewSendMessageHandler(deps SendMessageDeps, cfg SendMessageConfig) (*SendMessageHandler, error) {
	cfg.setDefaults()
	var errs []error
	if deps.Store == nil {
		errs = append(errs, errors.New("store is required"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	seqs, err := seq.New(deps.Redis, cfg.Seq)
	if err != nil {
		errs = append(errs, err)
	}
	m, err := newSendMetrics(deps.Registerer)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("send message handler: %w", err)
	}
	if deps.Policy == nil {
		deps.Policy = AllowAll{}
	}
	if deps.Files == nil {
		deps.Files = NoFiles{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	h := &SendMessageHandler{cfg: cfg, store: deps.Store, seqs: seqs, policy: deps.Policy, files: deps.Files, listener: deps.Listener, router: deps.Router,
		holes: deps.Holes, sealer: deps.Sealer, log: deps.Logger, metrics: m, closing: make(chan struct{})}
	h.startPartitions()
	return h, nil
}

// maxResubmits bounds how often one Handle call goes back to the sequencer after an identical
// send it waited for failed, vanished or was abandoned.
const maxResubmits = 3

// Handle sends the message and returns its seq and message id once the event is committed.
//
// A repeated send (same tenant, topic, sender and client_msg_id) returns the first send's seq and
// message id with Duplicate set and writes nothing: Redis answers within Seq.DoneTTL, the event
// store's idempotency index after that. While an identical send is still in progress Handle waits
// up to PendingWait for it, then fails with domain.ErrInProgress. An identical send that can no
// longer finish (its attempt is no longer in flight on this node, or its node's heartbeat
// expired) is taken over at once: the event store then answers with its seq if it had committed,
// and the message gets a new seq otherwise.
//
// Errors: *domain.ValidationError for bad input, *domain.DeniedError from the SendPolicy and,
// for a message naming files, from the FileAccess (one batched look-up of its files; nothing
// written, no Redis key created); a *domain.ValidationError (message/rejected_by_store)
// when the event store refused the message's data (its claim is marked failed; the other sends
// of its batch are not affected); domain.ErrRetryable when Redis or PostgreSQL failed or the
// handler is closed (the message was not committed; seqs already allocated become holes); the
// context's error when ctx ends first, in which case the send may still commit, is then
// delivered to the CommitListener all the same, and a retry with the same client_msg_id
// answers it.
func (h *SendMessageHandler) Handle(ctx context.Context, cmd SendMessage) (SendResult, error) {
	if err := cmd.validate(h.cfg.MaxContentBytes); err != nil {
		return SendResult{}, err
	}
	if cmd.Actor == (domain.Actor{}) {
		cmd.Actor = domain.Actor{Type: domain.ActorUser, ID: cmd.From.String()}
	}
	if err := h.policy.CanSend(ctx, cmd.Tenant, cmd.From, cmd.Topic); err != nil {
		return SendResult{}, err
	}
	if len(cmd.Head.Files) > 0 {
		if err := h.files.CanReference(ctx, cmd.Tenant, cmd.From, cmd.Head.Files); err != nil {
			return SendResult{}, err
		}
	}
	if err := h.seal(ctx, &cmd); err != nil {
		return SendResult{}, err
	}
	var takeOver seq.Claim
	for attempt := 0; ; attempt++ {
		out, err := h.submit(ctx, &cmd, takeOver)
		if err != nil {
			return SendResult{}, err
		}
		if !out.pending {
			return out.result, nil
		}
		if attempt == maxResubmits {
			return SendResult{}, domain.ErrInProgress
		}
		res, again, abandoned, err := h.awaitClaim(ctx, keyOf(&cmd), out.claim)
		if err != nil || !again {
			return res, err
		}
		takeOver = abandoned
	}
}

// awaitClaim waits for the identical send holding claim held. It returns the send's result when
// it is done; again=true when it failed or vanished (this send may claim it now), with the
// claim to take over when its attempt was abandoned; and domain.ErrInProgress when it is still
// pending, with its attempt alive, after PendingWait.
func (h *SendMessageHandler) awaitClaim(ctx context.Context, key seq.Key, held seq.Claim) (res SendResult, again bool, abandoned seq.Claim, err error) {
	deadline := time.Now().Add(h.cfg.PendingWait)
	tick := time.NewTicker(h.cfg.PendingPoll)
	defer tick.Stop()
	for c := held; ; {
		switch c.State {
		case seq.StateDone:
			return claimResult(c), false, seq.Claim{}, nil
		case seq.StateFailed, seq.StateAbsent:
			return SendResult{}, true, seq.Claim{}, nil
		case seq.StatePending:
			if h.abandoned(ctx, c.Owner) {
				return SendResult{}, true, c, nil
			}
		}
		if time.Now().After(deadline) {
			return SendResult{}, false, seq.Claim{}, domain.ErrInProgress
		}
		select {
		case <-ctx.Done():
			return SendResult{}, false, seq.Claim{}, ctx.Err()
		case <-tick.C:
		}
		if c, err = h.seqs.Claim(ctx, key); err != nil {
			return SendResult{}, false, seq.Claim{}, err
		}
	}
}

// abandoned reports whether the attempt o can no longer finish: an attempt of this process that
// is not in flight, or one of a process whose heartbeat has stopped. A claim without an owner
// (written by an older version) is never abandoned: it expires after PendingTTL.
func (h *SendMessageHandler) abandoned(ctx context.Context, o seq.Owner) bool {
	if o.IsZero() {
		return false
	}
	if h.seqs.Mine(o) {
		return !h.inFlight(o.Nonce)
	}
	alive, err := h.seqs.Alive(ctx, o)
	return err == nil && !alive
}

// claimResult answers a send from a done claim.
func claimResult(c seq.Claim) SendResult {
	return SendResult{Seq: c.Seq, MessageID: c.MessageID, Duplicate: true, SentAt: c.SentAt}
}

// keyOf returns the idempotency key of a send.
func keyOf(cmd *SendMessage) seq.Key {
	return seq.Key{Tenant: cmd.Tenant, Topic: cmd.Topic, From: cmd.From, ClientMsgID: cmd.ClientMsgID}
}

// idempotencyKey is the event store's idempotency key of a send: "<from>:<client_msg_id>",
// unique within the topic's stream.
func idempotencyKey(cmd *SendMessage) string {
	return cmd.From.String() + ":" + cmd.ClientMsgID.String()
}

// Run keeps this node's heartbeat until ctx ends, then retires it (see seq.Config.HeartbeatTTL):
// while it runs, other nodes wait for this node's sends in progress instead of taking them
// over. Start it with the handler and stop it after Close.
func (h *SendMessageHandler) Run(ctx context.Context) error {
	h.seqs.RunHeartbeat(ctx, h.log)
	return nil
}

// Close stops taking sends, lets the partitions finish every send already queued and waits for
// them. Callers waiting for room in a full queue give up at once. Later Handle calls fail with
// ErrClosed (retryable). Close is idempotent.
func (h *SendMessageHandler) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.closing)
	h.mu.Unlock()
	h.enqueuing.Wait() // no one sends into a queue after this
	for _, p := range h.parts {
		close(p.queue)
	}
	h.wg.Wait()
	return nil
}

// storableText reports whether every store keeps s as it is: valid UTF-8 without U+0000.
func storableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// seal seals the command's content under the sender's data key of this month, unless the
// handler has no Sealer. An erased sender (domain.ErrKeyErased) may send nothing more: the send
// is refused as a denied one.
func (h *SendMessageHandler) seal(ctx context.Context, cmd *SendMessage) error {
	if h.sealer == nil {
		return nil
	}
	sealed, err := domain.SealContentRaw(ctx, h.sealer, cmd.Tenant, cmd.From, time.Now(), cmd.Content.Raw())
	if errors.Is(err, domain.ErrKeyErased) {
		return domain.Deny(domain.ReasonUserBanned)
	}
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	cmd.sealed = sealed
	return nil
}
