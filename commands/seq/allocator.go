package seq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// Allocator claims idempotency keys and allocates seqs in Redis. It is safe for concurrent use.
// Every batch method costs one pipelined round trip (two when Redis lost its script cache).
// Errors from an unreachable Redis are *domain.RetryableError values.
type Allocator struct {
	rdb      redis.UniversalClient
	cfg      Config
	instance string        // this process's start of the node: random, recorded in its claims
	nonces   atomic.Uint64 // numbers the attempts of this process
}

// New returns an Allocator over rdb.
func New(rdb redis.UniversalClient, cfg Config) (*Allocator, error) {
	if rdb == nil {
		return nil, errors.New("seq: nil redis client")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	inst, err := randomID()
	if err != nil {
		return nil, err
	}
	return &Allocator{rdb: rdb, cfg: cfg, instance: inst}, nil
}

// State is the state of a send's claim.
type State int

// Claim states.
const (
	StateAbsent  State = iota // no claim: never sent, expired, or lost
	StatePending              // a send holds the claim and has not finished
	StateDone                 // the send is committed; Seq and MessageID are set
	StateFailed               // the send failed; the client_msg_id may be sent again
)

// String returns the state's name as stored in the claim value.
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateDone:
		return "done"
	case StateFailed:
		return "failed"
	}
	return "absent"
}

// Claim is the stored state of a send.
type Claim struct {
	State     State
	Seq       int64     // StateDone: the message's seq; StatePending: the seq the attempt was given
	MessageID string    // StateDone
	SentAt    time.Time // StateDone, when known
	Owner     Owner     // StatePending: the attempt holding the claim (zero in claims of older versions)
	CreatedAt time.Time
}

// claimValue is the JSON stored under a claim key (seed 000 §5.4). A pending claim records its
// owner (node, inst, nonce) and the seq its attempt was given.
type claimValue struct {
	Status    string     `json:"status"`
	Node      string     `json:"node,omitempty"`
	Instance  string     `json:"inst,omitempty"`
	Nonce     string     `json:"nonce,omitempty"`
	MessageID string     `json:"message_id,omitempty"`
	SentAt    *time.Time `json:"sent_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	Seq       int64      `json:"seq,omitempty"` // last: the scripts append it to a pending value
}

// encodeClaim is json.Marshal(v), written out: two claims a message, on the sequencer's path.
func encodeClaim(v claimValue) string {
	b := make([]byte, 0, 192)
	b = appendField(b, `{"status":`, v.Status)
	if v.Node != "" {
		b = appendField(b, `,"node":`, v.Node)
	}
	if v.Instance != "" {
		b = appendField(b, `,"inst":`, v.Instance)
	}
	if v.Nonce != "" {
		b = appendField(b, `,"nonce":`, v.Nonce)
	}
	if v.MessageID != "" {
		b = appendField(b, `,"message_id":`, v.MessageID)
	}
	if v.SentAt != nil {
		b = appendTime(append(b, `,"sent_at":`...), *v.SentAt)
	}
	b = appendTime(append(b, `,"created_at":`...), v.CreatedAt)
	if v.Seq != 0 {
		b = strconv.AppendInt(append(b, `,"seq":`...), v.Seq, 10)
	}
	return string(append(b, '}'))
}

// appendField appends name and s as a JSON string, as encoding/json writes it.
func appendField(b []byte, name, s string) []byte {
	b = append(b, name...)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // what needs escaping is escaped as encoding/json does
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// appendTime appends t as encoding/json writes a time.Time.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 { // encoding/json refuses these; a claim never has them
		q, _ := json.Marshal(t)
		return append(b, q...)
	}
	return append(t.AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
}

func decodeClaim(s string) (Claim, error) {
	var v claimValue
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return Claim{}, fmt.Errorf("decode claim: %w", err)
	}
	c := Claim{Seq: v.Seq, MessageID: v.MessageID, CreatedAt: v.CreatedAt,
		Owner: Owner{Node: v.Node, Instance: v.Instance, Nonce: v.Nonce}}
	if v.SentAt != nil {
		c.SentAt = *v.SentAt
	}
	switch v.Status {
	case "pending":
		c.State = StatePending
	case "done":
		c.State = StateDone
	case "failed":
		c.State = StateFailed
	default:
		return Claim{}, fmt.Errorf("decode claim: unknown status %q", v.Status)
	}
	return c, nil
}

// Outcome is what Allocate did for one key.
type Outcome int

// Allocation outcomes.
const (
	// Allocated: the claim was taken (pending) and Seq is the topic's next seq.
	Allocated Outcome = iota + 1
	// Held: the claim exists as pending or done (Allocation.Claim); nothing was written.
	Held
	// NeedsSeed: the topic's counter is missing; nothing was written. Seed it with the highest
	// seq in the event store and allocate again.
	NeedsSeed
)

// Allocation is the result for one key of Allocate or Reallocate.
type Allocation struct {
	Outcome Outcome
	Seq     int64 // Allocated
	Claim   Claim // Held
	Err     error // set when this key's call failed; the other fields are then zero
}

// Request asks for a send's claim and a seq.
type Request struct {
	Key Key
	// Nonce names this attempt (NewNonce); the pending claim records it, with this node and
	// process, as its owner. Empty: the claim records no owner.
	Nonce string
	// TakeOver, when set, is the nonce of an abandoned attempt (see Owner) whose pending claim
	// this request may take: atomically, and only while the claim still holds that nonce.
	TakeOver string
}

// pendingPrefix is the pending claim value of attempt nonce without its closing brace: the
// scripts append the seq they allocate.
func (a *Allocator) pendingPrefix(nonce string) string {
	v := claimValue{Status: "pending", CreatedAt: time.Now().UTC()}
	if nonce != "" {
		v.Node, v.Instance, v.Nonce = a.cfg.NodeID, a.instance, nonce
	}
	s := encodeClaim(v)
	return s[:len(s)-1]
}

// Allocate claims each key, recording no owner, and allocates a seq for each claim taken, in
// one round trip. Keys are processed in order, so a key repeated in the batch is Held by its
// first occurrence. A failed claim is taken again. The i-th allocation answers keys[i].
func (a *Allocator) Allocate(ctx context.Context, keys []Key) []Allocation {
	reqs := make([]Request, len(keys))
	for i, k := range keys {
		reqs[i] = Request{Key: k}
	}
	out, _ := a.MarkDoneAndAllocate(ctx, nil, reqs, nil)
	return out
}

// MarkDoneAndAllocate is MarkDone followed by the allocation of reqs (as Allocate, with each
// request's own nonce and take-over) in the same round trip, for a sequencer that finishes one
// batch while it starts the next. ride (may be nil) queues more commands on the same round trip:
// the sequencer's caller reads what it will need after the commit (see message.Router). The
// error is MarkDone's.
func (a *Allocator) MarkDoneAndAllocate(ctx context.Context, done []Done, reqs []Request, ride func(*redisscript.Batch)) ([]Allocation, error) {
	// One script call per topic, its sends in request order: the seqs a topic's sends get are
	// those one call per send would give them.
	calls, members := a.allocateCalls(reqs)
	var sets []*redis.StatusCmd
	cmds := redisscript.Run(ctx, a.rdb, calls, func(b *redisscript.Batch) {
		sets = a.queueDone(ctx, b.P, done)
		if ride != nil {
			ride(b)
		}
	})
	out := make([]Allocation, len(reqs))
	for c, cmd := range cmds {
		res, err := cmd.Slice()
		for j, i := range members[c] {
			switch {
			case err != nil:
				out[i] = Allocation{Err: redisErr("allocate seq", err)}
			case len(res) != 2*len(members[c]):
				out[i] = Allocation{Err: fmt.Errorf("allocate seq: unexpected reply %v", res)}
			default:
				out[i] = parseAllocate(res[2*j : 2*j+2])
			}
		}
	}
	return out, doneErr(sets)
}

// allocateCalls groups reqs by topic into one allocate call each; members[c] lists, in order,
// the indexes in reqs of call c's sends.
func (a *Allocator) allocateCalls(reqs []Request) (calls []scriptCall, members [][]int) {
	ttl := a.cfg.PendingTTL.Milliseconds()
	byTopic := map[string]int{}
	for i, r := range reqs {
		counter := a.CounterKey(r.Key.Tenant, r.Key.Topic)
		c, ok := byTopic[counter]
		if !ok {
			c = len(calls)
			byTopic[counter] = c
			calls = append(calls, scriptCall{Script: allocateScript, Keys: []string{counter}, Args: []any{ttl}})
			members = append(members, nil)
		}
		calls[c].Keys = append(calls[c].Keys, a.ClaimKey(r.Key))
		calls[c].Args = append(calls[c].Args, a.pendingPrefix(r.Nonce), r.TakeOver)
		members[c] = append(members[c], i)
	}
	return calls, members
}

// parseAllocate reads one send's two values of an allocate reply.
func parseAllocate(res []any) Allocation {
	code, _ := res[0].(int64)
	switch code {
	case 0:
		seq, ok := res[1].(int64)
		if !ok {
			return Allocation{Err: fmt.Errorf("allocate seq: unexpected seq %v", res[1])}
		}
		return Allocation{Outcome: Allocated, Seq: seq}
	case 1:
		s, _ := res[1].(string)
		c, err := decodeClaim(s)
		if err != nil {
			return Allocation{Err: fmt.Errorf("allocate seq: %w", err)}
		}
		return Allocation{Outcome: Held, Claim: c}
	case 2:
		return Allocation{Outcome: NeedsSeed}
	}
	return Allocation{Err: fmt.Errorf("allocate seq: unexpected code %d", code)}
}

// TopicFloor names a topic and the highest seq the event store holds for it.
type TopicFloor struct {
	Tenant domain.TenantID
	Topic  domain.Topic
	Floor  int64
}

// Seed raises each topic's counter to at least its floor (creating it when missing) in one round
// trip. A counter never moves backwards, so seeding with a stale floor is harmless.
func (a *Allocator) Seed(ctx context.Context, topics []TopicFloor) error {
	calls := make([]scriptCall, len(topics))
	for i, t := range topics {
		calls[i] = scriptCall{Script: seedScript, Keys: []string{a.CounterKey(t.Tenant, t.Topic)}, Args: []any{t.Floor}}
	}
	var errs []error
	for _, cmd := range redisscript.Run(ctx, a.rdb, calls, nil) {
		if err := cmd.Err(); err != nil {
			errs = append(errs, redisErr("seed seq", err))
		}
	}
	return firstErr(errs)
}

// Realloc asks for a new seq for a key whose claim this caller holds and whose seq was already
// taken in the event store; Floor is the store's highest seq for the topic, Nonce the attempt's.
type Realloc struct {
	Key   Key
	Nonce string
	Floor int64
}

// Reallocate raises each topic's counter to at least its floor, refreshes the claim as pending
// and allocates the next seq, in one round trip. Allocations are Allocated or carry Err.
func (a *Allocator) Reallocate(ctx context.Context, reqs []Realloc) []Allocation {
	ttl := a.cfg.PendingTTL.Milliseconds()
	calls := make([]scriptCall, len(reqs))
	for i, r := range reqs {
		calls[i] = scriptCall{Script: reallocateScript,
			Keys: []string{a.ClaimKey(r.Key), a.CounterKey(r.Key.Tenant, r.Key.Topic)}, Args: []any{r.Floor, a.pendingPrefix(r.Nonce), ttl}}
	}
	out := make([]Allocation, len(reqs))
	for i, cmd := range redisscript.Run(ctx, a.rdb, calls, nil) {
		seq, err := cmd.Int64()
		if err != nil {
			out[i] = Allocation{Err: redisErr("reallocate seq", err)}
			continue
		}
		out[i] = Allocation{Outcome: Allocated, Seq: seq}
	}
	return out
}

// Done records a committed send.
type Done struct {
	Key       Key
	Seq       int64
	MessageID string
	SentAt    time.Time
}

// MarkDone stores each send as done with its seq and message id for DoneTTL, in one round trip.
// The claim is overwritten whatever its state: the event store has spoken.
func (a *Allocator) MarkDone(ctx context.Context, done []Done) error {
	if len(done) == 0 {
		return nil
	}
	var sets []*redis.StatusCmd
	_, _ = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		sets = a.queueDone(ctx, p, done)
		return nil
	})
	return doneErr(sets)
}

// queueDone queues the done marks on p.
func (a *Allocator) queueDone(ctx context.Context, p redis.Pipeliner, done []Done) []*redis.StatusCmd {
	now := time.Now().UTC()
	cmds := make([]*redis.StatusCmd, len(done))
	for i, d := range done {
		sentAt := d.SentAt.UTC()
		v := encodeClaim(claimValue{Status: "done", Seq: d.Seq, MessageID: d.MessageID, SentAt: &sentAt, CreatedAt: now})
		cmds[i] = p.Set(ctx, a.ClaimKey(d.Key), v, a.cfg.DoneTTL)
	}
	return cmds
}

// doneErr collects the errors of queued done marks.
func doneErr(cmds []*redis.StatusCmd) error {
	var errs []error
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			errs = append(errs, redisErr("mark send done", err))
		}
	}
	return firstErr(errs)
}

// MarkFailed stores each request's claim as failed for FailedTTL, in one round trip, unless it
// is done or held by another attempt (pending with another nonce: a retry took it over). A
// failed claim lets the same client_msg_id be sent again. TakeOver is ignored.
func (a *Allocator) MarkFailed(ctx context.Context, reqs []Request) error {
	v := encodeClaim(claimValue{Status: "failed", CreatedAt: time.Now().UTC()})
	calls := make([]scriptCall, len(reqs))
	for i, r := range reqs {
		calls[i] = scriptCall{Script: failScript, Keys: []string{a.ClaimKey(r.Key)}, Args: []any{v, a.cfg.FailedTTL.Milliseconds(), r.Nonce}}
	}
	var errs []error
	for _, cmd := range redisscript.Run(ctx, a.rdb, calls, nil) {
		if err := cmd.Err(); err != nil {
			errs = append(errs, redisErr("mark send failed", err))
		}
	}
	return firstErr(errs)
}

// Claim reads the claim of one send; a missing key is StateAbsent.
func (a *Allocator) Claim(ctx context.Context, k Key) (Claim, error) {
	s, err := a.rdb.Get(ctx, a.ClaimKey(k)).Result()
	if errors.Is(err, redis.Nil) {
		return Claim{State: StateAbsent}, nil
	}
	if err != nil {
		return Claim{}, redisErr("read send claim", err)
	}
	return decodeClaim(s)
}

// LastSeq returns a topic's counter and whether it exists.
func (a *Allocator) LastSeq(ctx context.Context, tenant domain.TenantID, topic domain.Topic) (int64, bool, error) {
	s, err := a.rdb.Get(ctx, a.CounterKey(tenant, topic)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, redisErr("read last seq", err)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read last seq: %w", err)
	}
	return n, true, nil
}

// firstErr returns the first error and how many more there were; one failed batch usually fails
// every command the same way.
func firstErr(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more)", errs[0], len(errs)-1)
}
