package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// drain applies the events parked behind dl in order, a page at a time, deleting each applied
// row. A parked event that fails with a non-transient error, does not decode or is of a type this
// build does not know is re-parked as a new dead letter with the events after it, once the events
// before it are applied; a transient failure aborts the drain with the error.
func (d *DeadLetters) drain(ctx context.Context, tx pgx.Tx, proj Projection, dl DeadLetter) (int, *DeadLetter, error) {
	total := 0
	for {
		page, err := parkedPage(ctx, tx, dl.ID, d.drainBatch)
		if err != nil || len(page) == 0 {
			return total, nil, err
		}
		applied, failAt, failErr := applyParked(ctx, proj, page)
		if failAt < 0 && failErr != nil {
			return total, nil, failErr
		}
		last := page[len(page)-1].ID
		if failAt >= 0 {
			last = page[failAt].ID - 1
		}
		if _, err := tx.Exec(ctx, `DELETE FROM projection_parked_events WHERE dead_letter_id = $1 AND id <= $2`,
			dl.ID, last); err != nil {
			return total, nil, err
		}
		total += applied
		if failAt >= 0 {
			re, err := repark(ctx, tx, dl, page[failAt], failErr)
			return total, re, err
		}
	}
}

func parkedPage(ctx context.Context, tx pgx.Tx, deadLetterID int64, limit int) ([]parkedEvent, error) {
	rows, err := tx.Query(ctx, `SELECT id, event_id, event_type, kafka_topic, kafka_partition, kafka_offset, payload
		FROM projection_parked_events WHERE dead_letter_id = $1 ORDER BY id LIMIT $2`, deadLetterID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []parkedEvent
	for rows.Next() {
		var p parkedEvent
		if err := rows.Scan(&p.ID, &p.EventID, &p.EventType, &p.Topic, &p.Partition, &p.Offset, &p.Payload); err != nil {
			return nil, err
		}
		page = append(page, p)
	}
	return page, rows.Err()
}

// applyParked applies page in order. It returns how many events were applied (or skipped as
// not accepted) and, when an event fails with a non-transient error, its index and the error;
// failAt is -1 otherwise (err then is nil or transient). A row this build cannot apply (it does
// not decode, or its event type is unknown) fails after the events before it are applied.
func applyParked(ctx context.Context, proj Projection, page []parkedEvent) (applied, failAt int, err error) {
	envs := make([]domain.Envelope, 0, len(page))
	var refused error // why page[len(envs)] cannot be applied
	for _, p := range page {
		env, err := decodeEnvelope(p.Payload)
		if err == nil {
			if _, known := domain.LookupEventType(env.EventType); !known {
				err = unknownEventType(&env)
			}
		}
		if err != nil {
			refused = err
			break
		}
		envs = append(envs, env)
	}
	applied, failAt, err = applyDecoded(ctx, proj, envs)
	if err != nil || refused == nil {
		return applied, failAt, err
	}
	return len(envs), len(envs), refused
}

// applyDecoded applies envs in order, as applyParked does.
func applyDecoded(ctx context.Context, proj Projection, envs []domain.Envelope) (applied, failAt int, err error) {
	var accepted []domain.Envelope
	for _, e := range envs {
		if proj.Accept(e.EventType) {
			accepted = append(accepted, e)
		}
	}
	if len(accepted) == 0 {
		return len(envs), -1, nil
	}
	_, err = proj.Applier.Apply(ctx, envs[0].TenantID, accepted)
	if err == nil {
		return len(envs), -1, nil
	}
	if isTransient(err) {
		return 0, -1, err
	}
	for i, e := range envs {
		if !proj.Accept(e.EventType) {
			continue
		}
		if _, err := proj.Applier.Apply(ctx, e.TenantID, []domain.Envelope{e}); err != nil {
			if isTransient(err) {
				return i, -1, err
			}
			return i, i, err
		}
	}
	return len(envs), -1, nil
}

// repark turns the failing parked event p into a new open dead letter and moves the events
// parked after it behind the new one.
func repark(ctx context.Context, tx pgx.Tx, dl DeadLetter, p parkedEvent, cause error) (*DeadLetter, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO projection_dead_letters
		(consumer_group, tenant_id, conversation_key, event_id, event_type, reason, error,
		 kafka_topic, kafka_partition, kafka_offset, kafka_key, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id`,
		dl.ConsumerGroup, dl.TenantID, dl.ConversationKey, p.EventID, p.EventType, ReasonReplayFailed,
		truncate(cause.Error(), 4000), p.Topic, p.Partition, p.Offset, dl.Key, p.Payload).Scan(&id)
	if err != nil {
		return nil, fmt.Errorf("re-park event %s: %w", p.EventID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE projection_parked_events SET dead_letter_id = $1
		WHERE dead_letter_id = $2 AND id > $3`, id, dl.ID, p.ID); err != nil {
		return nil, fmt.Errorf("re-park events after %s: %w", p.EventID, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM projection_parked_events WHERE id = $1`, p.ID); err != nil {
		return nil, fmt.Errorf("re-park event %s: %w", p.EventID, err)
	}
	re, err := scanDeadLetter(tx.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM projection_dead_letters d WHERE d.id = $1`, id))
	if err != nil {
		return nil, err
	}
	return &re, nil
}
