package hot

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
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
//   - deleted_for_user and other types: nothing; delete-for-me is checked in MySQL by readers.
//
// Errors: a payload that does not decode wraps domain.ErrInvalid; a Redis failure wraps
// domain.ErrRetryable. A GroupSizer error does not fail Apply: the message is cached, which is
// always safe.
func (s *Store) Apply(ctx context.Context, tenant domain.TenantID, env domain.Envelope) error {
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
		return s.applySent(ctx, tenant, topic, p, env.OccurredAt)
	case domain.EventGroupMessageRecalled, domain.EventDirectMessageRecalled:
		var p domain.MessageRecalled
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		at := stamp(p.RecalledAt, env.OccurredAt)
		err = recallScript.Run(ctx, s.rdb, []string{s.msgKey(tenant, topic.String(), p.Seq)},
			at, p.By.String(), s.tombstoneTTL(topic)).Err()
		return redisErr("hot: apply recall", err)
	case domain.EventGroupMessageEdited, domain.EventDirectMessageEdited:
		var p domain.MessageEdited
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		err = editScript.Run(ctx, s.rdb, []string{s.msgKey(tenant, topic.String(), p.Seq)},
			p.EditVersion, string(p.Content), stamp(p.EditedAt, env.OccurredAt), s.tombstoneTTL(topic)).Err()
		return redisErr("hot: apply edit", err)
	case domain.EventGroupReadMarked, domain.EventDirectReadMarked:
		var p domain.ReadMarked
		topic, err := decode(env, &p, func() string { return p.Topic })
		if err != nil {
			return err
		}
		return s.RaiseReadSeq(ctx, tenant, p.User, topic, p.ReadSeq)
	}
	return nil
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

func (s *Store) applySent(ctx context.Context, tenant domain.TenantID, topic domain.Topic, p domain.MessageSent, occurred time.Time) error {
	sentAt := p.SentAt
	if sentAt.IsZero() {
		sentAt = occurred
	}
	sentAt = readmodels.Millis(sentAt)
	var ttl int64
	if s.isHot(ctx, tenant, topic) {
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
	err = sentScript.Run(ctx, s.rdb,
		[]string{s.msgKey(tenant, t, p.Seq), s.seqsKey(tenant, t), s.lastSeqKey(tenant, t)},
		p.Seq, meta, string(p.Content), sentAt.Format(time.RFC3339Nano), ttl, s.cfg.StateTTL.Milliseconds(), s.cfg.MaxPerTopic,
	).Err()
	if err != nil {
		return redisErr("hot: apply sent", err)
	}
	if err := s.RaiseReadSeq(ctx, tenant, p.From, topic, p.Seq); err != nil {
		return err
	}
	if topic.Kind() == domain.TopicDirect {
		return s.RaiseReadSeq(ctx, tenant, snap.To, topic, 0)
	}
	return nil
}

// isHot reports whether topic's messages are cached: group topics at or above MinGroupSize.
func (s *Store) isHot(ctx context.Context, tenant domain.TenantID, topic domain.Topic) bool {
	if topic.Kind() != domain.TopicGroup {
		return false
	}
	if s.sizer == nil || s.cfg.MinGroupSize <= 0 {
		return true
	}
	n, err := s.sizer.GroupSize(ctx, tenant, topic.GroupID())
	return err != nil || n >= s.cfg.MinGroupSize
}

// RaiseLastSeq raises topic's last projected seq to seq if that is higher. Readers use it to write
// back a value read from MySQL.
func (s *Store) RaiseLastSeq(ctx context.Context, tenant domain.TenantID, topic domain.Topic, seq int64) error {
	err := maxSetScript.Run(ctx, s.rdb, []string{s.lastSeqKey(tenant, topic.String())}, seq, s.cfg.StateTTL.Milliseconds()).Err()
	return redisErr("hot: raise last seq", err)
}

// RaiseReadSeq raises user's read seq in topic to seq if that is higher (0 creates the field).
func (s *Store) RaiseReadSeq(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic, seq int64) error {
	err := maxHSet.Run(ctx, s.rdb, []string{s.readMarksKey(tenant, user)},
		topic.String(), strconv.FormatInt(max(seq, 0), 10), s.cfg.StateTTL.Milliseconds()).Err()
	return redisErr("hot: raise read seq", err)
}
