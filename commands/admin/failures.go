package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
)

// Headers of a command's record on im.dead.letter, besides the command record's own headers.
const (
	HeaderReason        = "reason"
	HeaderError         = "error"
	HeaderConsumerGroup = "consumer_group"
	HeaderFailureID     = "failure_id"
)

// deadLetter records a command that failed with lastErr (reason ReasonRetriesExhausted after
// its retries, ReasonPermanentFailure at once) in admin_command_failures, produces it to
// im.dead.letter and returns its failed result. If a step fails it is tried again: the failure
// row is written once per command, the dead letter may be produced twice. Both hold the record
// redacted (redactedValue: no secret field, sealed or not) and the dead letter has the record's
// headers but its signature, which the redacted value no longer matches. The row takes any
// record: one PostgreSQL's jsonb refuses (bytes that are not UTF-8 or JSON, a \u0000) is stored
// as {"record_base64": ...} and Failures hands it back as received.
func (c *Consumer) deadLetter(ctx context.Context, it *item, lastErr error, reason string) (domain.AdminResult, error) {
	cmd := it.cmd
	errText := ""
	if lastErr != nil {
		errText = lastErr.Error()
	}
	attempts, err := c.ledger.attempts(ctx, cmd.EventID)
	if err != nil {
		return domain.AdminResult{}, err
	}
	insert := func(command []byte) (id int64, err error) {
		err = c.deps.Pool.QueryRow(ctx, `INSERT INTO admin_command_failures (consumer_group, tenant_id, event_id, command_type,
				command, record_key, error, attempts)
			VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)
			ON CONFLICT (consumer_group, event_id) DO UPDATE SET error = EXCLUDED.error, attempts = EXCLUDED.attempts
			RETURNING id`,
			c.cfg.ConsumerGroup, columnText(cmd.TenantID, MaxEnvelopeString), cmd.EventID, columnText(cmd.EventType, MaxEnvelopeString),
			string(command), columnText(it.key, len(it.key)), columnText(truncate(errText, 4000), 4100), attempts).Scan(&id)
		return id, err
	}
	value := redactedValue(it.msg.Value, cmd)
	id, err := insert(storedRecord(value, false))
	if permanent(err) {
		id, err = insert(storedRecord(value, true))
	}
	if err != nil {
		return domain.AdminResult{}, dbErr("record admin command failure", err)
	}
	headers := map[string]string{}
	for _, h := range it.msg.Headers {
		if h != nil && string(h.Key) != admintrust.HeaderSignature {
			headers[string(h.Key)] = string(h.Value)
		}
	}
	headers[HeaderReason], headers[HeaderError], headers[HeaderConsumerGroup] = reason, truncate(errText, 1000), c.cfg.ConsumerGroup
	headers[HeaderFailureID] = fmt.Sprint(id)
	if err := c.deps.Publisher.Publish(ctx, c.cfg.DeadLetterTopic, it.key, value, headers); err != nil {
		if permanentPublish(err) {
			return domain.AdminResult{}, fmt.Errorf("publish admin dead letter: %w", err)
		}
		return domain.AdminResult{}, domain.Retryable("publish admin dead letter", err)
	}
	c.metrics.deadLetters.Inc()
	c.log.ErrorContext(ctx, "admin command dead-lettered", "event_id", cmd.EventID.String(), "reason", reason,
		"event_type", echo(cmd.EventType), "tenant_id", echo(cmd.TenantID), "failure_id", id, "attempts", attempts, "err", errText)
	return c.result(cmd, domain.AdminFailed, reason, map[string]any{"failure_id": fmt.Sprint(id), "attempts": attempts}, nil), nil
}

// recordBase64 is the one field of the jsonb a record is stored as when jsonb refuses it.
const recordBase64 = "record_base64"

// storedRecord is the record value as admin_command_failures.command (jsonb) stores it: the value
// itself when it is JSON jsonb takes, else (or with wrap) {"record_base64": "<the value>"}.
func storedRecord(value []byte, wrap bool) []byte {
	if !wrap && utf8.Valid(value) && json.Valid(value) && !bytes.Contains(value, []byte(`\u0000`)) {
		return value
	}
	b, _ := json.Marshal(map[string]string{recordBase64: base64.StdEncoding.EncodeToString(value)})
	return b
}

// recordOf reverses storedRecord.
func recordOf(stored []byte) []byte {
	if !bytes.Contains(stored, []byte(recordBase64)) {
		return stored
	}
	var wrapped map[string]string
	if json.Unmarshal(stored, &wrapped) != nil || len(wrapped) != 1 {
		return stored
	}
	raw, err := base64.StdEncoding.DecodeString(wrapped[recordBase64])
	if err != nil {
		return stored
	}
	return raw
}

// columnText is s as a text column always takes it: at most max bytes of UTF-8 without NUL.
func columnText(s string, max int) string {
	if len(s) > max {
		s = s[:max]
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Failure statuses.
const (
	FailureOpen     = "open"
	FailureReplayed = "replayed"
	FailureSkipped  = "skipped"
)

// Failure is an admin command that was dead-lettered.
type Failure struct {
	ID              int64
	ConsumerGroup   string
	TenantID        string
	EventID         uuid.UUID
	CommandType     string
	Command         json.RawMessage // the record value as received, secret fields redacted (not JSON when it arrived so)
	Key             string
	Error           string
	Attempts        int
	Status          string
	ReplayedEventID *uuid.UUID
	CreatedAt       time.Time
	ResolvedAt      time.Time
}

// FailureFilter selects failures; zero fields select all.
type FailureFilter struct {
	Status   string
	TenantID string
	Limit    int // default 100
}

// Failures lists, replays and skips dead-lettered admin commands. It is safe for concurrent use.
type Failures struct {
	pool         *pgxpool.Pool
	pub          Publisher
	commandTopic string
	signer       *admintrust.Signer
}

// NewFailures returns Failures over pool, producing replays with pub to commandTopic (the full
// name of im.admin.command), signed with signer: a replay is a new command by the operator who
// sends it. pub may be nil for List and Skip; signer nil sends replays unsigned, which only a
// consumer that accepts unsigned commands (the embedded broker) runs.
func NewFailures(pool *pgxpool.Pool, pub Publisher, commandTopic string, signer *admintrust.Signer) *Failures {
	return &Failures{pool: pool, pub: pub, commandTopic: commandTopic, signer: signer}
}

const failureColumns = `id, consumer_group, tenant_id, event_id, command_type, command, record_key, error, attempts, status,
	replayed_event_id, created_at, resolved_at`

func scanFailure(row pgx.Row) (Failure, error) {
	var (
		f        Failure
		resolved *time.Time
	)
	if err := row.Scan(&f.ID, &f.ConsumerGroup, &f.TenantID, &f.EventID, &f.CommandType, &f.Command, &f.Key, &f.Error,
		&f.Attempts, &f.Status, &f.ReplayedEventID, &f.CreatedAt, &resolved); err != nil {
		return Failure{}, err
	}
	f.Command = recordOf(f.Command)
	if resolved != nil {
		f.ResolvedAt = *resolved
	}
	return f, nil
}

// List returns failures matching filter, oldest first.
func (f *Failures) List(ctx context.Context, filter FailureFilter) ([]Failure, error) {
	if filter.Limit <= 0 {
		filter.Limit = 100
	}
	rows, err := f.pool.Query(ctx, `SELECT `+failureColumns+` FROM admin_command_failures
		WHERE ($1 = '' OR status = $1) AND ($2 = '' OR tenant_id = $2) ORDER BY id LIMIT $3`,
		filter.Status, filter.TenantID, filter.Limit)
	if err != nil {
		return nil, dbErr("list admin command failures", err)
	}
	defer rows.Close()
	var out []Failure
	for rows.Next() {
		fl, err := scanFailure(rows)
		if err != nil {
			return nil, dbErr("list admin command failures", err)
		}
		out = append(out, fl)
	}
	return out, rows.Err()
}

// ErrNotOpen is a failure that was already replayed or skipped, or does not exist.
var ErrNotOpen = errors.New("no open admin command failure with this id")

// ErrSecretsRedacted is a failure whose command had secret fields (a password): they were
// redacted when it failed, so it cannot be replayed; send the command again with its secret.
var ErrSecretsRedacted = errors.New("the command's secret fields were redacted when it failed; send the command again (imledger admin send) instead of replaying it")

// Replay sends failure id's command again on im.admin.command under its key, as a new command by
// the operator: event_id newID (a fresh UUIDv7 when nil), parent_event_id the original's,
// occurred_at now, the actor the signer's identity and the record signed with it (with no
// signer, the actor as received, unsigned); the rest as received. The failure is marked replayed
// with the new event id. It returns the command sent; the consumer answers it on
// im.admin.command.result like any other. Errors: ErrNotOpen; ErrSecretsRedacted (nothing sent,
// the failure stays open to be skipped); the producer's error (nothing marked).
func (f *Failures) Replay(ctx context.Context, id int64, newID uuid.UUID) (domain.AdminCommand, error) {
	if f.pub == nil {
		return domain.AdminCommand{}, errors.New("admin: replay needs a publisher")
	}
	var sent domain.AdminCommand
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		fl, err := scanFailure(tx.QueryRow(ctx, `SELECT `+failureColumns+` FROM admin_command_failures
			WHERE id = $1 AND status = 'open' FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotOpen
		}
		if err != nil {
			return err
		}
		if info, ok := domain.LookupAdminCommand(domain.AdminCommandType(fl.CommandType)); ok && len(info.SecretFields()) > 0 {
			return ErrSecretsRedacted // every stored copy of such a command is redacted
		}
		var cmd domain.AdminCommand
		if err := json.Unmarshal(fl.Command, &cmd); err != nil {
			return fmt.Errorf("stored command of failure %d: %w", id, err)
		}
		if info, ok := domain.LookupAdminCommand(domain.AdminCommandType(cmd.EventType)); ok && len(info.SecretFields()) > 0 {
			return ErrSecretsRedacted
		}
		parent := fl.EventID
		cmd.EventID = newID
		if newID == uuid.Nil {
			if cmd.EventID, err = uuid.NewV7(); err != nil {
				return err
			}
		}
		cmd.ParentEventID = &parent
		cmd.OccurredAt = time.Now().UTC()
		if f.signer != nil {
			cmd.Actor = f.signer.Identity()
		}
		body, err := json.Marshal(cmd)
		if err != nil {
			return err
		}
		headers := map[string]string{"event_id": cmd.EventID.String(), "event_type": cmd.EventType, "tenant_id": cmd.TenantID,
			"parent_event_id": parent.String()}
		if f.signer != nil {
			maps.Copy(headers, f.signer.Sign([]byte(fl.Key), body, time.Now()))
		}
		if err := f.pub.Publish(ctx, f.commandTopic, fl.Key, body, headers); err != nil {
			return fmt.Errorf("produce the replayed command: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE admin_command_failures SET status = 'replayed', replayed_event_id = $2, resolved_at = now()
			WHERE id = $1`, id, cmd.EventID); err != nil {
			return err
		}
		sent = cmd
		return nil
	})
	if err != nil {
		return domain.AdminCommand{}, err
	}
	return sent, nil
}

// Skip marks failure id skipped: it is not replayed. Errors: ErrNotOpen.
func (f *Failures) Skip(ctx context.Context, id int64) error {
	tag, err := f.pool.Exec(ctx, `UPDATE admin_command_failures SET status = 'skipped', resolved_at = now()
		WHERE id = $1 AND status = 'open'`, id)
	if err != nil {
		return dbErr("skip admin command failure", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotOpen
	}
	return nil
}
