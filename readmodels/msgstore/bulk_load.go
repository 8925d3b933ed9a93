package msgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// BulkLoad fills fresh copies of a tenant's read-model tables from its event history, for a
// rebuild or a verification. It writes the same message, read-mark and delete-for-me rows as
// Apply of the same events in the same batches, but faster:
//
//   - the message tables are created without their non-unique secondary indexes, which Finish
//     adds back in one pass per table. The primary key and the unique keys stay, so a sent event
//     loaded twice still leaves one row and recalls and edits find their message by topic and seq.
//   - runs of sent events are streamed with LOAD DATA LOCAL INFILE instead of INSERT statements.
//     The server must allow local_infile (MariaDB does by default).
//
// Apply may be called concurrently for batches of different conversations, like Store.Apply.
// Finish must follow the last Apply before the tables serve reads or are swapped in.
type BulkLoad struct {
	tenant domain.TenantID
	tables Tables
	db     *sql.DB

	mu       sync.Mutex
	deferred map[string][]index // indexes Finish adds, by table; nil once added
}

// StartBulkLoad drops the tables of fresh if they exist, creates them like the tables of like
// (normally DefaultTables) with the message tables' non-unique secondary indexes left out, and
// returns a BulkLoad into them. Every name of fresh must differ from the matching name of like.
func (s *Store) StartBulkLoad(ctx context.Context, tenant domain.TenantID, like, fresh Tables) (*BulkLoad, error) {
	if err := like.Validate(); err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	l, f := like.list(), fresh.list()
	for i := range l {
		if strings.EqualFold(l[i], f[i]) {
			return nil, fmt.Errorf("bulk load: table %s would load into itself: %w", l[i], domain.ErrInvalid)
		}
	}
	db, err := s.db(ctx, tenant, fresh)
	if err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	if err := DropTables(ctx, db, fresh); err != nil {
		return nil, fmt.Errorf("bulk load: drop leftover tables: %w", err)
	}
	if err := CreateTablesLike(ctx, db, like, fresh); err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	b := &BulkLoad{tenant: tenant, tables: fresh, db: db, deferred: map[string][]index{}}
	for _, table := range []string{fresh.GroupMessages, fresh.DirectMessages} {
		indexes, err := plainIndexes(ctx, db, table)
		if err != nil {
			return nil, fmt.Errorf("bulk load: %w", err)
		}
		if err := dropIndexes(ctx, db, table, indexes); err != nil {
			return nil, fmt.Errorf("bulk load: %w", err)
		}
		b.deferred[table] = indexes
	}
	return b, nil
}

// Tables returns the tables being loaded.
func (b *BulkLoad) Tables() Tables { return b.tables }

// Apply writes a batch of the tenant's events to the fresh tables in one transaction, in batch
// order, and returns how many it applied (repeats of an event id within the batch count once).
// Events are applied as Store.Apply applies them, with the same errors; an event passed in two
// calls changes no row the second time, but events should be passed once, in position order.
func (b *BulkLoad) Apply(ctx context.Context, events []domain.Envelope) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	ops, err := decodeBatch(b.tenant, events)
	if err != nil {
		return 0, fmt.Errorf("bulk load: %w", err)
	}
	err = b.write(ctx, ops, loadMessages)
	if errors.Is(err, errLoadNotClean) {
		// A value the server would reject in an INSERT: write the batch the way Apply does, so
		// it fails (or succeeds) exactly as Apply would.
		err = b.write(ctx, ops, insertMessages)
	}
	if err != nil {
		return 0, err
	}
	return len(ops), nil
}

// write applies ops in one transaction, writing runs of sent events with write.
func (b *BulkLoad) write(ctx context.Context, ops []op, write messageWriter) error {
	return inTx(ctx, b.db, "bulk load", func(tx *sql.Tx) error {
		return applyOps(ctx, tx, b.tables, ops, write, false)
	})
}

// Finish adds the secondary indexes StartBulkLoad left out, one ALTER TABLE per message table,
// which costs far less than keeping them up to date row by row, and computes every topic's
// watermark from the loaded rows. Call it once every Apply has returned; later calls do nothing.
// A verification that only checksums and drops the tables may skip it.
func (b *BulkLoad) Finish(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deferred == nil {
		return nil
	}
	if err := computeWatermarks(ctx, b.db, b.tables, readmodels.Millis(time.Now())); err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	for _, table := range []string{b.tables.GroupMessages, b.tables.DirectMessages} {
		if err := addIndexes(ctx, b.db, table, b.deferred[table]); err != nil {
			return fmt.Errorf("bulk load: %w", err)
		}
		delete(b.deferred, table)
	}
	b.deferred = nil
	return nil
}
