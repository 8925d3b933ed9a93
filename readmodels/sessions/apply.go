package sessions

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Column widths of im_sessions.
const (
	maxSessionID = 64
	maxNode      = 64
	maxUserAgent = 255 // characters; longer user agents are cut
	maxReason    = 64
)

// op is one decoded session event; opened is false for a close. An op without user is an event
// this read model ignores.
type op struct {
	env       domain.Envelope
	user      domain.UserID
	session   string
	node      string
	userAgent string
	opened    bool
	reason    string
	at        time.Time
}

var bad = eventdecode.Bad

// decodeOne decodes a session event and checks it against its stream.
func decodeOne(_ int, env domain.Envelope) (op, error) {
	o := op{env: env}
	switch env.EventType {
	case domain.EventSessionOpened:
		var p domain.SessionOpened
		if err := env.Decode(&p); err != nil {
			return o, bad("payload", err.Error())
		}
		o.user, o.session, o.node, o.userAgent, o.opened, o.at = p.User, p.SessionID, p.Node, p.UserAgent, true, p.OpenedAt
	case domain.EventSessionClosed:
		var p domain.SessionClosed
		if err := env.Decode(&p); err != nil {
			return o, bad("payload", err.Error())
		}
		o.user, o.session, o.node, o.reason, o.at = p.User, p.SessionID, p.Node, p.Reason, p.ClosedAt
	default:
		return o, nil
	}
	switch {
	case o.user <= 0:
		return o, bad("user", "must be positive")
	case o.session == "" || len(o.session) > maxSessionID:
		return o, bad("session_id", fmt.Sprintf("1 to %d bytes", maxSessionID))
	case len(o.node) > maxNode || len(o.reason) > maxReason:
		return o, bad("payload", "node or reason too long")
	case env.StreamID != domain.SessionStreamID(o.user, o.session):
		return o, bad("stream_id", fmt.Sprintf("%s names stream %q, the payload belongs to %q", env.EventType, env.StreamID,
			domain.SessionStreamID(o.user, o.session)))
	}
	if o.at.IsZero() {
		o.at = env.OccurredAt
	}
	o.at = readmodels.Millis(o.at)
	o.userAgent = readmodels.FitChars(o.userAgent, maxUserAgent)
	return o, nil
}

// ApplyBatch applies one tenant's session events to tables in one transaction and returns how
// many it applied. Other event types are ignored; consumerGroup names the caller in errors.
//
// A row is written by whichever of its session's events comes first and completed by the other,
// so the result does not depend on their order, and applying an event again changes nothing:
// the opening sets node, user agent and opened_at, the close sets closed_at and its reason, and
// the row's version is the higher of the two stream versions seen.
//
// Errors: an *EventError wrapping domain.ErrInvalid for an event that can never be applied;
// domain.ErrNotFound (wrapped) for a tenant without a database; domain.ErrRetryable when MySQL
// is unreachable.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables Tables, events []domain.Envelope) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	ops, err := eventdecode.Batch(tenant, events, decodeOne, func(i int, id uuid.UUID, err error) error {
		return &EventError{Index: i, EventID: id, Err: err}
	})
	if err != nil {
		return 0, fmt.Errorf("sessions: apply: %w", err)
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return 0, fmt.Errorf("sessions: apply %s: %w", consumerGroup, err)
	}
	return applyTx(ctx, db, tables, ops)
}

func applyTx(ctx context.Context, db *sql.DB, tables Tables, ops []op) (n int, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, tenantdb.WrapErr("sessions: apply: begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var opens, closes []op
	for _, o := range ops {
		switch {
		case o.user == 0:
		case o.opened:
			opens = append(opens, o)
		default:
			closes = append(closes, o)
		}
	}
	if err := upsert(ctx, tx, tables.Sessions, opens, true); err != nil {
		return 0, err
	}
	if err := upsert(ctx, tx, tables.Sessions, closes, false); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr("sessions: apply: commit", err)
	}
	return len(opens) + len(closes), nil
}

// rowsPerInsert bounds one multi-row INSERT.
const rowsPerInsert = 500

// upsert writes the openings or the closes of ops. Every assignment takes the event's own values,
// so the outcome does not depend on the order of a session's two events.
func upsert(ctx context.Context, tx *sql.Tx, table string, ops []op, opens bool) error {
	const cols = "user_id, session_id, node, user_agent, opened_at, closed_at, close_reason, version, updated_at"
	update := " ON DUPLICATE KEY UPDATE node = VALUES(node), user_agent = VALUES(user_agent), opened_at = VALUES(opened_at)," +
		" version = GREATEST(version, VALUES(version)), updated_at = GREATEST(updated_at, VALUES(updated_at))"
	if !opens {
		update = " ON DUPLICATE KEY UPDATE node = IF(node = '', VALUES(node), node), closed_at = VALUES(closed_at)," +
			" close_reason = VALUES(close_reason), version = GREATEST(version, VALUES(version))," +
			" updated_at = GREATEST(updated_at, VALUES(updated_at))"
	}
	for start := 0; start < len(ops); start += rowsPerInsert {
		chunk := ops[start:min(start+rowsPerInsert, len(ops))]
		args := make([]any, 0, 9*len(chunk))
		for _, o := range chunk {
			var opened, closed any
			if opens {
				opened = o.at
			} else {
				closed = o.at
			}
			args = append(args, o.user.Int64(), o.session, o.node, o.userAgent, opened, closed, o.reason,
				o.env.StreamVersion, readmodels.Millis(o.env.OccurredAt))
		}
		stmt := "INSERT INTO " + q(table) + " (" + cols + ") VALUES " + tableset.RowPlaceholders(len(chunk), 9) + update
		if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
			return tenantdb.WrapErr("sessions: apply", err)
		}
	}
	return nil
}
