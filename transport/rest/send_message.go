package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/message"
)

// MessageSender sends one message; *message.SendMessageHandler is the implementation.
type MessageSender interface {
	Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error)
}

var _ MessageSender = (*message.SendMessageHandler)(nil)

// SendMessageRequest is the body of POST /v1/im/topics/{topic}/messages.
type SendMessageRequest struct {
	ClientMsgID string          `json:"client_msg_id,omitempty" doc:"Client-chosen idempotency id, 1-64 of [A-Za-z0-9._:-], unique per sender and topic. Required." example:"c-0001"`
	MsgType     string          `json:"msg_type,omitempty" doc:"text (default), image, file, audio, video or system" example:"text"`
	Content     json.RawMessage `json:"content,omitempty" doc:"Message content: any non-null JSON value, at most the configured size (64 KiB by default). Required."`
	Head        json.RawMessage `json:"head,omitempty" doc:"Optional head: {mentions: [user id strings], mention_all, reply_seq, root_seq}"`
}

// SentMessage is the data of a send's answer.
type SentMessage struct {
	Topic       string `json:"topic" doc:"The conversation topic"`
	ClientMsgID string `json:"client_msg_id" doc:"The client_msg_id of the request"`
	Seq         string `json:"seq" doc:"The message's sequence number in its topic (64-bit, as a string)" example:"1"`
	MessageID   string `json:"message_id" doc:"The message id (UUIDv7), also its event id"`
	Duplicate   bool   `json:"duplicate" doc:"True when an earlier send with the same client_msg_id answered this one; nothing new was written"`
	SentAt      string `json:"sent_at" doc:"When the message was first sent, UTC RFC 3339"`
}

type sendMessageInput struct {
	IdempotencyHeader
	TopicParam
	Body SendMessageRequest
}

// TopicParam is the {topic} path parameter.
type TopicParam struct {
	Topic string `path:"topic" doc:"Conversation topic: grp<group id> or p2p<low user id>_<high user id>" example:"grp1"`
}

func (a *API) registerSendMessage(s MessageSender) {
	huma.Register(a.huma, a.build(op{id: "send-message", method: http.MethodPost, path: "/v1/im/topics/{topic}/messages",
		summary: "Send a message to a topic", tag: "messages", status: http.StatusCreated,
		desc: "Appends a message to the topic and answers with its seq once it is committed. " +
			"201 for a new message; 200 with duplicate=true when the same sender already sent this client_msg_id " +
			"to this topic (the first answer's seq and message_id are returned and nothing is written).",
		errs:   []int{http.StatusForbidden, http.StatusNotFound, http.StatusTooManyRequests},
		alsoOK: map[int]string{http.StatusOK: "a duplicate: this sender sent this client_msg_id to this topic before; data.duplicate is true, nothing was written"}}),
		func(ctx context.Context, in *sendMessageInput) (*reply[SentMessage], error) {
			p := principal(ctx)
			cmd, err := message.NewSendMessage(message.SendMessageInput{
				Tenant: p.Tenant.String(), From: p.User.String(), Topic: in.Topic,
				ClientMsgID: in.Body.ClientMsgID, MsgType: in.Body.MsgType,
				Content: in.Body.Content, Head: in.Body.Head, TraceID: RequestID(ctx),
			}, a.contentLimit(ctx, p.Tenant))
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			res, err := s.Handle(ctx, cmd)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String(), "topic", in.Topic)
			}
			status := http.StatusCreated
			if res.Duplicate {
				status = http.StatusOK
			}
			return respond(ctx, status, SentMessage{
				Topic: cmd.Topic.String(), ClientMsgID: cmd.ClientMsgID.String(),
				Seq: strconv.FormatInt(res.Seq, 10), MessageID: res.MessageID, Duplicate: res.Duplicate,
				SentAt: res.SentAt.UTC().Format(time.RFC3339Nano),
			}), nil
		})
}
