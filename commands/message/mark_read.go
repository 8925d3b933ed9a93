package message

import (
	"context"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// MarkRead moves a user's read and/or receive mark in a topic. Zero leaves a mark unchanged.
type MarkRead struct {
	Tenant  domain.TenantID
	Topic   domain.Topic
	User    domain.UserID
	ReadSeq int64
	RecvSeq int64
	TraceID string
}

// MarkResult is the user's marks after the command.
type MarkResult struct {
	ReadSeq int64
	RecvSeq int64
	Changed bool // false when both marks were already at or past the requested seqs
}

// MarkRead records read/receive marks. Marks only move forward: a mark at or below the current one
// changes nothing and appends nothing (Changed false). Unread counts are derived from these marks
// (last seq − read seq), so nothing is written per message. A read mark that moved forward is
// told to the ReadListener once committed.
func (h *MessageOpsHandler) MarkRead(ctx context.Context, cmd MarkRead) (MarkResult, error) {
	switch {
	case cmd.Tenant.IsZero():
		return MarkResult{}, invalidField("tenant_id", "required", "")
	case cmd.Topic.IsZero():
		return MarkResult{}, invalidField("topic", "required", "")
	case cmd.User <= 0:
		return MarkResult{}, invalidField("user_id", "required", "")
	case cmd.ReadSeq < 0 || cmd.RecvSeq < 0:
		return MarkResult{}, invalidField("seq", "bad_format", "marks are non-negative")
	case cmd.ReadSeq == 0 && cmd.RecvSeq == 0:
		return MarkResult{}, invalidField("seq", "required", "read_seq or recv_seq")
	case cmd.Topic.Kind() == domain.TopicDirect && !cmd.Topic.Has(cmd.User):
		return MarkResult{}, invalidField("topic", "not_party", "the user is not one of the two users of this 1:1 topic")
	case len(cmd.TraceID) > MaxTraceIDLen || !storableText(cmd.TraceID):
		return MarkResult{}, invalidField("trace_id", domain.ReasonBadText, "at most 128 bytes of UTF-8 without U+0000")
	}
	last, err := h.store.LastVersion(ctx, cmd.Tenant, cmd.Topic.String())
	if err != nil {
		return MarkResult{}, retryable("read topic", err)
	}
	if cmd.ReadSeq > last || cmd.RecvSeq > last {
		return MarkResult{}, invalidField("seq", "beyond_last_seq", fmt.Sprintf("the topic's last seq is %d", last))
	}
	stream := domain.ReadMarksStreamID(cmd.Topic, cmd.User)
	var (
		res      MarkResult
		readMove bool
		at       time.Time
	)
	err = h.withRetry(ctx, func() error {
		readMove = false // an attempt that lost a race appended nothing
		cur, v, err := h.currentMarks(ctx, cmd.Tenant, stream)
		if err != nil {
			return err
		}
		res = MarkResult{ReadSeq: max(cur.ReadSeq, cmd.ReadSeq), RecvSeq: max(cur.RecvSeq, cmd.RecvSeq, cmd.ReadSeq)}
		if res.ReadSeq == cur.ReadSeq && res.RecvSeq == cur.RecvSeq {
			return nil
		}
		res.Changed, readMove, at = true, res.ReadSeq > cur.ReadSeq, time.Now().UTC()
		payload := domain.ReadMarked{Topic: cmd.Topic.String(), User: cmd.User, ReadSeq: res.ReadSeq,
			RecvSeq: res.RecvSeq, At: at}
		typ := domain.MessageEventType(cmd.Topic.Kind(), domain.ActionReadMarked)
		return h.appendOne(ctx, cmd.Tenant, stream, v, typ, cmd.User, cmd.TraceID, payload)
	})
	if err != nil {
		return MarkResult{}, err
	}
	if readMove && h.reads != nil {
		lctx := context.WithoutCancel(ctx)
		safely(lctx, h.log, "read listener", func() {
			h.reads.ReadMarked(lctx, CommittedRead{Tenant: cmd.Tenant, Topic: cmd.Topic, User: cmd.User, ReadSeq: res.ReadSeq, At: at})
		})
	}
	return res, nil
}

// currentMarks returns the latest marks of a read-marks stream and the stream's version.
func (h *MessageOpsHandler) currentMarks(ctx context.Context, tenant domain.TenantID, stream string) (domain.ReadMarked, int64, error) {
	v, err := h.store.LastVersion(ctx, tenant, stream)
	if err != nil || v == 0 {
		return domain.ReadMarked{}, v, retryableOrNil("read marks", err)
	}
	evs, err := h.store.ReadStream(ctx, tenant, stream, v-1, 1)
	if err != nil {
		return domain.ReadMarked{}, 0, retryable("read marks", err)
	}
	var cur domain.ReadMarked
	if len(evs) == 1 {
		if err := evs[0].Decode(&cur); err != nil {
			return domain.ReadMarked{}, 0, fmt.Errorf("decode read mark: %w", err)
		}
	}
	return cur, v, nil
}

func retryableOrNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return retryable(op, err)
}
