package hot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/rediskeys"
)

// Verification. The hot read model is a function of the event log, the clock and the
// configuration (TTL, MinGroupSize, MaxPerTopic), so it can be checked the way the MySQL read
// models are: apply the log again to a scratch copy under another key prefix (WithPrefix, the
// same ApplyBatch), compare what the live keys hold with the scratch keys (Compare), and drop
// the scratch copy (DropTenant).

// WithPrefix returns a Store with s's configuration and group sizer whose keys start with
// prefix instead: a scratch copy of the read model. The prefix must not contain braces.
func (s *Store) WithPrefix(prefix string) (*Store, error) {
	cfg := s.cfg
	cfg.Prefix = prefix
	return NewStore(s.rdb, cfg, s.sizer)
}

// Prefix returns the prefix of s's keys.
func (s *Store) Prefix() string { return s.cfg.Prefix }

// Touches returns the topic whose keys env's event writes and the users whose read marks it
// writes (none for events the store ignores, and for events that do not decode).
func Touches(env domain.Envelope) (topic string, users []domain.UserID) {
	var p struct {
		Topic string        `json:"topic"`
		From  domain.UserID `json:"from"`
		User  domain.UserID `json:"user"`
		To    domain.UserID `json:"to"`
	}
	switch env.EventType {
	case domain.EventGroupMessageSent, domain.EventDirectMessageSent, domain.EventGroupReadMarked, domain.EventDirectReadMarked,
		domain.EventGroupMessageRecalled, domain.EventDirectMessageRecalled, domain.EventGroupMessageEdited, domain.EventDirectMessageEdited,
		domain.EventGroupSeqSkipped, domain.EventDirectSeqSkipped:
	default:
		return "", nil
	}
	if env.Decode(&p) != nil {
		return "", nil
	}
	for _, u := range []domain.UserID{p.From, p.User, p.To} {
		if u > 0 {
			users = append(users, u)
		}
	}
	if t, err := domain.ParseTopic(p.Topic); err == nil && t.Kind() == domain.TopicDirect && p.From > 0 {
		users = append(users, t.Peer(p.From))
	}
	return p.Topic, users
}

// Diff is one difference between the live hot read model and what the log says it should hold.
type Diff struct {
	Topic  string
	Detail string
}

func (d Diff) String() string { return d.Topic + ": " + d.Detail }

// snapshotFields are the hash fields Compare checks, in report order.
var snapshotFields = []string{fieldMeta, fieldContent, fieldVersion, fieldUpdated, fieldRecalled, fieldRecalledAt, fieldRecalledBy, fieldSkipped}

// Compare reports how the live keys of s differ from the keys of check, a scratch copy built from
// the log with WithPrefix, for the given topics and users of tenant:
//
//   - each topic's hot window: the seqs indexed with a snapshot, and every field of each snapshot
//     (meta, content, version, updated, recall); a message whose snapshot expires within margin of
//     now is left out, since the two copies may straddle its expiry;
//   - each topic's last seq, when the copy from the log holds a snapshot of the topic (a topic
//     idle for longer than StateTTL has lost its key legitimately), and its watermark where the
//     live copy knows one;
//   - each user's read marks, field by field, where the live hash exists.
//
// Diffs are sorted by topic. Errors wrap domain.ErrRetryable when Redis fails.
func (s *Store) Compare(ctx context.Context, tenant domain.TenantID, check *Store, topics []string, users []domain.UserID, now time.Time, margin time.Duration) ([]Diff, error) {
	var diffs []Diff
	for start := 0; start < len(topics); start += 200 {
		d, err := s.compareTopics(ctx, tenant, check, topics[start:min(start+200, len(topics))], now, margin)
		if err != nil {
			return nil, err
		}
		diffs = append(diffs, d...)
	}
	for start := 0; start < len(users); start += 500 {
		d, err := s.compareReadMarks(ctx, tenant, check, users[start:min(start+500, len(users))])
		if err != nil {
			return nil, err
		}
		diffs = append(diffs, d...)
	}
	sort.SliceStable(diffs, func(i, j int) bool { return diffs[i].Topic < diffs[j].Topic })
	return diffs, nil
}

// window is what one copy holds for a topic.
type window struct {
	last    string // "" when missing
	wm      string // the watermark, "" when not known
	members []string
	snaps   map[string]map[string]string // seq -> hash fields, only seqs whose hash exists
}

func (s *Store) compareTopics(ctx context.Context, tenant domain.TenantID, check *Store, topics []string, now time.Time, margin time.Duration) ([]Diff, error) {
	live, err := s.windows(ctx, tenant, topics)
	if err != nil {
		return nil, err
	}
	want, err := check.windows(ctx, tenant, topics)
	if err != nil {
		return nil, err
	}
	var diffs []Diff
	for i, topic := range topics {
		l, w := live[i], want[i]
		add := func(format string, args ...any) {
			diffs = append(diffs, Diff{Topic: topic, Detail: fmt.Sprintf(format, args...)})
		}
		if l.last != w.last && (l.last != "" || len(w.snaps) > 0) {
			add("last seq: live %s, log %s", orNone(l.last), orNone(w.last))
		}
		if l.wm != "" && l.wm != w.wm {
			add("watermark: live %s, log %s", l.wm, orNone(w.wm))
		}
		seqs := map[string]bool{}
		for seq := range l.snaps {
			seqs[seq] = true
		}
		for seq := range w.snaps {
			seqs[seq] = true
		}
		for _, seq := range sortedSeqs(seqs) {
			ls, lok := l.snaps[seq]
			ws, wok := w.snaps[seq]
			if s.nearExpiry(ls, now, margin) || s.nearExpiry(ws, now, margin) {
				continue
			}
			switch {
			case !lok:
				add("seq %s: missing from the hot window", seq)
			case !wok:
				add("seq %s: in the hot window, but the log does not put it there", seq)
			default:
				for _, f := range snapshotFields {
					if !sameField(f, ls[f], ws[f]) {
						add("seq %s: %s differs: live %s, log %s", seq, fieldName(f), orNone(ls[f]), orNone(ws[f]))
					}
				}
			}
		}
	}
	return diffs, nil
}

// windows reads the last seq, the indexed seqs and their snapshots of each topic in two round
// trips.
func (s *Store) windows(ctx context.Context, tenant domain.TenantID, topics []string) ([]window, error) {
	pipe := s.rdb.Pipeline()
	lasts := make([]*redis.StringCmd, len(topics))
	wms := make([]*redis.StringCmd, len(topics))
	members := make([]*redis.StringSliceCmd, len(topics))
	for i, t := range topics {
		lasts[i] = pipe.Get(ctx, s.lastSeqKey(tenant, t))
		wms[i] = pipe.HGet(ctx, s.watermarkKey(tenant, t), "w")
		members[i] = pipe.ZRange(ctx, s.seqsKey(tenant, t), 0, -1)
	}
	_, _ = pipe.Exec(ctx)
	out := make([]window, len(topics))
	pipe = s.rdb.Pipeline()
	hashes := make([][]*redis.MapStringStringCmd, len(topics))
	for i, t := range topics {
		if err := errors.Join(cmdErr(lasts[i]), cmdErr(wms[i]), cmdErr(members[i])); err != nil {
			return nil, redisErr("hot: compare", err)
		}
		out[i] = window{last: lasts[i].Val(), wm: wms[i].Val(), members: members[i].Val(), snaps: map[string]map[string]string{}}
		for _, m := range out[i].members {
			n, err := strconv.ParseInt(m, 10, 64)
			if err != nil {
				continue
			}
			hashes[i] = append(hashes[i], pipe.HGetAll(ctx, s.msgKey(tenant, t, n)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisErr("hot: compare", err)
	}
	for i := range topics {
		for j, cmd := range hashes[i] {
			if h := cmd.Val(); len(h) > 0 {
				out[i].snaps[out[i].members[j]] = h
			}
		}
	}
	return out, nil
}

// nearExpiry reports whether a snapshot's message leaves the hot window within margin of now.
func (s *Store) nearExpiry(h map[string]string, now time.Time, margin time.Duration) bool {
	if h == nil {
		return false
	}
	var m Message
	if h[fieldSkipped] == "1" {
		// A seq-skip marker lives TTL from the time the seq was given up.
		t, err := time.Parse(time.RFC3339Nano, h[fieldUpdated])
		if err != nil {
			return false
		}
		m.SentAt = t
	} else if json.Unmarshal([]byte(h[fieldMeta]), &m) != nil || m.SentAt.IsZero() {
		return false
	}
	left := m.SentAt.Add(s.cfg.TTL).Sub(now)
	return left < margin && left > -margin
}

func (s *Store) compareReadMarks(ctx context.Context, tenant domain.TenantID, check *Store, users []domain.UserID) ([]Diff, error) {
	read := func(st *Store) ([]*redis.MapStringStringCmd, error) {
		pipe := st.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(users))
		for i, u := range users {
			cmds[i] = pipe.HGetAll(ctx, st.readMarksKey(tenant, u))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, redisErr("hot: compare read marks", err)
		}
		return cmds, nil
	}
	live, err := read(s)
	if err != nil {
		return nil, err
	}
	want, err := read(check)
	if err != nil {
		return nil, err
	}
	var diffs []Diff
	for i, u := range users {
		l, w := live[i].Val(), want[i].Val()
		if len(l) == 0 {
			continue // expired after StateTTL without a write, or never written: readers use MySQL
		}
		topics := map[string]bool{}
		for t := range l {
			topics[t] = true
		}
		for t := range w {
			topics[t] = true
		}
		for _, t := range sortedKeys(topics) {
			if l[t] != w[t] {
				diffs = append(diffs, Diff{Topic: t, Detail: fmt.Sprintf("read mark of user %s: live %s, log %s", u, orNone(l[t]), orNone(w[t]))})
			}
		}
	}
	return diffs, nil
}

// sameField compares one snapshot field; JSON fields compare as JSON values.
func sameField(f, a, b string) bool {
	if a == b {
		return true
	}
	if f != fieldMeta && f != fieldContent {
		return false
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func fieldName(f string) string {
	switch f {
	case fieldMeta:
		return "snapshot"
	case fieldContent:
		return "content"
	case fieldVersion:
		return "version"
	case fieldUpdated:
		return "updated_at"
	case fieldRecalled:
		return "recalled"
	case fieldRecalledAt:
		return "recalled_at"
	case fieldRecalledBy:
		return "recalled_by"
	case fieldSkipped:
		return "seq-skip marker"
	}
	return f
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	if len(s) > 80 {
		return strconv.Quote(s[:77] + "...")
	}
	if bytes.ContainsAny([]byte(s), " \t\n\"") {
		return strconv.Quote(s)
	}
	return s
}

func sortedSeqs(m map[string]bool) []string {
	out := sortedKeys(m)
	sort.SliceStable(out, func(i, j int) bool {
		a, _ := strconv.ParseInt(out[i], 10, 64)
		b, _ := strconv.ParseInt(out[j], 10, 64)
		return a < b
	})
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DropTenant deletes every key of tenant under s's prefix and returns how many it deleted. It
// scans the keyspace, so it is meant for a scratch copy, not for the live one.
func (s *Store) DropTenant(ctx context.Context, tenant domain.TenantID) (int, error) {
	pattern := s.cfg.Prefix + tenant.String() + ":*"
	n := 0
	iter := s.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := s.rdb.Unlink(ctx, batch...).Err(); err != nil {
			return redisErr("hot: drop keys", err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return n, redisErr("hot: scan keys", err)
	}
	return n, flush()
}

// TenantKeys returns the topics and the users of tenant that have keys of the read model under
// s's prefix (hot windows, last seqs, watermarks, read marks), sorted. It scans the keyspace
// (SCAN with a MATCH on the tenant's keys, every master of a Redis Cluster), so it costs a walk
// over every key of the server, as DropTenant does; a verification passes these to Compare
// with the topics and users of the log, so that keys the log does not account for, of a topic
// or user the log never mentions, are reported too. Keys of other stores that share the prefix
// (the sequencer's counters, idempotency keys) are not the read model's and are left out.
// Errors wrap domain.ErrRetryable when Redis fails.
func (s *Store) TenantKeys(ctx context.Context, tenant domain.TenantID) (topics []string, users []domain.UserID, err error) {
	base := s.cfg.Prefix + tenant.String() + ":"
	var mu sync.Mutex
	seenTopics, seenUsers := map[string]bool{}, map[domain.UserID]bool{}
	err = rediskeys.Scan(ctx, s.rdb, base+"*", func(key string) {
		topic, user, ok := parseKey(strings.TrimPrefix(key, base))
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if topic != "" {
			seenTopics[topic] = true
		} else {
			seenUsers[user] = true
		}
	})
	if err != nil {
		return nil, nil, redisErr("hot: scan keys", err)
	}
	topics = sortedKeys(seenTopics)
	users = make([]domain.UserID, 0, len(seenUsers))
	for u := range seenUsers {
		users = append(users, u)
	}
	sort.Slice(users, func(i, j int) bool { return users[i] < users[j] })
	return topics, users, nil
}

// parseKey reads a key of the read model, without the prefix and tenant (see keys.go): the
// topic of a topic's key, or the user of a read-marks key; ok is false for any other key.
func parseKey(rest string) (topic string, user domain.UserID, ok bool) {
	if r, found := strings.CutPrefix(rest, "user:{"); found {
		id, found := strings.CutSuffix(r, "}:read_marks")
		if !found {
			return "", 0, false
		}
		u, err := domain.ParseUserID(id)
		return "", u, err == nil
	}
	r, found := strings.CutPrefix(rest, "topic:{")
	if !found {
		return "", 0, false
	}
	i := strings.Index(r, "}:")
	if i <= 0 {
		return "", 0, false
	}
	switch suffix := r[i+2:]; {
	case suffix == "hot_msg_seqs", suffix == "proj_last_seq", suffix == "proj_wm", suffix == "proj_seen",
		strings.HasPrefix(suffix, "hot_msg:"):
		return r[:i], 0, true
	}
	return "", 0, false
}
