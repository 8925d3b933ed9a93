package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels"
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
	if group == "" {
		group = GroupFileRefsMySQL
	}
	return Projection{
		Name:          ProjectionFileRefsMySQL,
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist, tkafka.TopicAuditEvent},
		Accept:        isFileRefsEvent,
		Applier: ApplierFunc(func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			n, err := store.ApplyBatch(ctx, tenant, filedb.DefaultTables(), events)
			return n, readModelErr(err)
		}),
	}
}

// NewFileRebuilder returns the rebuilder of files-refs (im_files and im_group_files): the
// TableRebuilder skeleton over readmodels/filedb. Its fill reads every sent message of the tenant
// besides the file events.
func NewFileRebuilder(store FileStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*TableRebuilder[readmodels.TableSummary], error) {
	if store == nil {
		return nil, errors.New("projections: files rebuild: a store is required")
	}
	return NewTableRebuilder[readmodels.TableSummary](fileModel{store}, events, tenants, log)
}

// fileModel is files-refs as the rebuild skeleton drives it; its parts are its tables.
type fileModel struct{ store FileStore }

var _ ReadModel[readmodels.TableSummary] = fileModel{}

func (fileModel) Projection() string { return ProjectionFileRefsMySQL }

func (fileModel) Filter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(isFileRefsEvent)}
}

func (fileModel) tables(suffix string) filedb.Tables {
	return filedb.DefaultTables().WithSuffix(suffix)
}

func (m fileModel) CreateLike(ctx context.Context, db *sql.DB, suffix string) error {
	if err := filedb.DropTables(ctx, db, m.tables(suffix)); err != nil {
		return fmt.Errorf("drop leftover tables: %w", err)
	}
	return filedb.CreateTablesLike(ctx, db, filedb.DefaultTables(), m.tables(suffix))
}

func (m fileModel) Drop(ctx context.Context, db *sql.DB, suffix string) error {
	return filedb.DropTables(ctx, db, m.tables(suffix))
}

func (m fileModel) Swap(ctx context.Context, db *sql.DB, suffix string) error {
	return filedb.SwapTables(ctx, db, filedb.DefaultTables(), m.tables(suffix))
}

func (m fileModel) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.ApplyBatch(ctx, t, m.tables(suffix), events)
}

func (m fileModel) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]readmodels.TableSummary, error) {
	sum, err := m.store.Checksum(ctx, t, m.tables(suffix))
	if err != nil {
		return nil, err
	}
	live := filedb.DefaultTables()
	return map[string]readmodels.TableSummary{live.Files: sum.Files, live.Refs: sum.Refs}, nil
}
