package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
)

// ReasonReplayFailed is the reason of a dead letter created when a parked event fails to apply
// while a replay or skip drains its conversation.
const ReasonReplayFailed = "replay_failed"

// ErrDeadLetterResolved is returned when a dead letter was already replayed or skipped.
var ErrDeadLetterResolved = errors.New("dead letter already resolved")

// DeadLetters are the operator functions over the dead letters of a set of projections. They
// write to the read models directly (not through Kafka) with the projections' appliers, so
// they can run in any process — the replay command or a running server.
type DeadLetters struct {
	parking    parkingStore
	byGroup    map[string]Projection
	drainBatch int
	log        *slog.Logger
}

// NewDeadLetters returns the operator functions for the dead letters of projections, stored
// in pool's database (see EnsureSchema).
func NewDeadLetters(pool *pgxpool.Pool, cfg ParkingConfig, log *slog.Logger, projections ...Projection) *DeadLetters {
	cfg.setDefaults()
	if log == nil {
		log = slog.Default()
	}
	by := make(map[string]Projection, len(projections))
	for _, p := range projections {
		by[p.ConsumerGroup] = p
	}
	return &DeadLetters{parking: parkingStore{pool: pool}, byGroup: by, drainBatch: cfg.DrainBatch, log: log}
}

// ListFilter selects dead letters. Empty fields match everything.
type ListFilter struct {
	ConsumerGroup string
	TenantID      string
	// Status is StatusOpen, StatusReplayed, StatusSkipped or "" for all.
	Status string
	// Limit caps the result; default 100.
	Limit int
}

const deadLetterColumns = `d.id, d.consumer_group, d.tenant_id, d.conversation_key, d.event_id, d.event_type,
	d.reason, d.error, d.kafka_topic, d.kafka_partition, d.kafka_offset, d.kafka_key, d.payload, d.status,
	d.created_at, d.resolved_at, d.replay_event_id,
	(SELECT count(*) FROM projection_parked_events p WHERE p.dead_letter_id = d.id)`

func scanDeadLetter(row pgx.Row) (DeadLetter, error) {
	var d DeadLetter
	var parkedCount int64
	err := row.Scan(&d.ID, &d.ConsumerGroup, &d.TenantID, &d.ConversationKey, &d.EventID, &d.EventType,
		&d.Reason, &d.Error, &d.Topic, &d.Partition, &d.Offset, &d.Key, &d.Payload, &d.Status,
		&d.CreatedAt, &d.ResolvedAt, &d.ReplayEventID, &parkedCount)
	d.Parked = int(parkedCount)
	return d, err
}

// ListDeadLetters returns the dead letters matching f, oldest first, each with the number of
// events parked behind it.
func (d *DeadLetters) ListDeadLetters(ctx context.Context, f ListFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := d.parking.pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM projection_dead_letters d
		WHERE ($1 = '' OR d.consumer_group = $1) AND ($2 = '' OR d.tenant_id = $2) AND ($3 = '' OR d.status = $3)
		ORDER BY d.id LIMIT $4`, f.ConsumerGroup, f.TenantID, f.Status, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("projections: list dead letters: %w", err)
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		dl, err := scanDeadLetter(rows)
		if err != nil {
			return nil, fmt.Errorf("projections: list dead letters: %w", err)
		}
		out = append(out, dl)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("projections: list dead letters: %w", err)
	}
	return out, nil
}

// ResolveResult says what a replay or skip did.
type ResolveResult struct {
	// DeadLetter is the resolved dead letter as it is now.
	DeadLetter DeadLetter
	// Drained is how many parked events were applied.
	Drained int
	// Reparked is set when a parked event failed to apply (or does not decode, or is of a type
	// this build does not know): it became a new open dead letter (reason ReasonReplayFailed) and
	// the events after it stay parked behind it. The events before it were applied.
	Reparked *DeadLetter
}

// ReplayDeadLetter re-applies the dead-lettered event to its projection's read model, then
// applies the events parked behind it in their original order, and unparks the conversation.
// The event keeps its event_id, so consumer idempotency still holds; the dead letter records a
// new replay_event_id whose parent is the event (DESIGN §4).
//
// Everything happens in one Postgres transaction that locks the dead letter, so the projector
// cannot park or apply events of the conversation meanwhile. If the event fails again, or the
// read model is unreachable, nothing changes in Postgres and the error is returned (read-model
// writes already made are idempotent); a replay may simply be run again. A parked event that
// fails with a non-transient error is re-parked (see ResolveResult.Reparked).
// An event of a type this build does not know (ReasonUnknownEventType) is refused and stays open:
// replay it with a build that knows the type, or skip it.
// Errors: domain.ErrNotFound for an unknown id, ErrDeadLetterResolved when it is not open.
func (d *DeadLetters) ReplayDeadLetter(ctx context.Context, id int64) (ResolveResult, error) {
	return d.resolve(ctx, id, true)
}

// SkipDeadLetter drops the dead-lettered event, applies the events parked behind it in order,
// and unparks the conversation. Its guarantees and errors are ReplayDeadLetter's.
func (d *DeadLetters) SkipDeadLetter(ctx context.Context, id int64) (ResolveResult, error) {
	return d.resolve(ctx, id, false)
}

func (d *DeadLetters) resolve(ctx context.Context, id int64, replay bool) (ResolveResult, error) {
	op := "skip dead letter"
	if replay {
		op = "replay dead letter"
	}
	var res ResolveResult
	err := pgx.BeginFunc(ctx, d.parking.pool, func(tx pgx.Tx) error {
		dl, err := scanDeadLetter(tx.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM projection_dead_letters d
			WHERE d.id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("dead letter %d: %w", id, domain.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if dl.Status != StatusOpen {
			return fmt.Errorf("dead letter %d is %s: %w", id, dl.Status, ErrDeadLetterResolved)
		}
		proj, ok := d.byGroup[dl.ConsumerGroup]
		if !ok {
			return fmt.Errorf("dead letter %d: no projection for consumer group %s", id, dl.ConsumerGroup)
		}
		status := StatusSkipped
		var replayID *uuid.UUID
		if replay {
			if err := d.replayOne(ctx, proj, dl); err != nil {
				return err
			}
			rid, err := uuid.NewV7()
			if err != nil {
				return err
			}
			status, replayID = StatusReplayed, &rid
		}
		drained, reparked, err := d.drain(ctx, tx, proj, dl)
		if err != nil {
			return err
		}
		res.Drained, res.Reparked = drained, reparked
		res.DeadLetter, err = scanDeadLetter(tx.QueryRow(ctx, `UPDATE projection_dead_letters d
			SET status = $2, resolved_at = now(), replay_event_id = $3 WHERE d.id = $1
			RETURNING `+deadLetterColumns, id, status, replayID))
		return err
	})
	if err != nil {
		return ResolveResult{}, fmt.Errorf("projections: %s: %w", op, err)
	}
	d.log.Info("dead letter resolved", "dead_letter_id", id, "status", res.DeadLetter.Status,
		"consumer_group", res.DeadLetter.ConsumerGroup, "tenant_id", res.DeadLetter.TenantID,
		"event_id", res.DeadLetter.EventID, "drained", res.Drained, "reparked", res.Reparked != nil)
	return res, nil
}

// replayOne applies the dead-lettered event itself.
func (d *DeadLetters) replayOne(ctx context.Context, proj Projection, dl DeadLetter) error {
	env, err := decodeEnvelope(dl.Payload)
	if err != nil {
		return fmt.Errorf("dead letter %d cannot be replayed, skip it: %w", dl.ID, err)
	}
	if _, known := domain.LookupEventType(env.EventType); !known {
		// Not accepted either, but not because the projection has no use for it: this build
		// cannot apply it, and a replay that went on would apply the events after it without it.
		return fmt.Errorf("dead letter %d: event type %q is unknown to this build: replay it with a build that knows it, or skip it",
			dl.ID, env.EventType)
	}
	if !proj.Accept(env.EventType) {
		return nil
	}
	if _, err := proj.Applier.Apply(ctx, env.TenantID, []domain.Envelope{env}); err != nil {
		return fmt.Errorf("dead letter %d: apply event %s: %w", dl.ID, env.EventID, err)
	}
	return nil
}
