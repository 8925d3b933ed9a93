package files

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// SharedFiles reads file records and the conversations that reference files, many at once;
// *filedb.Store implements it.
type SharedFiles interface {
	// GetMany returns the records of the files of ids that exist, by id.
	GetMany(ctx context.Context, tenant domain.TenantID, ids []string) (map[string]domain.FileRecord, error)
	// TopicsOf returns, by file id, the conversations whose messages reference the files of ids.
	TopicsOf(ctx context.Context, tenant domain.TenantID, ids []string) (map[string][]string, error)
}

// TopicReader decides whether a user may read a conversation; a refusal is a
// *domain.DeniedError. The REST API's read policy implements it.
type TopicReader interface {
	CanRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error
}

// Access decides which files a user may reference in a message (it implements
// message.FileAccess), by the rule the download URL follows: a user may reference
//
//   - a file they uploaded, unless it was rejected (file_rejected) or collected, whether or not
//     its bytes are there or checked yet;
//   - another user's file that passed the security check, when a message of a conversation the
//     user reads references it already (the files-refs read model).
//
// Anything else, an unknown file included, is refused with domain.ReasonFileNotReadable, so a
// refusal tells nothing about another user's file. A check costs one query of the records of all
// the message's files, and, only for files of other users, one query of their references and a
// read check per conversation.
type Access struct {
	files   SharedFiles
	readers TopicReader
}

// ErrFileNotReadable refuses a reference to a file the sender may not read.
var ErrFileNotReadable = &domain.DeniedError{Reason: domain.ReasonFileNotReadable}

// NewAccess returns an Access over the file records and the read policy.
func NewAccess(files SharedFiles, readers TopicReader) (*Access, error) {
	if files == nil || readers == nil {
		return nil, errors.New("files: access needs the file records and a read policy")
	}
	return &Access{files: files, readers: readers}, nil
}

// CanReference returns nil when user may reference every file of ids; ErrRejected for the
// user's own rejected file; ErrFileNotReadable for any other file the user may not reference;
// and an error wrapping domain.ErrRetryable when the records or the read policy failed.
func (a *Access) CanReference(ctx context.Context, tenant domain.TenantID, user domain.UserID, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	recs, err := a.files.GetMany(ctx, tenant, ids)
	if err != nil {
		return fmt.Errorf("read files: %w", err)
	}
	var shared []string
	for _, id := range ids {
		f, ok := recs[id]
		switch {
		case !ok || f.Status == domain.FileStatusDeleted:
			return ErrFileNotReadable
		case f.Uploader == user && f.Audit == domain.FileAuditRejected:
			return ErrRejected
		case f.Uploader == user:
		case f.Status != domain.FileStatusUploaded || f.Audit != domain.FileAuditApproved:
			return ErrFileNotReadable
		default:
			shared = append(shared, id)
		}
	}
	if len(shared) == 0 {
		return nil
	}
	topics, err := a.files.TopicsOf(ctx, tenant, shared)
	if err != nil {
		return fmt.Errorf("read file references: %w", err)
	}
	readable := map[string]bool{} // per conversation, asked once for all the files
	for _, id := range shared {
		ok := false
		for _, t := range topics[id] {
			r, asked := readable[t]
			if !asked {
				if r, err = a.canRead(ctx, tenant, user, t); err != nil {
					return err
				}
				readable[t] = r
			}
			if ok = r; ok {
				break
			}
		}
		if !ok {
			return ErrFileNotReadable
		}
	}
	return nil
}

func (a *Access) canRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, t string) (bool, error) {
	topic, err := domain.ParseTopic(t)
	if err != nil {
		return false, nil
	}
	err = a.readers.CanRead(ctx, tenant, user, topic)
	var denied *domain.DeniedError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &denied), errors.Is(err, domain.ErrInvalid):
		return false, nil
	}
	return false, fmt.Errorf("read policy: %w", err)
}
