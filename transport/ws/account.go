package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/smallmap"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
)

// Gate decides whether a logged-in principal may go on: its tenant exists and is active, its user
// is not banned, and its token was issued after the user's and the tenant's not-before times.
// Admit returns nil or the refusal: a *domain.DeniedError (tenant_not_found, tenant_suspended,
// user_banned) or an error wrapping account.ErrTokenRevoked. MaxContentBytes is the tenant's
// limit on a pub's content, at most the gateway's own; 0 means the gateway's own.
type Gate interface {
	Admit(ctx context.Context, p auth.Principal) error
	MaxContentBytes(ctx context.Context, tenant domain.TenantID) int
}

// Reasons of the ctrl frame that ends a session for an account or tenant change.
const (
	ReasonUserBanned      = domain.ReasonUserBanned      // 403: the user was banned
	ReasonTokenRevoked    = "token_revoked"              // 401: the session's token was revoked; log in with a new one
	ReasonSessionRevoked  = "session_revoked"            // 401: the token's login session was signed out; log in again
	ReasonKicked          = "kicked"                     // 401: an administrator ended the user's sessions; log in again
	ReasonTenantSuspended = domain.ReasonTenantSuspended // 403: the tenant was suspended
	ReasonTenantNotFound  = domain.ReasonTenantNotFound  // 403: the tenant does not exist
)

// userKey names a user of a tenant in the hub's index of logged-in sessions.
type userKey struct {
	tenant domain.TenantID
	user   domain.UserID
}

// userToken is what the hub keeps of a logged-in connection's token: its issue time and its
// login session ("" for a token without one), which account changes are matched against.
type userToken struct {
	issued time.Time
	login  string
}

// addUser records s as a logged-in session of its user, with its token's issue time and login
// session.
func (h *Hub) addUser(s *session, tenant domain.TenantID, user domain.UserID, issued time.Time, login string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := userKey{tenant, user}
	set := h.users[k]
	if set == nil {
		set = &smallmap.Map[*session, userToken]{}
		h.users[k] = set
	}
	set.Set(s, userToken{issued: issued, login: login})
}

// removeUser forgets s.
func (h *Hub) removeUser(s *session, tenant domain.TenantID, user domain.UserID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := userKey{tenant, user}
	set := h.users[k]
	if set == nil {
		return
	}
	set.Delete(s)
	if set.Len() == 0 {
		delete(h.users, k)
	}
}

// account applies a fanout.KindAccount message on this node: the user's channel sessions get the
// change's item, then the sessions it ends (fanout.AccountControl.Ends) get a last ctrl frame
// with the reason and are closed with 1008; a broadcast is queued to every logged-in session of
// the tenant as an info frame.
func (h *Hub) account(m *fanout.Message) {
	a := m.Account
	if a == nil {
		return
	}
	if a.What == NoticeWhat && a.User != 0 {
		frame := encodeNotice(m)
		h.mu.RLock()
		for s := range h.users[userKey{m.Tenant, a.User}].All() {
			s.send(frame)
		}
		h.mu.RUnlock()
		return
	}
	if a.What == "broadcast" {
		frame := encodeBroadcast(m)
		h.mu.RLock()
		for k, set := range h.users {
			if k.tenant != m.Tenant {
				continue
			}
			for s := range set.All() {
				s.send(frame)
			}
		}
		h.mu.RUnlock()
		return
	}
	if a.User != 0 && len(a.Item) > 0 {
		// The change as an item of the user's channel, before any session of the user ends.
		frame := wireFrame(encodeMe(a.Item))
		h.mu.RLock()
		for s := range h.users[userKey{m.Tenant, a.User}].All() {
			if s.ch != nil {
				s.sendWire(frame)
			}
		}
		h.mu.RUnlock()
	}
	if !a.EndSessions {
		return
	}
	var end []*session
	collect := func(set *smallmap.Map[*session, userToken]) {
		for s, tok := range set.All() {
			if a.Ends(tok.issued, tok.login) {
				end = append(end, s)
			}
		}
	}
	h.mu.RLock()
	if a.User != 0 {
		collect(h.users[userKey{m.Tenant, a.User}]) // one user: no walk over the node's sessions
	} else {
		for k, set := range h.users {
			if k.tenant == m.Tenant {
				collect(set)
			}
		}
	}
	h.mu.RUnlock()
	for _, s := range end {
		s.endSession(a.Reason)
	}
}

// endSession tells the client why its session ends and closes the connection with 1008.
func (s *session) endSession(reason string) {
	s.closeWith(endedCause(reason))
}

// lastWord is the ctrl without id that tells a client why the server ends its session; closeWith
// sends it before the close frame of an endedCause.
func (s *session) lastWord(reason string) {
	code := http.StatusForbidden
	if reason == ReasonTokenRevoked || reason == ReasonSessionRevoked || reason == ReasonKicked || reason == ReasonTokenExpired {
		code = http.StatusUnauthorized
	}
	s.g.metrics.refused.WithLabelValues(reason).Inc()
	s.sendCtrl(errCtrl("", code, reason, "session ended"))
}

// NoticeWhat is the AccountControl.What of a note to one user's sessions: each gets an info
// frame {"info":{"what":<Message.What>,"ts":…,"content":<Message.Content>}} (a file the security
// check rejected: what "file_rejected").
const NoticeWhat = "notice"

// encodeNotice is the info frame of a notice; content is spliced verbatim.
func encodeNotice(m *fanout.Message) []byte {
	var b bytes.Buffer
	w, _ := json.Marshal(m.What)
	b.WriteString(`{"info":{"what":`)
	b.Write(w)
	b.WriteString(`,"ts":"`)
	b.WriteString(timestamp(m.TS))
	b.WriteString(`"`)
	if len(m.Content) > 0 {
		b.WriteString(`,"content":`)
		b.Write(m.Content)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// encodeBroadcast is the info frame of a tenant broadcast; content is spliced verbatim.
func encodeBroadcast(m *fanout.Message) []byte {
	var b bytes.Buffer
	b.WriteString(`{"info":{"what":"broadcast","ts":"`)
	b.WriteString(timestamp(m.TS))
	b.WriteString(`"`)
	if len(m.Content) > 0 {
		b.WriteString(`,"content":`)
		b.Write(m.Content)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// gateCheck asks the Gate whether the session's principal may go on; nil without a Gate.
func (s *session) gateCheck(ctx context.Context, p auth.Principal) error {
	if s.g.deps.Gate == nil {
		return nil
	}
	return s.g.deps.Gate.Admit(ctx, p)
}

// contentLimit is the tenant's limit on a pub's content.
func (s *session) contentLimit(ctx context.Context) int {
	if s.g.deps.Gate != nil {
		if n := s.g.deps.Gate.MaxContentBytes(ctx, s.tenant); n > 0 && n < s.g.cfg.MaxContentBytes {
			return n
		}
	}
	return s.g.cfg.MaxContentBytes
}

// FileRejectedNotice is the fanout message that tells uploader's sessions, on every node, that
// the security check rejected their file: info frame what "file_rejected", content
// {"file_id","reason"}. Send it with Fanout.Broadcast.
func FileRejectedNotice(tenant domain.TenantID, uploader domain.UserID, fileID, reason string) *fanout.Message {
	content, _ := json.Marshal(map[string]string{"file_id": fileID, "reason": reason})
	return &fanout.Message{Kind: fanout.KindAccount, Tenant: tenant, What: "file_rejected", TS: time.Now().UTC(),
		Content: content, Account: &fanout.AccountControl{What: NoticeWhat, User: uploader}}
}
