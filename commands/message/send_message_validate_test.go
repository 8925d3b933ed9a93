package message_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

func TestBadInputIsRejectedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{MaxContentBytes: 1024})
	valid := message.SendMessageInput{Tenant: "acme", From: "3", Topic: "grp1", ClientMsgID: "c1", Content: []byte(`"hi"`)}
	tests := []struct {
		name          string
		edit          func(*message.SendMessageInput)
		field, reason string
	}{
		{"empty topic", func(in *message.SendMessageInput) { in.Topic = "" }, "topic", "required"},
		{"unknown topic kind", func(in *message.SendMessageInput) { in.Topic = "chan1" }, "topic", "unknown_kind"},
		{"malformed group topic", func(in *message.SendMessageInput) { in.Topic = "grp01" }, "topic", "bad_format"},
		{"oversized content", func(in *message.SendMessageInput) { in.Content = []byte(`"` + strings.Repeat("a", 1100) + `"`) }, "content", "too_large"},
		{"missing client_msg_id", func(in *message.SendMessageInput) { in.ClientMsgID = "" }, "client_msg_id", "required"},
		{"invalid JSON content", func(in *message.SendMessageInput) { in.Content = []byte(`{"text":`) }, "content", "bad_json"},
		{"empty content", func(in *message.SendMessageInput) { in.Content = nil }, "content", "required"},
		{"sender not in the 1:1 topic", func(in *message.SendMessageInput) { in.Topic = "p2p1_2" }, "topic", "not_party"},
		{"bad sender", func(in *message.SendMessageInput) { in.From = "abc" }, "from", "bad_format"},
		{"bad tenant", func(in *message.SendMessageInput) { in.Tenant = "Acme!" }, "tenant_id", "bad_format"},
		{"unknown msg type", func(in *message.SendMessageInput) { in.MsgType = "sticker" }, "msg_type", "unknown"},
		{"bad head", func(in *message.SendMessageInput) { in.Head = []byte(`{"mentions":[0]}`) }, "head", "bad_json"},
		{"bad mention", func(in *message.SendMessageInput) { in.Head = []byte(`{"mentions":["-4"]}`) }, "head.mentions", "bad_format"},
		{"mention not a number", func(in *message.SendMessageInput) { in.Head = []byte(`{"mentions":["7","abc"]}`) }, "head.mentions", "bad_format"},
		{"mention zero", func(in *message.SendMessageInput) { in.Head = []byte(`{"mentions":["0"]}`) }, "head.mentions", "bad_format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := valid
			tc.edit(&in)
			_, err := message.NewSendMessage(in, 1024)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, domain.ErrInvalid) {
				t.Fatalf("NewSendMessage = %v, want a *domain.ValidationError", err)
			}
			if ve.Field != tc.field || ve.Reason != tc.reason {
				t.Errorf("rejected as %s/%s, want %s/%s", ve.Field, ve.Reason, tc.field, tc.reason)
			}
		})
	}

	// Handle checks a command built without NewSendMessage the same way.
	ok, err := message.NewSendMessage(valid, 1024)
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := domain.ParseTopic("p2p1_2")
	big, _ := domain.TextContent(strings.Repeat("a", 2000), 4096)
	handled := []struct {
		name          string
		edit          func(*message.SendMessage)
		field, reason string
	}{
		{"zero topic", func(c *message.SendMessage) { c.Topic = domain.Topic{} }, "topic", "required"},
		{"zero client_msg_id", func(c *message.SendMessage) { c.ClientMsgID = domain.ClientMsgID{} }, "client_msg_id", "required"},
		{"content above the handler's limit", func(c *message.SendMessage) { c.Content = big }, "content", "too_large"},
		{"sender not in the 1:1 topic", func(c *message.SendMessage) { c.Topic = direct }, "topic", "not_party"},
		{"too many mentions", func(c *message.SendMessage) { c.Head.Mentions = make([]domain.UserID, 101) }, "head.mentions", "too_many"},
	}
	for _, tc := range handled {
		t.Run("Handle "+tc.name, func(t *testing.T) {
			cmd := ok
			tc.edit(&cmd)
			_, err := e.h.Handle(testCtx(t), cmd)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || ve.Reason != tc.reason {
				t.Fatalf("Handle = %v, want %s/%s", err, tc.field, tc.reason)
			}
		})
	}
	if n, keys := e.countEvents(t), e.redisKeys(t); n != 0 || len(keys) != 0 {
		t.Errorf("rejected sends wrote %d events and Redis keys %v", n, keys)
	}
}

func TestNewSendMessageAcceptsGoodInput(t *testing.T) {
	t.Parallel()
	cmd, err := message.NewSendMessage(message.SendMessageInput{
		Tenant: "acme", From: "usr2", Topic: "p2p1_2", ClientMsgID: "a.b:c-1", MsgType: "image",
		Content: []byte(`{"key":"oss/1.png"}`), Head: []byte(`{"mentions":["1","1"],"reply_seq":"4"}`), TraceID: "t1",
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.From != 2 || cmd.Topic.String() != "p2p1_2" || cmd.MsgType != domain.MsgImage ||
		string(cmd.Content.Raw()) != `{"key":"oss/1.png"}` || len(cmd.Head.Mentions) != 1 || cmd.Head.ReplySeq != 4 || cmd.TraceID != "t1" {
		t.Errorf("NewSendMessage = %+v", cmd)
	}
}
