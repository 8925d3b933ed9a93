package ratelimit

import (
	"context"

	"github.com/imledger/imledger/commands/message"
)

// MessageSender sends a message (*message.SendMessageHandler).
type MessageSender interface {
	Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error)
}

// SendLimiter is a MessageSender that checks the sender's and the topic's send limits before it
// hands the send on; a refused send reaches no store, so nothing is written and no seq is taken.
type SendLimiter struct {
	next    MessageSender
	limiter *Limiter
}

var _ MessageSender = (*SendLimiter)(nil)

// LimitSends wraps next with the send limits of l.
func LimitSends(next MessageSender, l *Limiter) *SendLimiter {
	return &SendLimiter{next: next, limiter: l}
}

// Handle refuses the send with a *domain.RateLimitedError over send_user or send_topic, with a
// retryable error when Redis does not answer, and otherwise returns what the wrapped sender does.
// Both limits cost one pipelined round trip shared with the concurrent sends (Limiter.AllowSend).
func (s *SendLimiter) Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error) {
	if err := s.limiter.AllowSend(ctx, cmd.Tenant, cmd.From.String(), cmd.Topic.String()); err != nil {
		return message.SendResult{}, err
	}
	return s.next.Handle(ctx, cmd)
}
