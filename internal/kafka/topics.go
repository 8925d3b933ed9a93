package kafka

// Base topic names (DESIGN §4). Config.Topic applies the configured prefix; these names are a
// wire contract and are never renamed.
const (
	// TopicMessagePersist carries 1:1 message events (category direct_message).
	TopicMessagePersist = "im.message.persist"
	// TopicGroupMessagePersist carries group message events (category group_message).
	TopicGroupMessagePersist = "im.group.message.persist"
	// TopicBusinessEvent carries group, membership, relation and user events (category business).
	TopicBusinessEvent = "im.business.event"
	// TopicSessionEvent carries connect and disconnect events (category session).
	TopicSessionEvent = "im.session.event"
	// TopicAdminCommand carries commands from admin systems.
	TopicAdminCommand = "im.admin.command"
	// TopicAdminCommandResult carries the outcome of each admin command.
	TopicAdminCommandResult = "im.admin.command.result"
	// TopicConfigEvent carries configuration changes (category config: tenant lifecycle and
	// settings), which every node follows to refresh its tenant cache.
	TopicConfigEvent = "im.config.event"
	// TopicCacheInvalidate carries cache invalidation hints.
	TopicCacheInvalidate = "im.cache.invalidate"
	// TopicMessagePush carries offline push tasks {type, topic, seq, tenant_id, user_id}, keyed
	// "<tenant>:<user_id>" (transport/push).
	TopicMessagePush = "im.message.push"
	// TopicFileSecurity carries file security-check tasks {tenant_id, file_id, object_key,
	// content_type, size}, keyed "<tenant>:<file_id>" (commands/files); never the bytes.
	TopicFileSecurity = "im.file.security"
	// TopicAuditEvent carries audit events (category audit).
	TopicAuditEvent = "im.audit.event"
	// TopicDeadLetter carries messages that a consumer gave up on.
	TopicDeadLetter = "im.dead.letter"
)

// CarriesMessages reports whether base is a topic of message events, the busiest topics by far:
// their consumers batch fetches, the others can afford a fetch per record.
func CarriesMessages(base string) bool {
	return base == TopicMessagePersist || base == TopicGroupMessagePersist
}

// TopicNames returns every base topic name, unprefixed, in a fixed order.
func TopicNames() []string {
	return []string{
		TopicMessagePersist, TopicGroupMessagePersist, TopicBusinessEvent, TopicSessionEvent,
		TopicAdminCommand, TopicAdminCommandResult, TopicConfigEvent, TopicCacheInvalidate,
		TopicMessagePush, TopicAuditEvent, TopicDeadLetter, TopicFileSecurity,
	}
}

// categoryTopics maps an event category, by the value of domain.Category (a wire contract that
// is never renamed), to its base topic. The package sits below the layers and cannot import
// domain; commands/relay's tests check that every category domain registers has a topic here.
var categoryTopics = map[string]string{
	"group_message":  TopicGroupMessagePersist,
	"direct_message": TopicMessagePersist,
	"business":       TopicBusinessEvent,
	"session":        TopicSessionEvent,
	"audit":          TopicAuditEvent,
	"config":         TopicConfigEvent,
}

// Topic returns the full name of a base topic: the configured prefix followed by base.
func (c Config) Topic(base string) string { return c.TopicPrefix + base }

// Topics returns the full names of every topic, in the order of TopicNames.
func (c Config) Topics() []string {
	names := TopicNames()
	for i, n := range names {
		names[i] = c.Topic(n)
	}
	return names
}

// CategoryTopic returns the full name of the topic that events of category (a domain.Category value) are published
// to. It reports false for a category it does not know; callers must not guess a topic then,
// since publishing an event to the wrong topic breaks its conversation's order.
func (c Config) CategoryTopic(category string) (string, bool) {
	base, ok := categoryTopics[category]
	if !ok {
		return "", false
	}
	return c.Topic(base), true
}

// LiveTopics returns every name under which imledger's own topics may exist: the full (prefixed)
// names of TopicNames and the base names themselves. Tools that write to a topic of an operator's
// choosing (republish) refuse these.
func (c Config) LiveTopics() []string {
	out := c.Topics()
	if c.TopicPrefix != "" {
		out = append(out, TopicNames()...)
	}
	return out
}
