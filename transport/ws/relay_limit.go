package ws

import (
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/smallmap"
)

// limitSubLeave names the per-connection limit on subs and leaves (Config.SubRate) in a 429's
// params.
const limitSubLeave domain.RateLimitKind = "ws_sub_leave"

// allowSubLeave counts a sub or leave that changes the session's subscriptions against
// Config.SubRate and Config.SubBurst (a generic cell rate algorithm: one time in the session, no
// timer), or returns the *domain.RateLimitedError to answer it with.
func (s *session) allowSubLeave() error {
	rate := s.g.cfg.SubRate
	if rate < 0 {
		return nil
	}
	now := time.Since(s.connectedAt) // monotonic
	step := time.Duration(float64(time.Second) / rate)
	slack := step * time.Duration(s.g.cfg.SubBurst-1)
	tat := max(s.subTAT, now)
	if wait := tat - now - slack; wait > 0 {
		return &domain.RateLimitedError{Limit: limitSubLeave, RetryAfter: wait}
	}
	s.subTAT = tat + step
	return nil
}

// maxTypingTopics is how many topics' last kp a session remembers before it forgets those past
// Config.TypingInterval.
const maxTypingTopics = 16

// relayTyping reports whether a kp of the session for topic is relayed: not when the last one it
// relayed for the topic was less than Config.TypingInterval ago. A session holds no state for
// typing until its first kp, and then only for the topics it typed in lately.
func (s *session) relayTyping(topic string) bool {
	every := s.g.cfg.TypingInterval
	if every < 0 {
		return true
	}
	now := time.Since(s.connectedAt) // monotonic
	if s.kps == nil {
		s.kps = &smallmap.Map[string, time.Duration]{}
	}
	if last, ok := s.kps.Get(topic); ok && now-last < every {
		return false
	}
	if s.kps.Len() >= maxTypingTopics {
		var stale []string
		for t, last := range s.kps.All() {
			if now-last >= every {
				stale = append(stale, t)
			}
		}
		for _, t := range stale {
			s.kps.Delete(t)
		}
	}
	s.kps.Set(topic, now)
	return true
}
