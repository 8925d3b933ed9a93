package projections

import (
	"context"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/filedb"
)

// The files-refs projection's name and consumer group (never renamed).
const (
	ProjectionFileRefsMySQL = "files-refs"
	GroupFileRefsMySQL      = "imledger.proj.files-refs.mysql.v1"
)

// FileStore is what the files-refs projection and its rebuild need of readmodels/filedb.
type FileStore interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, tables filedb.Tables, events []domain.Envelope) (int, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables filedb.Tables) (filedb.Summary, error)
}

// isFileRefsEvent reports whether the files-refs read model is built from events of type t: the
// file events and the sent messages, whose head.files reference files.
func isFileRefsEvent(t domain.EventType) bool {
	switch t {
	case domain.EventGroupMessageSent, domain.EventDirectMessageSent, domain.EventFileCreated, domain.EventFileUploaded,
		domain.EventFileAudited, domain.EventFileDeleted, domain.EventFileRestored:
		return true
	}
	return false
}

// FileRefsMySQL is the files-refs projection: the file events of im.audit.event become the
// tenant's im_files records (version-guarded: the file service writes each record right after its
// event too, and the second write changes nothing), and every sent message that names files in
// its head becomes one reference per file in im_group_files (source_topic, source_seq; a
// reference held already is ignored), counted in the file's record, so the collector never
// deletes a file a message carries (filedb.Store.ApplyBatch). group "" means GroupFileRefsMySQL.
func FileRefsMySQL(store FileStore, group string) Projection {
	live := filedb.DefaultTables()
	return tableProjection(ProjectionFileRefsMySQL, group, GroupFileRefsMySQL,
		[]string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist, tkafka.TopicAuditEvent}, isFileRefsEvent,
		func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			return store.ApplyBatch(ctx, tenant, live, events)
		})
}
