package domain

import (
	"strings"
	"time"

	"github.com/google/uuid"
)

// File event types: the life of an uploaded file (seed 004 §6.4). They are published on the
// audit category (im.audit.event): file disposal is what the audit trail records.
const (
	EventFileCreated  EventType = "file.created.v1"
	EventFileUploaded EventType = "file.uploaded.v1"
	EventFileAudited  EventType = "file.audited.v1"
	EventFileDeleted  EventType = "file.deleted.v1"
	EventFileRestored EventType = "file.restored.v1"
)

// MaxFilesPerMessage bounds the files one message may reference (head.files).
const MaxFilesPerMessage = 20

// ReasonFileNotReadable refuses a message naming in head.files a file its sender may not read:
// not the sender's own and not approved and shared with the sender through a conversation the
// sender reads, or unknown, or collected.
const ReasonFileNotReadable = "file_not_readable"

// Audit states of a file.
const (
	FileAuditPending  = "pending"
	FileAuditApproved = "approved"
	FileAuditRejected = "rejected"
)

// Statuses of a file record.
const (
	FileStatusPending  = "pending"  // metadata only
	FileStatusUploaded = "uploaded" // bytes in object storage
	FileStatusDeleted  = "deleted"  // collected
)

// FileRecord is what the tenant's read model holds of a file.
type FileRecord struct {
	ID          string
	Uploader    UserID
	Name        string
	ContentType string
	Size        int64
	ObjectKey   string
	SHA256      string
	Status      string // FileStatus*
	Audit       string // FileAudit*
	AuditReason string
	RefCount    int
	Version     int64 // of the stream file:<id>
	CreatedAt   time.Time
	UploadedAt  time.Time
}

// FileStreamID is the stream of one file: created is version 1, uploaded 2, audited 3, and
// deleted the last (or the one before a restored).
func FileStreamID(fileID uuid.UUID) string { return "file:" + fileID.String() }

// FileCreated is the payload of file.created.v1: metadata registered before any byte.
type FileCreated struct {
	FileID      string    `json:"file_id"`
	Uploader    UserID    `json:"uploader"`
	Name        string    `json:"name"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size,string"`
	ObjectKey   string    `json:"object_key"`
	CreatedAt   time.Time `json:"created_at"`
}

// FileUploaded is the payload of file.uploaded.v1: the bytes are in object storage.
type FileUploaded struct {
	FileID string `json:"file_id"`
	Size   int64  `json:"size,string"`
	SHA256 string `json:"sha256"`
	// ObjectKey is the object that holds exactly the bytes of SHA256: each upload writes an
	// object of its own, and the one recorded here is the file's. Empty in events written
	// before it was added: the object key of file.created.v1.
	ObjectKey  string    `json:"object_key,omitempty"`
	UploadedAt time.Time `json:"uploaded_at"`
}

// FileAudited is the payload of file.audited.v1: the security check's verdict.
type FileAudited struct {
	FileID    string    `json:"file_id"`
	Status    string    `json:"status"` // approved or rejected
	Reason    string    `json:"reason,omitempty"`
	AuditedAt time.Time `json:"audited_at"`
}

// FileDeleted is the payload of file.deleted.v1: the collector deleted the file, whose bytes are
// removed from object storage after it, unless file.restored.v1 follows.
type FileDeleted struct {
	FileID    string    `json:"file_id"`
	Reason    string    `json:"reason"` // unreferenced
	DeletedAt time.Time `json:"deleted_at"`
}

// FileRestored is the payload of file.restored.v1, which undoes the file.deleted.v1 before it: a
// message came to reference the file while the collector deleted it, so the record is back to
// what it was and the bytes stay.
type FileRestored struct {
	FileID     string    `json:"file_id"`
	Reason     string    `json:"reason"` // referenced
	RestoredAt time.Time `json:"restored_at"`
}

// ValidateFileRefs checks a message's head.files: at most MaxFilesPerMessage UUIDs in canonical
// form; it removes duplicates in place.
func ValidateFileRefs(files []string) ([]string, error) {
	if len(files) > MaxFilesPerMessage {
		return nil, invalid("head.files", "too_many", "at most 20 files")
	}
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		id, err := uuid.Parse(f)
		if err != nil || id.String() != strings.ToLower(f) {
			return nil, invalid("head.files", "bad_format", "file ids (UUIDs)")
		}
		if !seen[id.String()] {
			seen[id.String()] = true
			out = append(out, id.String())
		}
	}
	return out, nil
}
