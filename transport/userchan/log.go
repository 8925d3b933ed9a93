package userchan

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// Key layout. <p> is Config.KeyPrefix, <t> the tenant; the braces give a user's keys the slot of
// the user's presence keys, so the append script reads the user's channel nodes too.
//
//	<p><t>:uchan:{<uid>}:meta    hash: epoch (16 hex digits, new with each log), seq (the last seq given)
//	<p><t>:uchan:{<uid>}:log     zset: seq -> item JSON (seq and epoch first), at most LogSize, both expiring LogTTL after the last append
type keys struct{ prefix string }

func (k keys) base(t domain.TenantID, u domain.UserID) string {
	return k.prefix + t.String() + ":uchan:{" + u.String() + "}"
}

func (k keys) meta(t domain.TenantID, u domain.UserID) string { return k.base(t, u) + ":meta" }
func (k keys) log(t domain.TenantID, u domain.UserID) string  { return k.base(t, u) + ":log" }

// NodesKey names the zset of nodes with a channel session of a user (presence.Store's
// ChannelNodesKey); it must share the user's slot.
type NodesKey func(domain.TenantID, domain.UserID) string

// Log is the users' channel logs in Redis. It is safe for concurrent use.
type Log struct {
	rdb   redis.UniversalClient
	cfg   Config
	keys  keys
	nodes NodesKey
}

// NewLog validates cfg and returns a Log. nodes names the zset the append reads the user's
// channel nodes from; nil reads none (Appended.Nodes stays empty).
func NewLog(rdb redis.UniversalClient, nodes NodesKey, cfg Config) (*Log, error) {
	cfg.setDefaults()
	var errs []error
	if rdb == nil {
		errs = append(errs, errors.New("userchan: Redis is required"))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if nodes == nil {
		nodes = func(t domain.TenantID, u domain.UserID) string { return "" }
	}
	return &Log{rdb: rdb, cfg: cfg, keys: keys{prefix: cfg.KeyPrefix}, nodes: nodes}, nil
}

// Config returns the configuration with defaults applied.
func (l *Log) Config() Config { return l.cfg }

// Appended is what an append of one user's items did.
type Appended struct {
	User   domain.UserID
	Epoch  string
	Bodies [][]byte // each item's JSON object, its seq and the epoch first, in the order given
	Seqs   []int64
	// Nodes are the nodes with a channel session of the user when the items were appended:
	// a session that registered later reads them from the log.
	Nodes []string
}

// Batch is one user's items to append.
type Batch struct {
	User  domain.UserID
	Items []Item
}

// Append appends each batch's items to its user's log, in order, numbering them with the user's
// next seqs, trims each log to LogSize and renews its TTL; a user without a log (a new user, or
// one whose log expired or was lost) gets a new one with a new epoch and seqs from 1. All
// batches go in one Redis round trip per 256. out[i] is batches[i]'s. A Redis failure is
// wrapped as domain.ErrRetryable; then none, some or all of the batches were appended.
func (l *Log) Append(ctx context.Context, tenant domain.TenantID, batches []Batch) (out []Appended, err error) {
	out = make([]Appended, len(batches))
	bodies := make([][][]byte, len(batches))
	for i, b := range batches {
		bodies[i] = make([][]byte, len(b.Items))
		for j, it := range b.Items {
			bodies[i][j] = it.body()
		}
	}
	for start := 0; start < len(batches); start += 256 {
		end := min(start+256, len(batches))
		cmds := make([]*redis.Cmd, end-start)
		err := redisscript.Pipelined(ctx, l.rdb, func(p *redisscript.Batch) {
			for i := start; i < end; i++ {
				b := batches[i]
				args := make([]any, 0, 3+len(b.Items))
				args = append(args, newEpoch(), l.cfg.LogSize, l.cfg.LogTTL.Milliseconds())
				for _, body := range bodies[i] {
					args = append(args, string(body[1:]))
				}
				ks := []string{l.keys.meta(tenant, b.User), l.keys.log(tenant, b.User)}
				if nk := l.nodes(tenant, b.User); nk != "" {
					ks = append(ks, nk)
				} else {
					ks = append(ks, l.keys.base(tenant, b.User)+":no_nodes")
				}
				cmds[i-start] = p.Eval(appendScript, ks, args...)
			}
		})
		if err != nil {
			return nil, domain.Retryable("userchan: append", err)
		}
		for i, c := range cmds {
			a, err := parseAppend(c, batches[start+i], bodies[start+i])
			if err != nil {
				return nil, domain.Retryable("userchan: append", err)
			}
			out[start+i] = a
		}
	}
	return out, nil
}

// parseAppend reads the append script's answer.
func parseAppend(c *redis.Cmd, b Batch, bodies [][]byte) (Appended, error) {
	res, err := c.Slice()
	if err != nil {
		return Appended{}, err
	}
	if len(res) < 2 {
		return Appended{}, fmt.Errorf("append answered %d values", len(res))
	}
	a := Appended{User: b.User}
	a.Epoch, _ = res[0].(string)
	first, _ := res[1].(int64)
	for _, n := range res[2:] {
		if s, ok := n.(string); ok {
			a.Nodes = append(a.Nodes, s)
		}
	}
	for j, body := range bodies {
		seq := first + int64(j)
		a.Seqs = append(a.Seqs, seq)
		a.Bodies = append(a.Bodies, withSeq(body, seq, a.Epoch))
	}
	return a, nil
}

// newEpoch is a random epoch for a new log.
func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Entry is one logged item.
type Entry struct {
	Seq   int64
	What  string
	Topic string        // the conversation it concerns; empty for none
	Src   domain.UserID // whom it concerns; 0 for none
	Body  []byte        // the item's JSON object, seq and epoch first
}

// Page is a read of a user's log.
type Page struct {
	// Epoch names the log; empty when the user has none (no item was ever logged, or the log
	// expired or was lost).
	Epoch string
	// LastSeq is the seq of the last item logged; 0 when there is no log.
	LastSeq int64
	// Entries are the items after the seq asked for, in seq order.
	Entries []Entry
	// HasMore says more items follow the page.
	HasMore bool
	// Resync says the items asked for are no longer all in the log (trimmed, expired, or the log
	// is another epoch's): the reader must re-read what the items are about from the read models
	// and go on from LastSeq of Epoch. Entries is empty then.
	Resync bool
}

// Read returns up to limit items of user's log after seq after, of epoch: a reader's position is
// an epoch and a seq, both from an earlier Read or Head. An empty epoch with after 0 reads from
// the start of whatever log there is. Read answers Resync when the position cannot be served
// without a gap: epoch is not the log's (for a position past 0), after is beyond the last seq,
// or items after it were trimmed. A Redis failure is wrapped as domain.ErrRetryable.
func (l *Log) Read(ctx context.Context, tenant domain.TenantID, user domain.UserID, epoch string, after int64, limit int) (Page, error) {
	if after < 0 || limit < 0 {
		return Page{}, &domain.ValidationError{Field: "after_seq", Reason: "bad_format", Detail: "not negative"}
	}
	res, err := readScript.RunRO(ctx, l.rdb, []string{l.keys.meta(tenant, user), l.keys.log(tenant, user)}, after, limit+1).Slice()
	if err != nil || len(res) < 3 {
		return Page{}, domain.Retryable("userchan: read", errors.Join(err, errors.New("short answer")))
	}
	p := Page{}
	p.Epoch, _ = res[0].(string)
	p.LastSeq, _ = res[1].(int64)
	first, _ := res[2].(int64)
	items := res[3:]
	switch {
	case after > 0 && epoch != p.Epoch, after > p.LastSeq,
		first == 0 && p.LastSeq > after, // the items are gone, the head is left
		first > after+1:
		return Page{Epoch: p.Epoch, LastSeq: p.LastSeq, Resync: true}, nil
	}
	if len(items) > limit {
		items, p.HasMore = items[:limit], true
	}
	for _, v := range items {
		s, _ := v.(string)
		e, err := parseEntry([]byte(s))
		if err != nil {
			return Page{}, fmt.Errorf("userchan: read: %w", err)
		}
		p.Entries = append(p.Entries, e)
	}
	return p, nil
}

// Head returns user's log epoch and last seq (empty and 0 when there is no log).
func (l *Log) Head(ctx context.Context, tenant domain.TenantID, user domain.UserID) (epoch string, last int64, err error) {
	p, err := l.Read(ctx, tenant, user, "", 0, 0)
	if err != nil {
		return "", 0, err
	}
	return p.Epoch, p.LastSeq, nil
}

// Tail returns the last n items of user's log, oldest first. A Redis failure is wrapped as
// domain.ErrRetryable.
func (l *Log) Tail(ctx context.Context, tenant domain.TenantID, user domain.UserID, n int) ([]Entry, error) {
	if n <= 0 {
		return nil, nil
	}
	res, err := tailScript.RunRO(ctx, l.rdb, []string{l.keys.log(tenant, user)}, n).StringSlice()
	if err != nil {
		return nil, domain.Retryable("userchan: tail", err)
	}
	out := make([]Entry, 0, len(res))
	for _, s := range res {
		e, err := parseEntry([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("userchan: tail: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// parseEntry reads the fields of a logged item that a reader routes by.
func parseEntry(b []byte) (Entry, error) {
	var v struct {
		Seq   string        `json:"seq"`
		What  string        `json:"what"`
		Topic string        `json:"topic"`
		Src   domain.UserID `json:"src"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return Entry{}, fmt.Errorf("a logged item does not decode: %w", err)
	}
	seq, err := strconv.ParseInt(v.Seq, 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("a logged item has seq %q", v.Seq)
	}
	return Entry{Seq: seq, What: v.What, Topic: v.Topic, Src: v.Src, Body: b}, nil
}
