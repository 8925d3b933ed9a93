package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DeadLetter is an event a consumer group gave up on. While its Status is StatusOpen, later
// events of the same conversation in the same consumer group are parked.
type DeadLetter struct {
	ID              int64
	ConsumerGroup   string
	TenantID        string
	ConversationKey string
	EventID         string
	EventType       string
	Reason          string // ReasonBadEnvelope, ReasonUnknownTenant, ReasonRetriesExhausted
	Error           string
	Topic           string // the Kafka topic, partition and offset it was consumed from
	Partition       int32
	Offset          int64
	Key             string
	Payload         []byte // the record value as consumed (the envelope JSON)
	Status          string // StatusOpen, StatusReplayed, StatusSkipped
	CreatedAt       time.Time
	ResolvedAt      *time.Time
	ReplayEventID   *uuid.UUID // set by a replay; its parent event is EventID
	Parked          int        // events of the conversation waiting behind it
}

// Dead-letter statuses.
const (
	StatusOpen     = "open"
	StatusReplayed = "replayed"
	StatusSkipped  = "skipped"
)

// convKey identifies a conversation within one consumer group.
type convKey struct{ tenant, conv string }

// parkingStore keeps dead letters and parked events in Postgres.
type parkingStore struct {
	pool *pgxpool.Pool
}

// openConversations returns which of keys have an open dead letter in group. It takes no locks;
// park re-checks under a lock.
func (s parkingStore) openConversations(ctx context.Context, group string, keys []convKey) (map[convKey]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	tenants := make([]string, len(keys))
	convs := make([]string, len(keys))
	for i, k := range keys {
		tenants[i], convs[i] = k.tenant, k.conv
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT d.tenant_id, d.conversation_key
		FROM projection_dead_letters d
		JOIN unnest($2::text[], $3::text[]) AS k(tenant_id, conversation_key)
		  ON d.tenant_id = k.tenant_id AND d.conversation_key = k.conversation_key
		WHERE d.consumer_group = $1 AND d.status = 'open'`, group, tenants, convs)
	if err != nil {
		return nil, pgErr("find parked conversations", err)
	}
	defer rows.Close()
	out := map[convKey]bool{}
	for rows.Next() {
		var k convKey
		if err := rows.Scan(&k.tenant, &k.conv); err != nil {
			return nil, pgErr("find parked conversations", err)
		}
		out[k] = true
	}
	return out, pgErr("find parked conversations", rows.Err())
}

// anyOpen reports whether group has an open dead letter.
func (s parkingStore) anyOpen(ctx context.Context, group string) (bool, error) {
	var any bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projection_dead_letters
		WHERE consumer_group = $1 AND status = 'open')`, group).Scan(&any)
	return any, pgErr("find open dead letters", err)
}

// parkOutcome says what park did with an event.
type parkOutcome int

const (
	notParked     parkOutcome = iota // the conversation is not parked (any more): apply the event
	parked                           // stored behind the conversation's open dead letter
	alreadyLetter                    // the event is itself the open dead letter (a redelivery)
)

// park stores ev behind the oldest open dead letter of its conversation. It holds a share lock
// on that dead letter, so a concurrent replay either sees the parked event in its drain or has
// already resolved the dead letter, in which case park reports notParked.
func (s parkingStore) park(ctx context.Context, group string, k convKey, ev parkedEvent) (parkOutcome, error) {
	out := notParked
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			id      int64
			eventID string
		)
		// A replay that re-parks resolves the locked dead letter and opens a new one in the same
		// transaction; after waiting for it this statement's snapshot misses the new row, so an
		// empty answer is checked once more with a fresh statement.
		var err error
		for attempt := 0; attempt < 2; attempt++ {
			err = tx.QueryRow(ctx, `SELECT id, event_id FROM projection_dead_letters
				WHERE consumer_group = $1 AND tenant_id = $2 AND conversation_key = $3 AND status = 'open'
				ORDER BY id LIMIT 1 FOR SHARE`, group, k.tenant, k.conv).Scan(&id, &eventID)
			if !errors.Is(err, pgx.ErrNoRows) {
				break
			}
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if eventID == ev.EventID {
			out = alreadyLetter
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO projection_parked_events
			(dead_letter_id, consumer_group, tenant_id, conversation_key, event_id, event_type,
			 kafka_topic, kafka_partition, kafka_offset, payload)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT ON CONSTRAINT projection_parked_events_event DO NOTHING`,
			id, group, k.tenant, k.conv, ev.EventID, ev.EventType, ev.Topic, ev.Partition, ev.Offset, ev.Payload)
		if err == nil {
			out = parked
		}
		return err
	})
	if err != nil {
		return notParked, pgErr("park event", err)
	}
	return out, nil
}

// parkedEvent is one row of projection_parked_events.
type parkedEvent struct {
	ID        int64
	EventID   string
	EventType string
	Topic     string
	Partition int32
	Offset    int64
	Payload   []byte
}

// recordDeadLetter inserts an open dead letter. A second dead letter for an event that already
// has an open one (a redelivery) is ignored; created reports whether a row was added.
func (s parkingStore) recordDeadLetter(ctx context.Context, d DeadLetter) (id int64, created bool, err error) {
	err = s.pool.QueryRow(ctx, `INSERT INTO projection_dead_letters
		(consumer_group, tenant_id, conversation_key, event_id, event_type, reason, error,
		 kafka_topic, kafka_partition, kafka_offset, kafka_key, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (consumer_group, event_id) WHERE status = 'open' DO NOTHING
		RETURNING id`,
		d.ConsumerGroup, d.TenantID, d.ConversationKey, d.EventID, d.EventType, d.Reason, d.Error,
		d.Topic, d.Partition, d.Offset, d.Key, d.Payload).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, pgErr("record dead letter", err)
	}
	return id, true, nil
}

// pgErr wraps a Postgres failure; a nil err stays nil. Failures to reach Postgres are
// retryable: the event is redelivered rather than lost.
func pgErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return retryable(op, err)
}
