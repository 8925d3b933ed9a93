package seq

import (
	"github.com/imledger/imledger/domain"
)

// Key identifies one send for idempotency: a sender's client_msg_id within a tenant's topic.
type Key struct {
	Tenant      domain.TenantID
	Topic       domain.Topic
	From        domain.UserID
	ClientMsgID domain.ClientMsgID
}

// topicKey returns the common part of a topic's keys: <prefix><tenant>:topic:{<topic>}.
func (a *Allocator) topicKey(tenant domain.TenantID, topic domain.Topic) string {
	return a.cfg.KeyPrefix + tenant.String() + ":topic:{" + topic.String() + "}"
}

// CounterKey returns the Redis key of a topic's seq counter (last_seq).
func (a *Allocator) CounterKey(tenant domain.TenantID, topic domain.Topic) string {
	return a.topicKey(tenant, topic) + ":last_seq"
}

// ClaimKey returns the Redis key of a send's idempotency claim.
func (a *Allocator) ClaimKey(k Key) string {
	return a.topicKey(k.Tenant, k.Topic) + ":uniq:msg:" + k.From.String() + ":" + k.ClientMsgID.String()
}
