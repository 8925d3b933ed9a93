package hot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// Snapshot hash fields.
const (
	fieldMeta       = "m"  // the Message as JSON without content, version and recall fields
	fieldContent    = "c"  // content JSON; absent once recalled
	fieldVersion    = "v"  // content version
	fieldUpdated    = "u"  // last change, RFC 3339
	fieldRecalled   = "r"  // "1" once recalled
	fieldRecalledAt = "ra" // RFC 3339
	fieldRecalledBy = "rb" // user id
	fieldSkipped    = "s"  // "1": a seq-skip marker, no message
)

// Window is what the cache holds for a range of a topic.
type Window struct {
	LastSeq  int64     // the topic's last projected seq, when HasLast
	HasLast  bool      // false when the cache does not know the topic's last seq
	Messages []Message // the complete snapshots found, ascending by seq
	Skipped  []int64   // the seqs found indexed as seq-skip markers (final holes), ascending
	Complete bool      // every seq indexed in the scanned part had a complete snapshot or marker
	// Watermark is the topic's watermark, when HasWatermark: every seq up to it is in place.
	Watermark    int64
	HasWatermark bool
}

// Window reads the snapshots indexed for seqs in [fromSeq, toSeq] — at most limit of them, the
// lowest, or the highest when newest; seq-skip markers count — together with the topic's last
// seq and watermark, in two round trips. Complete is false when an indexed seq's snapshot has
// expired, was evicted or is only partly there (a tombstone or edit that arrived before its sent
// event); callers must then read MySQL. Recalled snapshots come back as placeholders without
// content; markers come back in Skipped, not as messages.
func (s *Store) Window(ctx context.Context, tenant domain.TenantID, topic domain.Topic, fromSeq, toSeq int64, limit int, newest bool) (Window, error) {
	var w Window
	if limit < 1 || fromSeq > toSeq {
		w.Complete = true
		return w, nil
	}
	t := topic.String()
	by := &redis.ZRangeBy{Min: strconv.FormatInt(fromSeq, 10), Max: seqBound(toSeq), Count: int64(limit)}
	pipe := s.rdb.Pipeline()
	lastCmd := pipe.Get(ctx, s.lastSeqKey(tenant, t))
	wmCmd := pipe.HGet(ctx, s.watermarkKey(tenant, t), "w")
	var seqsCmd *redis.StringSliceCmd
	if newest {
		seqsCmd = pipe.ZRevRangeByScore(ctx, s.seqsKey(tenant, t), by)
	} else {
		seqsCmd = pipe.ZRangeByScore(ctx, s.seqsKey(tenant, t), by)
	}
	_, _ = pipe.Exec(ctx) // errors are checked per command: a missing last seq is not one
	if err := errors.Join(cmdErr(lastCmd), cmdErr(wmCmd), cmdErr(seqsCmd)); err != nil {
		return w, redisErr("hot: read window", err)
	}
	if last, err := lastCmd.Int64(); err == nil {
		w.LastSeq, w.HasLast = last, true
	}
	if wm, err := wmCmd.Int64(); err == nil {
		w.Watermark, w.HasWatermark = wm, true
	}
	seqs := seqsCmd.Val()
	if newest {
		for i, j := 0, len(seqs)-1; i < j; i, j = i+1, j-1 {
			seqs[i], seqs[j] = seqs[j], seqs[i]
		}
	}
	msgs, skipped, complete, err := s.snapshots(ctx, tenant, t, seqs)
	if err != nil {
		return w, err
	}
	w.Messages, w.Skipped, w.Complete = msgs, skipped, complete
	return w, nil
}

// cmdErr is cmd's error, with redis.Nil (a missing key) not counted as one.
func cmdErr(cmd redis.Cmder) error {
	if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return nil
}

// seqBound formats an inclusive upper score bound; MaxInt64 means no bound.
func seqBound(seq int64) string {
	if seq == math.MaxInt64 {
		return "+inf"
	}
	return strconv.FormatInt(seq, 10)
}

// Range returns the snapshots of seqs fromSeq..toSeq (inclusive) in order; complete is true only
// when every seq of the range has a complete snapshot or a seq-skip marker. A seq that holds
// neither makes it incomplete: only a marker makes a hole final.
func (s *Store) Range(ctx context.Context, tenant domain.TenantID, topic domain.Topic, fromSeq, toSeq int64) ([]Message, bool, error) {
	if fromSeq < 1 || toSeq < fromSeq || toSeq-fromSeq >= int64(s.cfg.MaxPerTopic) {
		return nil, false, fmt.Errorf("hot: range %d..%d: %w", fromSeq, toSeq, domain.ErrInvalid)
	}
	n := int(toSeq - fromSeq + 1)
	w, err := s.Window(ctx, tenant, topic, fromSeq, toSeq, n, false)
	if err != nil {
		return nil, false, err
	}
	return w.Messages, w.Complete && len(w.Messages)+len(w.Skipped) == n, nil
}

// snapshots reads the snapshot of each seq with one pipelined round trip and returns the
// messages and the seq-skip markers found.
func (s *Store) snapshots(ctx context.Context, tenant domain.TenantID, topic string, seqs []string) ([]Message, []int64, bool, error) {
	if len(seqs) == 0 {
		return nil, nil, true, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(seqs))
	nums := make([]int64, len(seqs))
	for i, seq := range seqs {
		nums[i], _ = strconv.ParseInt(seq, 10, 64)
		cmds[i] = pipe.HMGet(ctx, s.msgKey(tenant, topic, nums[i]), fieldMeta, fieldContent, fieldVersion, fieldUpdated,
			fieldRecalled, fieldRecalledAt, fieldRecalledBy, fieldSkipped)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, false, redisErr("hot: read snapshots", err)
	}
	msgs := make([]Message, 0, len(seqs))
	var skipped []int64
	complete := true
	for i, cmd := range cmds {
		vals := cmd.Val()
		if sk, _ := vals[7].(string); sk == "1" {
			skipped = append(skipped, nums[i])
			continue
		}
		m, ok := parseSnapshot(vals)
		if !ok {
			complete = false
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs, skipped, complete, nil
}

// parseSnapshot decodes HMGET values in field order; ok is false for an incomplete snapshot.
func parseSnapshot(vals []any) (Message, bool) {
	str := func(i int) (string, bool) {
		s, ok := vals[i].(string)
		return s, ok
	}
	var m Message
	meta, hasMeta := str(0)
	version, hasVersion := str(2)
	if !hasMeta || !hasVersion || json.Unmarshal([]byte(meta), &m) != nil {
		return m, false
	}
	v, err := strconv.ParseInt(version, 10, 64)
	if err != nil {
		return m, false
	}
	m.Version = v
	m.Content = nil
	if c, ok := str(1); ok && c != "" {
		m.Content = json.RawMessage(c)
	}
	if u, ok := str(3); ok {
		if t, err := time.Parse(time.RFC3339Nano, u); err == nil {
			m.UpdatedAt = t.UTC()
		}
	}
	if r, _ := str(4); r == "1" {
		m.Status = readmodels.StatusRecalled
		if ra, ok := str(5); ok {
			if t, err := time.Parse(time.RFC3339Nano, ra); err == nil {
				t = t.UTC()
				m.RecalledAt = &t
			}
		}
		if rb, ok := str(6); ok {
			m.RecalledBy, _ = domain.ParseUserID(rb)
		}
	}
	m.Redact()
	return m, true
}

// Watermark returns topic's watermark: every seq up to it is a message or a final hole. found is
// false when the cache does not know it (never seen from the topic's first seq, expired, or its
// bitmap evicted); readers then ask MySQL and write its watermark back with RaiseWatermark.
func (s *Store) Watermark(ctx context.Context, tenant domain.TenantID, topic domain.Topic) (w int64, found bool, err error) {
	w, err = s.rdb.HGet(ctx, s.watermarkKey(tenant, topic.String()), "w").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, redisErr("hot: watermark", err)
	}
	return w, true, nil
}

// Watermarks returns the watermark of each topic the cache knows it of, keyed by topic name.
func (s *Store) Watermarks(ctx context.Context, tenant domain.TenantID, topics []domain.Topic) (map[string]int64, error) {
	out := make(map[string]int64, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(topics))
	for i, t := range topics {
		cmds[i] = pipe.HGet(ctx, s.watermarkKey(tenant, t.String()), "w")
	}
	_, _ = pipe.Exec(ctx) // errors are checked per command: a missing key is not one
	for i, cmd := range cmds {
		if err := cmdErr(cmd); err != nil {
			return nil, redisErr("hot: watermarks", err)
		}
		if n, err := cmd.Int64(); err == nil {
			out[topics[i].String()] = n
		}
	}
	return out, nil
}

// LastSeq returns topic's last projected seq; found is false when the cache does not know it.
func (s *Store) LastSeq(ctx context.Context, tenant domain.TenantID, topic domain.Topic) (seq int64, found bool, err error) {
	seq, err = s.rdb.Get(ctx, s.lastSeqKey(tenant, topic.String())).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, redisErr("hot: last seq", err)
	}
	return seq, true, nil
}

// LastSeqs returns the last projected seq of each topic the cache knows, keyed by topic name;
// unknown topics are absent from the map.
func (s *Store) LastSeqs(ctx context.Context, tenant domain.TenantID, topics []domain.Topic) (map[string]int64, error) {
	out := make(map[string]int64, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(topics))
	for i, t := range topics {
		cmds[i] = pipe.Get(ctx, s.lastSeqKey(tenant, t.String()))
	}
	_, _ = pipe.Exec(ctx) // errors are checked per command: a missing key is not one
	for i, cmd := range cmds {
		if err := cmdErr(cmd); err != nil {
			return nil, redisErr("hot: last seqs", err)
		}
		if n, err := cmd.Int64(); err == nil {
			out[topics[i].String()] = n
		}
	}
	return out, nil
}

// ReadSeq returns user's cached read seq in topic; found is false when it is not cached.
func (s *Store) ReadSeq(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) (seq int64, found bool, err error) {
	seq, err = s.rdb.HGet(ctx, s.readMarksKey(tenant, user), topic.String()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, redisErr("hot: read seq", err)
	}
	return seq, true, nil
}

// ReadSeqs returns every cached read seq of user, keyed by topic name.
func (s *Store) ReadSeqs(ctx context.Context, tenant domain.TenantID, user domain.UserID) (map[string]int64, error) {
	all, err := s.rdb.HGetAll(ctx, s.readMarksKey(tenant, user)).Result()
	if err != nil {
		return nil, redisErr("hot: read seqs", err)
	}
	out := make(map[string]int64, len(all))
	for topic, v := range all {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[topic] = n
		}
	}
	return out, nil
}
