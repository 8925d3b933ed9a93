package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// String renders c as "<tx_id>:<position>", the form the export and republish commands print,
// write beside their output and read back.
func (c Cursor) String() string {
	return strconv.FormatUint(c.TxID, 10) + ":" + strconv.FormatInt(c.Position, 10)
}

// IsZero reports whether c is the zero Cursor, before every event.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// ParseCursor parses the form of Cursor.String. Errors: domain.ErrInvalid for anything else.
func ParseCursor(s string) (Cursor, error) {
	tx, pos, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Cursor{}, invalid("cursor", "bad_format", "<tx_id>:<position>")
	}
	t, err1 := strconv.ParseUint(tx, 10, 64)
	p, err2 := strconv.ParseInt(pos, 10, 64)
	if err1 != nil || err2 != nil || p < 0 {
		return Cursor{}, invalid("cursor", "bad_format", "<tx_id>:<position>, two non-negative integers")
	}
	return Cursor{TxID: t, Position: p}, nil
}

// HorizonCursor is the cursor that stands before every event of transaction horizon and after
// every event of older transactions: where a reader that has read everything below a horizon
// (see Horizon) resumes.
func HorizonCursor(horizon uint64) Cursor { return Cursor{TxID: horizon} }

// Horizon returns the oldest transaction id still running in the PostgreSQL cluster
// (pg_snapshot_xmin of the current snapshot). Every transaction with a lower id has ended, so the
// events below the horizon are final: no event will ever appear between two of them. A reader
// that fixes a horizon, reads everything after its cursor and below the horizon, and resumes next
// time from HorizonCursor(horizon) sees every committed event exactly once, whatever order the
// transactions committed in. Errors: domain.ErrRetryable when PostgreSQL was unreachable.
func (s *Store) Horizon(ctx context.Context) (uint64, error) {
	var h uint64
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&h); err != nil {
		return 0, wrapErr("read the commit horizon", err)
	}
	return h, nil
}

// Range is a stretch of the commit-safe order: the events after From and, unless To is zero, not
// after To, written by transactions below Horizon.
type Range struct {
	From    Cursor
	To      Cursor
	Horizon uint64
}

// CheckFrom returns an error wrapping domain.ErrInvalid when r.From is past
// HorizonCursor(r.Horizon). Every cursor a scan of this store ends at is at or before the horizon
// of its time, and the horizon never moves back, so such a cursor was made up, edited, or comes
// from another database: a scan from it would find nothing and end at it, skipping every event
// written until the log reached it.
func (r Range) CheckFrom() error {
	if end := HorizonCursor(r.Horizon); end.Before(r.From) {
		return invalid("cursor", "ahead_of_log", "cursor "+r.From.String()+" is past the end of this event store's log ("+
			end.String()+"): it does not come from a scan of this database")
	}
	return nil
}

// where renders r as conditions over args, appending its parameters.
func (r Range) where(args []any) (string, []any) {
	param := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	conds := []string{
		"(tx_id, position) > (" + param(r.From.TxID) + "::xid8, " + param(r.From.Position) + "::bigint)",
		"tx_id < " + param(r.Horizon) + "::xid8",
	}
	if !r.To.IsZero() {
		conds = append(conds, "(tx_id, position) <= ("+param(r.To.TxID)+"::xid8, "+param(r.To.Position)+"::bigint)")
	}
	return strings.Join(conds, " AND "), args
}

// End is the cursor a reader that has read all of r resumes from: To when r has an upper bound,
// else HorizonCursor(Horizon), and never before From.
func (r Range) End() Cursor {
	end := HorizonCursor(r.Horizon)
	if !r.To.IsZero() && r.To.Before(end) {
		end = r.To
	}
	if end.Before(r.From) {
		end = r.From
	}
	return end
}

// scanChunk is how many events one query of ScanCommitted streams at most: its pages are cut
// from the rows as they arrive, so a long scan is planned and started once per scanChunk events
// rather than once per page, while no query (and no snapshot) stays open for the whole log.
const scanChunk = 250_000

// ScanCommitted calls fn with the events of f in r, in commit-safe (tx_id, position) order, in
// pages of up to page events (page <= 0 means Config.MaxRead; it is not capped, so a reader can
// trade memory for round trips). Events come as stored, not upcast: the export and republish
// commands decide what their readers get. One query streams up to max(page, 250,000) events and
// fn is called as each page arrives (PostgreSQL waits on the socket while fn works); fn's error
// stops the scan and is returned as it is. A zero Horizon reads nothing: call Horizon first.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) ScanCommitted(ctx context.Context, r Range, f Filter, page int, fn func([]Record) error) error {
	const op = "scan committed events"
	if page <= 0 {
		page = s.cfg.MaxRead
	}
	chunk := max(page, scanChunk)
	sc := newPageScanner()
	for {
		rw, args := r.where([]any{chunk})
		fw, args := filterWhere(f, args)
		rows, err := s.pool.Query(ctx, `SELECT tx_id, `+envelopeColumns+` FROM events WHERE `+rw+` AND `+fw+
			` ORDER BY tx_id, position LIMIT $1`, args...)
		if err != nil {
			return wrapErr(op, err)
		}
		n := 0
		recs := make([]Record, 0, min(page, 4096))
		for rows.Next() {
			rec, err := sc.scan(rows)
			if err != nil {
				rows.Close()
				return wrapErr(op, err)
			}
			recs = append(recs, rec)
			n++
			if len(recs) == page {
				if err := fn(recs); err != nil {
					rows.Close()
					return err
				}
				r.From = recs[len(recs)-1].Cursor
				recs = make([]Record, 0, min(page, 4096))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return wrapErr(op, err)
		}
		if len(recs) > 0 {
			if err := fn(recs); err != nil {
				return err
			}
			r.From = recs[len(recs)-1].Cursor
		}
		if n < chunk {
			return nil
		}
	}
}

// CountCommitted returns the number of events of f in r, for progress reporting.
// Errors: domain.ErrRetryable when PostgreSQL was unreachable or timed out.
func (s *Store) CountCommitted(ctx context.Context, r Range, f Filter) (int64, error) {
	rw, args := r.where(nil)
	fw, args := filterWhere(f, args)
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+rw+` AND `+fw, args...).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, wrapErr("count committed events", err)
	}
	return n, nil
}

// String renders r for logs.
func (r Range) String() string {
	s := fmt.Sprintf("after %s below transaction %d", r.From, r.Horizon)
	if !r.To.IsZero() {
		s += " up to " + r.To.String()
	}
	return s
}
