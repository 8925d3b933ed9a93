package eventstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
)

// StreamAppend is one stream's part of an AppendStreams call: events appended at
// ExpectedVersion+1, ExpectedVersion+2, … A part without events writes nothing to its stream
// but checks that the stream is still at ExpectedVersion when the other parts are written: a
// command decided on a stream it does not change (the actor's own role) commits only if that
// stream did not move meanwhile.
type StreamAppend struct {
	StreamID        string
	ExpectedVersion int64
	Events          []domain.Envelope
}

// AppendStreams appends to several streams of one tenant in one transaction, all or nothing, each
// stream checked against its own expected version exactly as Append does. A command that changes
// two aggregates (a join writes the membership stream and the group's member count) uses it so
// that the group stream's version serialises the joins. Streams are written in the order given;
// callers that may touch the same streams in different orders should sort them to avoid deadlocks.
//
// A part without events is checked in the same transaction after the writes; a call whose parts
// hold no events at all writes and checks nothing. Errors and the returned envelopes are as for
// Append (a checked stream that moved is domain.ErrConcurrency); the returned slice follows the
// order of parts and, inside a part, of its events.
func (s *Store) AppendStreams(ctx context.Context, tenant domain.TenantID, parts []StreamAppend) ([]domain.Envelope, error) {
	const op = "append to streams"
	total := 0
	for _, p := range parts {
		total += len(p.Events)
	}
	if total == 0 {
		return nil, nil
	}
	if err := s.checkBatchSize(total); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	type prepared struct {
		part StreamAppend
		out  []domain.Envelope
		args []any
	}
	preps := make([]prepared, 0, len(parts))
	var checks []StreamAppend
	for _, p := range parts {
		if p.ExpectedVersion < 0 {
			return nil, fmt.Errorf("%s: %w", op, invalid("expected_version", "bad_format", "not negative"))
		}
		if len(p.Events) == 0 {
			if p.StreamID == "" {
				return nil, fmt.Errorf("%s: %w", op, invalid("stream_id", "required", ""))
			}
			checks = append(checks, p)
			continue
		}
		out, arrays, err := prepareStream(tenant, p.StreamID, p.ExpectedVersion, p.Events)
		if err != nil {
			return nil, fmt.Errorf("%s: stream %s: %w", op, p.StreamID, err)
		}
		preps = append(preps, prepared{part: p, out: out, args: append(arrays.args(), tenant.String(), p.StreamID, p.ExpectedVersion)})
	}
	var failed StreamAppend
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for _, p := range preps {
			failed = p.part
			positions, err := insertReturning(ctx, tx, appendSQL, p.args)
			if err != nil {
				return err
			}
			if len(positions) == 0 {
				return versionMismatch(ctx, tx, tenant, p.part.StreamID)
			}
			for i := range p.out {
				p.out[i].Position = positions[p.out[i].EventID]
			}
		}
		for _, c := range checks {
			failed = c
			actual, err := lastVersion(ctx, tx, tenant, c.StreamID)
			if err != nil {
				return err
			}
			if actual != c.ExpectedVersion {
				return &errVersionMismatch{actual: actual}
			}
		}
		return s.notify(ctx, tx)
	})
	if err != nil {
		return nil, appendErr(op, tenant, failed.StreamID, failed.ExpectedVersion, len(failed.Events), err)
	}
	all := make([]domain.Envelope, 0, total)
	for _, p := range preps {
		all = append(all, p.out...)
	}
	return all, nil
}
