package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// ErrStaleTerm means a relay's term is over: another relay of the same name took the lead since,
// so the deposed one may neither move the checkpoint nor append markers. It wraps
// domain.ErrConcurrency.
var ErrStaleTerm = fmt.Errorf("eventstore: relay term is no longer current: %w", domain.ErrConcurrency)

// PartitionOffset is the offset after the last record a Kafka broker acknowledged to a relay in
// one partition.
type PartitionOffset struct {
	Topic     string
	Partition int32
	Next      int64
}

// RelayTerm is where a relay starts a term: its new term number and what the previous terms left.
type RelayTerm struct {
	// Term is this term's number; it only grows.
	Term int64
	// Checkpoint is the cursor the relay has published and checkpointed up to. It never moves
	// back.
	Checkpoint Cursor
	// Republish, when not nil, is how far a republish of events the broker lost has come: the
	// relay publishes from here, and once past Checkpoint the republish is over.
	Republish *Cursor
	// ClusterID is the Kafka cluster the relay last published to, "" before the first batch.
	ClusterID string
	// Offsets are, per partition, the offset after the last record the cluster acknowledged.
	Offsets []PartitionOffset
	// HolesSwept is set once a relay of this name gave up every hole of the history (see
	// HistoricHoles and MarkHolesSwept).
	HolesSwept bool
}

// From is the cursor a term publishes from: Republish when set, else Checkpoint.
func (t RelayTerm) From() Cursor {
	if t.Republish != nil {
		return *t.Republish
	}
	return t.Checkpoint
}

// BeginRelayTerm starts a new term for the relay called name and returns it with the state the
// earlier terms left. The caller must hold the relay's advisory lock; a relay still working under
// an older term is fenced from then on (SaveRelayProgress, StartRepublish and AppendSkipsFenced
// fail with ErrStaleTerm). Errors: domain.ErrInvalid for an empty name, domain.ErrRetryable when
// PostgreSQL was unreachable or timed out.
func (s *Store) BeginRelayTerm(ctx context.Context, name string) (RelayTerm, error) {
	const op = "begin relay term"
	if name == "" {
		return RelayTerm{}, fmt.Errorf("%s: %w", op, invalid("name", "required", ""))
	}
	var t RelayTerm
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var replayTx *uint64
		var replayPos *int64
		err := tx.QueryRow(ctx, `INSERT INTO relay_checkpoints (name, tx_id, position, term, updated_at)
			VALUES ($1, '0'::xid8, 0, 1, now())
			ON CONFLICT (name) DO UPDATE SET term = relay_checkpoints.term + 1, updated_at = now()
			RETURNING term, tx_id, position, cluster_id, replay_tx_id, replay_position, holes_swept`, name).
			Scan(&t.Term, &t.Checkpoint.TxID, &t.Checkpoint.Position, &t.ClusterID, &replayTx, &replayPos, &t.HolesSwept)
		if err != nil {
			return err
		}
		if replayTx != nil && replayPos != nil {
			t.Republish = &Cursor{TxID: *replayTx, Position: *replayPos}
		}
		rows, err := tx.Query(ctx, `SELECT topic, partition, next_offset FROM relay_partition_offsets
			WHERE name = $1 ORDER BY topic, partition`, name)
		if err != nil {
			return err
		}
		t.Offsets, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PartitionOffset, error) {
			var o PartitionOffset
			err := r.Scan(&o.Topic, &o.Partition, &o.Next)
			return o, err
		})
		return err
	})
	if err != nil {
		return RelayTerm{}, wrapErr(op, err)
	}
	return t, nil
}

// saveProgressSQL moves the checkpoint of relay $1 in term $2 to ($3, $4) if that is further
// ahead, or else records ($3, $4) as how far a republish has come, clearing it once the
// republish reaches the checkpoint; then it raises the acknowledged partition offsets ($5..$7).
// Nothing changes when the term is not current: the count it returns is then 0.
const saveProgressSQL = `WITH cp AS (
UPDATE relay_checkpoints SET
	tx_id = CASE WHEN (tx_id, position) < ($3::xid8, $4::bigint) THEN $3::xid8 ELSE tx_id END,
	position = CASE WHEN (tx_id, position) < ($3::xid8, $4::bigint) THEN $4::bigint ELSE position END,
	replay_tx_id = CASE WHEN (tx_id, position) > ($3::xid8, $4::bigint) THEN $3::xid8 END,
	replay_position = CASE WHEN (tx_id, position) > ($3::xid8, $4::bigint) THEN $4::bigint END,
	updated_at = now()
WHERE name = $1 AND term = $2
RETURNING name),
offs AS (
INSERT INTO relay_partition_offsets (name, topic, partition, next_offset)
SELECT cp.name, u.topic, u.partition, u.next_offset
FROM cp, unnest($5::text[], $6::integer[], $7::bigint[]) AS u(topic, partition, next_offset)
ON CONFLICT (name, topic, partition) DO UPDATE
	SET next_offset = GREATEST(relay_partition_offsets.next_offset, excluded.next_offset))
SELECT count(*) FROM cp`

// SaveRelayProgress records that the relay called name, in term, has published every event up to
// c and that the broker acknowledged records up to offsets. The checkpoint only moves forward: a
// cursor behind it (a republish in progress) is recorded as the republish's progress instead,
// and the republish ends once a cursor reaches the checkpoint. Partition offsets only grow.
//
// Errors: ErrStaleTerm when term is no longer the relay's current term (nothing is written);
// domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) SaveRelayProgress(ctx context.Context, name string, term int64, c Cursor, offsets []PartitionOffset) error {
	const op = "save relay checkpoint"
	topics := make([]string, len(offsets))
	parts := make([]int32, len(offsets))
	nexts := make([]int64, len(offsets))
	for i, o := range offsets {
		topics[i], parts[i], nexts[i] = o.Topic, o.Partition, o.Next
	}
	var n int
	err := s.pool.QueryRow(ctx, saveProgressSQL, name, term, c.TxID, c.Position, topics, parts, nexts).Scan(&n)
	if err != nil {
		return wrapErr(op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: relay %s, term %d: %w", op, name, term, ErrStaleTerm)
	}
	return nil
}

// StartRepublish records, in term, that the broker the relay called name publishes to is the
// cluster clusterID and that it lacks records it had acknowledged (or is another cluster): the
// recorded partition offsets are dropped and a republish from the first event starts. The
// checkpoint stays where it is; the republish ends when the relay has come back to it. With
// fromStart false only the cluster id is recorded (a relay meeting a cluster for the first time).
//
// Errors: ErrStaleTerm when term is not current; domain.ErrRetryable when PostgreSQL was
// unreachable or timed out.
func (s *Store) StartRepublish(ctx context.Context, name string, term int64, clusterID string, fromStart bool) error {
	const op = "start relay republish"
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE relay_checkpoints SET cluster_id = $3,
			replay_tx_id = CASE WHEN $4 THEN '0'::xid8 ELSE replay_tx_id END,
			replay_position = CASE WHEN $4 THEN 0 ELSE replay_position END,
			updated_at = now()
			WHERE name = $1 AND term = $2`, name, term, clusterID, fromStart)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrStaleTerm
		}
		if fromStart {
			_, err = tx.Exec(ctx, `DELETE FROM relay_partition_offsets WHERE name = $1`, name)
		}
		return err
	})
	if errors.Is(err, ErrStaleTerm) {
		return fmt.Errorf("%s: relay %s, term %d: %w", op, name, term, ErrStaleTerm)
	}
	return wrapErr(op, err)
}
