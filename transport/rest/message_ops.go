package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

// MessageOperator acts on sent messages; *message.MessageOpsHandler implements it.
type MessageOperator interface {
	Recall(ctx context.Context, ref message.MessageRef) (message.RecallResult, error)
	Edit(ctx context.Context, cmd message.EditMessage) (message.EditResult, error)
	DeleteForMe(ctx context.Context, ref message.MessageRef) (message.DeleteResult, error)
	MarkRead(ctx context.Context, cmd message.MarkRead) (message.MarkResult, error)
}

var _ MessageOperator = (*message.MessageOpsHandler)(nil)

// MessageChange is the data of a recall, edit or delete-for-me answer.
type MessageChange struct {
	Topic     string `json:"topic" doc:"The conversation topic"`
	Seq       string `json:"seq" doc:"The message's seq (64-bit, as a string)"`
	MessageID string `json:"message_id" doc:"The message id"`
	Version   string `json:"version,omitempty" doc:"Edit: the content version after the edit (as a string)"`
	At        string `json:"at" doc:"When the change was made, UTC RFC 3339"`
}

// EditRequest is the body of PATCH /v1/im/topics/{topic}/messages/{seq}.
type EditRequest struct {
	Version string          `json:"version" doc:"The content version being edited (1 for a message never edited), as a string; a stale version is 409 conflict" example:"1"`
	Content json.RawMessage `json:"content" doc:"The new content: any non-null JSON value"`
}

// ReadRequest is the body of POST /v1/im/topics/{topic}/read.
type ReadRequest struct {
	ReadSeq string `json:"read_seq,omitempty" doc:"Everything up to this seq is read (as a string)" example:"12"`
	RecvSeq string `json:"recv_seq,omitempty" doc:"Everything up to this seq is received (as a string)" example:"12"`
}

// ReadMarks is the data of a read-marks answer.
type ReadMarks struct {
	Topic   string `json:"topic" doc:"The conversation topic"`
	ReadSeq string `json:"read_seq" doc:"The caller's read mark after the request"`
	RecvSeq string `json:"recv_seq" doc:"The caller's receive mark after the request"`
	Changed bool   `json:"changed" doc:"False when both marks were already at or past the requested seqs"`
}

// MessageParams are the {topic} and {seq} path parameters of a message.
type MessageParams struct {
	TopicParam
	Seq string `path:"seq" doc:"The message's seq (64-bit decimal)" example:"1"`
}

type messageInput struct {
	IdempotencyHeader
	MessageParams
}

type editInput struct {
	IdempotencyHeader
	MessageParams
	Body EditRequest
}

type readInput struct {
	IdempotencyHeader
	TopicParam
	Body ReadRequest
}

func (a *API) registerMessageOps() {
	const path = "/v1/im/topics/{topic}/messages/{seq}"
	errs := []int{http.StatusForbidden, http.StatusNotFound}
	huma.Register(a.huma, a.build(op{id: "recall-message", method: http.MethodPost, path: path + "/recall",
		summary: "Recall a message", tag: "messages", errs: errs,
		desc: "The sender withdraws a message within the recall window; everyone then sees it without content. " +
			"403 not_sender, recall_window_passed, already_recalled."}),
		func(ctx context.Context, in *messageInput) (*reply[MessageChange], error) {
			ref, err := a.messageRef(ctx, in.MessageParams, false)
			if err != nil {
				return nil, err
			}
			res, err := a.h.MessageOps.Recall(ctx, ref)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", ref.Tenant.String(), "topic", ref.Topic.String())
			}
			return respond(ctx, http.StatusOK, MessageChange{Topic: ref.Topic.String(), Seq: itoa(res.Seq),
				MessageID: res.MessageID, At: rfc3339(res.RecalledAt)}), nil
		})
	huma.Register(a.huma, a.build(op{id: "edit-message", method: http.MethodPatch, path: path,
		summary: "Edit a message", tag: "messages", errs: errs,
		desc: "The sender replaces a message's content within the edit window. version is the content version the " +
			"editor saw; a stale one is 409 conflict. 403 not_sender, edit_window_passed, already_recalled."}),
		func(ctx context.Context, in *editInput) (*reply[MessageChange], error) {
			ref, err := a.messageRef(ctx, in.MessageParams, false)
			if err != nil {
				return nil, err
			}
			cmd := message.EditMessage{MessageRef: ref}
			if cmd.Version, err = positive("version", in.Body.Version); err != nil {
				return nil, a.fail(ctx, err)
			}
			if cmd.Content, err = domain.NewContent(in.Body.Content, a.contentLimit(ctx, ref.Tenant)); err != nil {
				return nil, a.fail(ctx, err)
			}
			res, err := a.h.MessageOps.Edit(ctx, cmd)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", ref.Tenant.String(), "topic", ref.Topic.String())
			}
			return respond(ctx, http.StatusOK, MessageChange{Topic: ref.Topic.String(), Seq: itoa(res.Seq),
				MessageID: res.MessageID, Version: itoa(res.Version), At: rfc3339(res.EditedAt)}), nil
		})
	huma.Register(a.huma, a.build(op{id: "delete-message", method: http.MethodDelete, path: path,
		summary: "Delete a message for the caller", tag: "messages", errs: errs,
		desc: "Hides the message from the caller's history only; everyone else still sees it."}),
		func(ctx context.Context, in *messageInput) (*reply[MessageChange], error) {
			ref, err := a.messageRef(ctx, in.MessageParams, true)
			if err != nil {
				return nil, err
			}
			res, err := a.h.MessageOps.DeleteForMe(ctx, ref)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", ref.Tenant.String(), "topic", ref.Topic.String())
			}
			return respond(ctx, http.StatusOK, MessageChange{Topic: ref.Topic.String(), Seq: itoa(res.Seq),
				MessageID: res.MessageID, At: rfc3339(res.DeletedAt)}), nil
		})
	a.registerMarkRead()
}

func (a *API) registerMarkRead() {
	huma.Register(a.huma, a.build(op{id: "mark-read", method: http.MethodPost, path: "/v1/im/topics/{topic}/read",
		summary: "Move the caller's read and receive marks", tag: "messages", errs: []int{http.StatusForbidden},
		desc: "Marks only move forward; a mark at or below the current one changes nothing (changed=false). " +
			"A seq beyond the topic's last seq is 400 invalid (seq/beyond_last_seq)."}),
		func(ctx context.Context, in *readInput) (*reply[ReadMarks], error) {
			p := principal(ctx)
			topic, err := a.readableTopic(ctx, p, in.Topic)
			if err != nil {
				return nil, err
			}
			cmd := message.MarkRead{Tenant: p.Tenant, Topic: topic, User: p.User, TraceID: RequestID(ctx)}
			if cmd.ReadSeq, err = seqParam("read_seq", in.Body.ReadSeq); err != nil {
				return nil, a.fail(ctx, err)
			}
			if cmd.RecvSeq, err = seqParam("recv_seq", in.Body.RecvSeq); err != nil {
				return nil, a.fail(ctx, err)
			}
			res, err := a.h.MessageOps.MarkRead(ctx, cmd)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String(), "topic", topic.String())
			}
			return respond(ctx, http.StatusOK, ReadMarks{Topic: topic.String(), ReadSeq: itoa(res.ReadSeq),
				RecvSeq: itoa(res.RecvSeq), Changed: res.Changed}), nil
		})
}

// messageRef builds the reference of the addressed message for the caller. With read, the
// caller must be allowed to read the topic (delete-for-me); recall and edit are the sender's
// own business, which the handler checks.
func (a *API) messageRef(ctx context.Context, in MessageParams, read bool) (message.MessageRef, error) {
	p := principal(ctx)
	var (
		topic domain.Topic
		err   error
	)
	if read {
		topic, err = a.readableTopic(ctx, p, in.Topic)
	} else if topic, err = domain.ParseTopic(in.Topic); err != nil {
		err = a.fail(ctx, err)
	}
	if err != nil {
		return message.MessageRef{}, err
	}
	seq, err := positive("seq", in.Seq)
	if err != nil {
		return message.MessageRef{}, a.fail(ctx, err)
	}
	return message.MessageRef{Tenant: p.Tenant, Topic: topic, Seq: seq, Actor: p.User, TraceID: RequestID(ctx)}, nil
}

// positive parses a required positive 64-bit decimal.
func positive(field, s string) (int64, error) {
	if s == "" {
		return 0, &domain.ValidationError{Field: field, Reason: "required"}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, &domain.ValidationError{Field: field, Reason: "bad_format", Detail: "a positive 64-bit decimal number"}
	}
	return n, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
