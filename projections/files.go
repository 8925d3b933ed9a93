package projections

import (
	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
)

// The files-refs projection's name and consumer group (never renamed).
const (
	ProjectionFileRefsMySQL = "files-refs"
	GroupFileRefsMySQL      = "imledger.proj.files-refs.mysql.v1"
)

// FileRefsMySQL is the files-refs projection: every sent message that names files in its head
// becomes one reference per file in the tenant's im_group_files (source_topic, source_seq), so the
// collector never deletes a file a message carries. The applier (filedb.Store.ApplyRefs) ignores
// a reference it holds already. group "" means GroupFileRefsMySQL.
func FileRefsMySQL(applier Applier, group string) Projection {
	if group == "" {
		group = GroupFileRefsMySQL
	}
	return Projection{
		Name:          ProjectionFileRefsMySQL,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist},
		Accept: func(t domain.EventType) bool {
			return t == domain.EventGroupMessageSent || t == domain.EventDirectMessageSent
		},
		Applier: applier,
	}
}
