package ws

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
)

// handle decodes one client message and dispatches it. A message must be a JSON object with
// exactly one key, the frame type; a message with the frame type twice is refused, answering the
// id of the first.
func (s *session) handle(ctx context.Context, payload []byte) {
	s.applyDrops(ctx)
	typ, body, err := splitFrame(payload)
	if err != nil {
		text := errNotOneKey.Error()
		if errors.Is(err, errDuplicateKey) {
			text = "a frame is a JSON object with exactly one key: duplicate key"
		}
		s.refuse(errCtrl(frameID(body), http.StatusBadRequest, ReasonBadFrame, text))
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.g.cfg.RequestTimeout)
	s.dispatch(ctx, typ, body)
	cancel()
	s.g.metrics.frameObserver(typ).Observe(time.Since(start).Seconds())
}

func (s *session) dispatch(ctx context.Context, typ string, body json.RawMessage) {
	if hook := s.g.frameHook.Load(); hook != nil {
		(*hook)(typ)
	}
	switch typ {
	case "hi":
		var f hiFrame
		if s.decode(typ, body, &f) {
			s.onHi(f)
		}
	case "login":
		var f loginFrame
		if s.decode(typ, body, &f) {
			s.onLogin(ctx, f)
		}
	case "sub":
		var f topicFrame
		if s.decode(typ, body, &f) {
			s.onSub(ctx, f)
		}
	case "leave":
		var f topicFrame
		if s.decode(typ, body, &f) {
			s.onLeave(ctx, f)
		}
	case "pub":
		var f pubFrame
		if s.decode(typ, body, &f) {
			s.onPub(ctx, f)
		}
	case "get":
		var f getFrame
		if s.decode(typ, body, &f) {
			s.onGet(ctx, f)
		}
	case "note":
		var f noteFrame
		if s.decode(typ, body, &f) {
			s.onNote(ctx, f)
		}
	case "ping":
		var f pingFrame
		if s.decode(typ, body, &f) {
			s.sendCtrl(ctrl{ID: f.ID, Code: http.StatusOK, Text: "pong"})
		}
	default:
		if !json.Valid(body) {
			s.refuse(errCtrl("", http.StatusBadRequest, ReasonBadFrame, "malformed frame: "+errMalformedJSON.Error()))
			return
		}
		s.refuse(errCtrl(frameID(body), http.StatusBadRequest, ReasonUnknownFrame, "unknown frame type "+quote(typ)))
	}
}

// decode unmarshals the body of a frame of type typ; a body that does not fit is answered 400
// bad_frame. Field names match exactly and only once (checkKeys), not as encoding/json matches
// them.
func (s *session) decode(typ string, body json.RawMessage, v any) bool {
	msg := ""
	if err := checkKeys(body, frameFields[typ]); err != nil {
		msg = err.Error()
	} else if err := json.Unmarshal(body, v); err != nil {
		msg = domain.DescribeJSONError(err)
	}
	if msg != "" {
		s.refuse(errCtrl(frameID(body), http.StatusBadRequest, ReasonBadFrame, "malformed frame: "+msg))
		return false
	}
	return true
}

// refuse answers a refused frame and counts it.
func (s *session) refuse(c ctrl) {
	s.g.metrics.refused.WithLabelValues(c.Reason).Inc()
	s.sendCtrl(c)
}

// fail answers frame id with the mapping of err.
func (s *session) fail(ctx context.Context, id string, err error) {
	c := mapError(id, err)
	if c.Code >= 500 {
		s.g.log.WarnContext(ctx, "ws: frame failed", "tenant_id", s.tenant.String(), "code", c.Code, "err", err)
	}
	s.refuse(c)
}

// authenticated reports whether the session may act; if not it answers frame id with 401. A
// session whose token expired, or that the Gate no longer admits (a ban, a revocation or a
// suspension whose notice this node missed), is ended.
func (s *session) authenticated(ctx context.Context, id string) bool {
	switch {
	case s.user == 0:
		s.refuse(errCtrl(id, http.StatusUnauthorized, ReasonNotAuthenticated, "login first"))
		return false
	case s.tokenExpired(time.Now()):
		s.endSession(ReasonTokenExpired)
		return false
	}
	if err := s.gateCheck(ctx, auth.Principal{Tenant: s.tenant, User: s.user, ExpiresAt: s.expires, IssuedAt: s.issued, Session: s.login}); err != nil {
		c := mapError(id, err)
		if c.Code >= 500 {
			s.fail(ctx, id, err)
			return false
		}
		s.endSession(c.Reason)
		return false
	}
	return true
}

// topicOf parses a frame's topic, answering frame id with 400 when it is bad.
func (s *session) topicOf(ctx context.Context, id, name string) (domain.Topic, bool) {
	t, err := domain.ParseTopic(name)
	if err != nil {
		s.fail(ctx, id, err)
		return domain.Topic{}, false
	}
	return t, true
}

// publishPres tells a topic's other sessions that this user came ("on") or went ("off").
func (s *session) publishPres(t domain.Topic, what string) {
	s.g.deps.Publisher.Publish(&fanout.Message{Kind: fanout.KindPres, Tenant: s.tenant, Topic: t, From: s.user,
		What: what, TS: time.Now().UTC(), SkipSession: s.id})
}

// publishOff tells each of topics, which the session has left, that its user went "off" there,
// unless another session of the user is still subscribed to it, on this node or (as presence
// says) another: a user with two devices stays "on" while either is in the topic. When presence
// cannot be read, "off" goes out as before.
func (s *session) publishOff(ctx context.Context, topics []domain.Topic) {
	gone := make([]domain.Topic, 0, len(topics))
	for _, t := range topics {
		if !s.g.deps.Hub.hasUser(hubKey{s.tenant, t.String()}, s.user) {
			gone = append(gone, t)
		}
	}
	if s.pres != nil && len(gone) > 0 {
		if in, err := s.pres.OnlineIn(ctx, gone); err != nil {
			s.g.log.WarnContext(ctx, "ws: presence of left topics unread; announcing off", "tenant_id", s.tenant.String(), "err", err)
		} else {
			still := gone
			gone = gone[:0:0]
			for i, t := range still {
				if !in[i] {
					gone = append(gone, t)
				}
			}
		}
	}
	for _, t := range gone {
		s.publishPres(t, "off")
	}
}

func quote(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	b, _ := json.Marshal(s)
	return string(b)
}
