package hot

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/readmodels"
)

// Apply applies one event to the Redis read model. It is idempotent by construction — no
// processed-event table is needed — because every write compares and only moves forward:
//
//   - sent: the topic's last seq is raised to the seq; for a group topic that is hot (size at or
//     above MinGroupSize) and a message younger than TTL, the snapshot is stored unless a recall
//     or a newer edit of it is already there. The sender's read seq is raised to the seq; in a 1:1
//     topic the receiver gets a read-seq field (0 if new).
//   - recalled: the snapshot loses its content for good and becomes a recalled placeholder; for a
//     group with no snapshot yet, a tombstone is left so a late sent event cannot bring the
//     content back.
//   - edited: content and version replace the snapshot's only if the edit is newer and the
//     message is not recalled.
//   - read_marked: the user's read seq is raised.
//   - seq_skipped: the seq is a final hole; for a cached group it is indexed like a message but
//     holds none, so a cached page can prove the seq final (not when the reason is
//     domain.SkipExpired: retention removed the message from the window). The last seq is raised.
//
// Every sent and seq_skipped event also records its seq for the topic's watermark (see
// Watermark).
//   - deleted_for_user and other types: nothing; delete-for-me is checked in MySQL by readers.
//
// Errors: a payload that does not decode wraps domain.ErrInvalid; a Redis failure wraps
// domain.ErrRetryable. A GroupSizer error does not fail Apply: the message is cached, which is
// always safe.
func (s *Store) Apply(ctx context.Context, tenant domain.TenantID, env domain.Envelope) error {
	_, err := s.ApplyBatch(ctx, tenant, []domain.Envelope{env})
	return err
}

// ApplyBatch applies events in order, as Apply does, sending all their scripts in one pipelined
// round trip; Redis runs one connection's commands in order, so the result is that of applying
// them one by one. If an event does not decode, the events before it are applied and its index
// is returned with an error wrapping domain.ErrInvalid. On a Redis failure some scripts may have
// run; applying the batch again is safe.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (applied int, err error) {
	b := batch{s: s, tenant: tenant, hot: map[int64]bool{}, runs: map[string]int{}, reads: map[domain.UserID]map[string]int64{}}
	var decodeErr error
	for i, env := range events {
		if decodeErr = b.add(ctx, env); decodeErr != nil {
			events = events[:i]
			break
		}
	}
	b.addReads()
	if err := s.run(ctx, b.calls); err != nil {
		return 0, err
	}
	return len(events), decodeErr
}

// call is one script invocation.
type call = redisscript.Call

// batch collects the script calls of a run of events. Consecutive sent events of one topic
// share one script call (the messages, then the topic's watermark once); read seqs only rise, so
// every raise of a user's read seqs is made by one call at the end of the batch.
type batch struct {
	s      *Store
	tenant domain.TenantID
	hot    map[int64]bool // group id -> cached, asked of the GroupSizer once per batch
	calls  []call
	runs   map[string]int                     // topic -> index in calls of its open run of sent events
	reads  map[domain.UserID]map[string]int64 // user -> topic -> read seq to raise to
	users  []domain.UserID                    // the keys of reads, in first-seen order
}

func (b *batch) add(ctx context.Context, env domain.Envelope) error {
	s, tenant := b.s, b.tenant
	if env.EventType != domain.EventGroupMessageSent && env.EventType != domain.EventDirectMessageSent {
		// Any other event of a topic comes after the sent events before it: it ends their run.
		delete(b.runs, domain.ConversationKey(env.StreamID))
	}
	switch env.EventType {
	case domain.EventGroupMessageSent, domain.EventDirectMessageSent:
		var p domain.MessageSent
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		if p.Seq == 0 {
			p.Seq = env.StreamVersion
		}
		return b.addSent(ctx, topic, p, env.OccurredAt)
	case domain.EventGroupMessageRecalled, domain.EventDirectMessageRecalled:
		var p domain.MessageRecalled
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		b.calls = append(b.calls, call{Script: recallScript, Keys: []string{s.msgKey(tenant, topic.String(), p.Seq)},
			Args: []any{stamp(p.RecalledAt, env.OccurredAt), p.By.String(), s.tombstoneTTL(topic)}})
	case domain.EventGroupMessageEdited, domain.EventDirectMessageEdited:
		var p domain.MessageEdited
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		b.calls = append(b.calls, call{Script: editScript, Keys: []string{s.msgKey(tenant, topic.String(), p.Seq)},
			Args: []any{p.EditVersion, string(p.Content), stamp(p.EditedAt, env.OccurredAt), s.tombstoneTTL(topic)}})
	case domain.EventGroupReadMarked, domain.EventDirectReadMarked:
		var p domain.ReadMarked
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		b.raiseRead(p.User, topic, p.ReadSeq)
	case domain.EventGroupSeqSkipped, domain.EventDirectSeqSkipped:
		var p domain.SeqSkipped
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		if p.Seq == 0 {
			p.Seq = env.StreamVersion
		}
		var ttl int64
		if b.isHot(ctx, topic) && p.Reason != domain.SkipExpired {
			at := p.SkippedAt
			if at.IsZero() {
				at = env.OccurredAt
			}
			ttl = max(time.Until(at.Add(s.cfg.TTL)).Milliseconds(), 0)
		}
		t := topic.String()
		b.calls = append(b.calls,
			call{Script: skipScript, Keys: []string{s.msgKey(tenant, t, p.Seq), s.seqsKey(tenant, t), s.lastSeqKey(tenant, t)},
				Args: []any{p.Seq, ttl, s.cfg.StateTTL.Milliseconds(), s.cfg.MaxPerTopic, stamp(p.SkippedAt, env.OccurredAt)}},
			s.watermarkCall(tenant, topic, p.Seq, -1))
	}
	return nil
}

// watermarkCall records that seq is in place (0: nothing) and, with known >= 0, that every seq up
// to known is, and returns the topic's watermark.
func (s *Store) watermarkCall(tenant domain.TenantID, topic domain.Topic, seq, known int64) call {
	t := topic.String()
	return call{Script: wmScript, Keys: []string{s.watermarkKey(tenant, t), s.seenKey(tenant, t)},
		Args: []any{seq, s.cfg.StateTTL.Milliseconds(), known}}
}

func (b *batch) addSent(ctx context.Context, topic domain.Topic, p domain.MessageSent, occurred time.Time) error {
	s := b.s
	sentAt := p.SentAt
	if sentAt.IsZero() {
		sentAt = occurred
	}
	sentAt = readmodels.Millis(sentAt)
	var ttl int64
	if b.isHot(ctx, topic) {
		ttl = max(time.Until(sentAt.Add(s.cfg.TTL)).Milliseconds(), 0)
	}
	snap := Message{
		Topic: topic.String(), Seq: p.Seq, From: p.From, ClientMsgID: p.ClientMsgID, MsgType: p.MsgType,
		Status: readmodels.StatusNormal, Head: readmodels.HeadOf(p.Head), SentAt: sentAt,
	}
	if snap.MsgType == "" {
		snap.MsgType = domain.MsgText
	}
	if topic.Kind() == domain.TopicDirect {
		snap.To = p.To
		if snap.To == 0 {
			snap.To = topic.Peer(p.From)
		}
	}
	meta, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("hot: snapshot: %w", err)
	}
	t := topic.String()
	i, open := b.runs[t]
	if !open {
		i = len(b.calls)
		b.runs[t] = i
		b.calls = append(b.calls, call{Script: sentScript,
			Keys: []string{s.seqsKey(b.tenant, t), s.lastSeqKey(b.tenant, t), s.watermarkKey(b.tenant, t), s.seenKey(b.tenant, t)},
			Args: []any{s.cfg.StateTTL.Milliseconds(), s.cfg.MaxPerTopic}})
	}
	c := &b.calls[i]
	c.Keys = append(c.Keys, s.msgKey(b.tenant, t, p.Seq))
	c.Args = append(c.Args, p.Seq, meta, string(p.Content), sentAt.Format(time.RFC3339Nano), ttl)
	b.raiseRead(p.From, topic, p.Seq)
	if topic.Kind() == domain.TopicDirect {
		b.raiseRead(snap.To, topic, 0)
	}
	return nil
}

// raiseRead notes that user's read seq of topic is at least seq (0 creates it when absent).
func (b *batch) raiseRead(user domain.UserID, topic domain.Topic, seq int64) {
	m := b.reads[user]
	if m == nil {
		m = map[string]int64{}
		b.reads[user] = m
		b.users = append(b.users, user)
	}
	t := topic.String()
	if cur, ok := m[t]; !ok || seq > cur {
		m[t] = max(seq, 0)
	}
}

// addReads adds one call per user that raises the read seqs the batch noted.
func (b *batch) addReads() {
	for _, u := range b.users {
		marks := b.reads[u]
		topics := make([]string, 0, len(marks))
		for t := range marks {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		args := make([]any, 0, 2*len(topics)+1)
		for _, t := range topics {
			args = append(args, t, strconv.FormatInt(marks[t], 10))
		}
		args = append(args, b.s.cfg.StateTTL.Milliseconds())
		b.calls = append(b.calls, call{Script: maxHSet, Keys: []string{b.s.readMarksKey(b.tenant, u)}, Args: args})
	}
}

// isHot reports whether topic's messages are cached: group topics at or above MinGroupSize.
func (b *batch) isHot(ctx context.Context, topic domain.Topic) bool {
	if topic.Kind() != domain.TopicGroup {
		return false
	}
	s := b.s
	if s.sizer == nil || s.cfg.MinGroupSize <= 0 {
		return true
	}
	if hot, ok := b.hot[topic.GroupID()]; ok {
		return hot
	}
	n, err := s.sizer.GroupSize(ctx, b.tenant, topic.GroupID())
	hot := err != nil || n >= s.cfg.MinGroupSize
	b.hot[topic.GroupID()] = hot
	return hot
}

// run sends calls in one pipeline round trip (internal/redisscript.Run: EVALSHA, and EVAL for
// the calls Redis answers NOSCRIPT after a restart or SCRIPT FLUSH) and returns the first error.
func (s *Store) run(ctx context.Context, calls []call) error {
	if len(calls) == 0 {
		return nil
	}
	return redisErr("hot: apply", redisscript.FirstErr(redisscript.Run(ctx, s.rdb, calls, nil)))
}

// decode unmarshals the payload and parses the topic it names.
func decode(env domain.Envelope, into any, topicOf func() string) (domain.Topic, error) {
	if err := env.Decode(into); err != nil {
		return domain.Topic{}, fmt.Errorf("hot: event %s: %w", env.EventID,
			&domain.ValidationError{Field: "payload", Reason: "bad_event", Detail: err.Error()})
	}
	topic, err := domain.ParseTopic(topicOf())
	if err != nil {
		return domain.Topic{}, fmt.Errorf("hot: event %s: %w", env.EventID, err)
	}
	return topic, nil
}

// stamp formats t (or the event time when t is unset) as the millisecond UTC time the stores keep.
func stamp(t, fallback time.Time) string {
	if t.IsZero() {
		t = fallback
	}
	return readmodels.Millis(t).Format(time.RFC3339Nano)
}

// tombstoneTTL is the lifetime of a recall tombstone or edit placeholder created before the
// snapshot: a full TTL for group topics, none for 1:1 topics, which are never cached.
func (s *Store) tombstoneTTL(topic domain.Topic) int64 {
	if topic.Kind() != domain.TopicGroup {
		return 0
	}
	return s.cfg.TTL.Milliseconds()
}

func (s *Store) raiseReadSeqCall(tenant domain.TenantID, user domain.UserID, topic domain.Topic, seq int64) call {
	return call{Script: maxHSet, Keys: []string{s.readMarksKey(tenant, user)},
		Args: []any{topic.String(), strconv.FormatInt(max(seq, 0), 10), s.cfg.StateTTL.Milliseconds()}}
}

// RaiseWatermark records that every seq of topic up to w is in place, as the MySQL read model
// knows (readers write its watermark back this way), and returns the watermark Redis now holds.
func (s *Store) RaiseWatermark(ctx context.Context, tenant domain.TenantID, topic domain.Topic, w int64) (int64, error) {
	c := s.watermarkCall(tenant, topic, 0, w)
	n, err := c.Script.Run(ctx, s.rdb, c.Keys, c.Args...).Int64()
	return n, redisErr("hot: raise watermark", err)
}

// RaiseLastSeq raises topic's last projected seq to seq if that is higher. Readers use it to write
// back a value read from MySQL.
func (s *Store) RaiseLastSeq(ctx context.Context, tenant domain.TenantID, topic domain.Topic, seq int64) error {
	err := maxSetScript.Run(ctx, s.rdb, []string{s.lastSeqKey(tenant, topic.String())}, seq, s.cfg.StateTTL.Milliseconds()).Err()
	return redisErr("hot: raise last seq", err)
}

// RaiseReadSeq raises user's read seq in topic to seq if that is higher (0 creates the field).
func (s *Store) RaiseReadSeq(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic, seq int64) error {
	c := s.raiseReadSeqCall(tenant, user, topic, seq)
	return redisErr("hot: raise read seq", c.Script.Run(ctx, s.rdb, c.Keys, c.Args...).Err())
}
