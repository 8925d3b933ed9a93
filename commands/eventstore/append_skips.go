package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// Skip asks to give up one seq of a conversation with a seq-skip marker (domain.SeqSkipped).
type Skip struct {
	Tenant domain.TenantID
	Topic  domain.Topic
	Seq    int64
	// Reason is domain.SkipAbandoned or domain.SkipGapTimeout.
	Reason string
	// Actor is recorded as the marker's cause; the zero value means {system, imledger}.
	Actor domain.Actor
}

// AppendSkips appends a seq-skip marker at each skip's seq, in one statement, and returns the
// markers it stored. A seq that already holds an event (the late send committed first, or a
// marker is there) is left alone and is not in the result, so appending the same skips again is
// harmless. A send that tries the seq after its marker committed gets VersionTaken from
// AppendBatch and a new seq. Errors (then nothing is written): domain.ErrInvalid for a bad skip
// or more than Config.MaxBatch of them, domain.ErrRetryable when PostgreSQL was unreachable or
// timed out.
//
// It is how a sequencer gives up the seqs of sends it abandons; the relay's gap sweeper uses
// AppendSkipsFenced.
func (s *Store) AppendSkips(ctx context.Context, skips []Skip) ([]domain.Envelope, error) {
	const op = "append seq skips"
	events, arrays, err := s.prepareSkips(skips)
	if err != nil || len(events) == 0 {
		return nil, wrapOp(op, err)
	}
	positions, err := insertBatch(ctx, s.pool, append(arrays.args(), s.cfg.NotifyChannel))
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return stored(events, positions), nil
}

// AppendSkipsFenced is AppendSkips on behalf of the relay called relay in term: the markers are
// written only while term is the relay's current term (see BeginRelayTerm). Errors: as
// AppendSkips, and ErrStaleTerm when the term is over (nothing is written).
func (s *Store) AppendSkipsFenced(ctx context.Context, relay string, term int64, skips []Skip) ([]domain.Envelope, error) {
	const op = "append seq skips"
	events, arrays, err := s.prepareSkips(skips)
	if err != nil || len(events) == 0 {
		return nil, wrapOp(op, err)
	}
	var positions map[[16]byte]int64
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// FOR SHARE: a new term cannot begin until these markers are committed or rolled back.
		var current int64
		err := tx.QueryRow(ctx, `SELECT term FROM relay_checkpoints WHERE name = $1 FOR SHARE`, relay).Scan(&current)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && current != term {
			return ErrStaleTerm
		}
		if err != nil {
			return err
		}
		positions, err = insertBatch(ctx, tx, append(arrays.args(), s.cfg.NotifyChannel))
		return err
	})
	if errors.Is(err, ErrStaleTerm) {
		return nil, fmt.Errorf("%s: relay %s, term %d: %w", op, relay, term, ErrStaleTerm)
	}
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return stored(events, positions), nil
}

// prepareSkips builds and validates the marker envelopes of skips.
func (s *Store) prepareSkips(skips []Skip) ([]domain.Envelope, *eventArrays, error) {
	if err := s.checkBatchSize(len(skips)); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	events := make([]domain.Envelope, len(skips))
	arrays := newEventArrays(len(skips))
	for i, sk := range skips {
		actor := sk.Actor
		if actor == (domain.Actor{}) {
			actor = domain.Actor{Type: domain.ActorSystem, ID: domain.SourceService}
		}
		if sk.Reason == "" {
			return nil, nil, fmt.Errorf("skip %d: %w", i, invalid("reason", "required", ""))
		}
		e, err := domain.NewSeqSkipped(sk.Tenant, sk.Topic, sk.Seq, sk.Reason, actor, now)
		if err != nil {
			return nil, nil, fmt.Errorf("skip %d: %w", i, err)
		}
		if e, err = prepare(e); err != nil {
			return nil, nil, fmt.Errorf("skip %d: %w", i, err)
		}
		events[i] = e
		arrays.add(e)
	}
	return events, arrays, nil
}

// stored returns the events that were inserted, with their positions.
func stored(events []domain.Envelope, positions map[[16]byte]int64) []domain.Envelope {
	var out []domain.Envelope
	for _, e := range events {
		if pos, ok := positions[e.EventID]; ok {
			e.Position = pos
			out = append(out, e)
		}
	}
	return out
}

// wrapOp prefixes a non-nil error with op.
func wrapOp(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
