package replay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
)

// ExpiringEvents returns r reading each tenant's message events under its retention horizon (h),
// as the live projectors read them (projections.WithRetention), so a rebuild or a verification
// gives what the live read models hold after retention. h nil returns r as it is.
func ExpiringEvents(r EventReader, h projections.Horizons) EventReader {
	if h == nil {
		return r
	}
	return &expiringReader{EventReader: r, horizons: h}
}

// expiringReader is an EventReader that reads the message events of each tenant as
// projections.Expire does under the tenant's horizon. A page whose events were all dropped is followed by the next one,
// so an empty page still means the end of the log. A pass over the log from its start (after
// position 0) also gives up, with expired markers, the seqs below the first seq a conversation of
// a tenant with a horizon still holds: their events were dropped with their month partition,
// and the live read model keeps them as markers.
type expiringReader struct {
	EventReader
	horizons projections.Horizons

	mu   sync.Mutex
	seen map[string]bool // tenant/topic whose first seq the current pass has handled
}

// ReadAll implements EventReader.
func (r *expiringReader) ReadAll(ctx context.Context, f domain.EventFilter, after int64, limit int) ([]domain.Envelope, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fromStart := after == 0
	if fromStart {
		r.seen = map[string]bool{}
	}
	for {
		page, err := r.EventReader.ReadAll(ctx, f, after, limit)
		if err != nil || len(page) == 0 {
			return page, err
		}
		out, err := r.expirePage(ctx, page, fromStart || r.seen != nil)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			return out, nil
		}
		after = page[len(page)-1].Position
	}
}

// expirePage applies expire to events of any tenants, each under its tenant's horizon, and with
// prefix the dropped seqs of each conversation's first seq event of the pass.
func (r *expiringReader) expirePage(ctx context.Context, events []domain.Envelope, prefix bool) ([]domain.Envelope, error) {
	horizons := map[domain.TenantID]time.Time{}
	out := events[:0:0]
	for _, e := range events {
		hz, ok := horizons[e.TenantID]
		if !ok {
			var err error
			if hz, err = r.horizons.RetainedBefore(ctx, e.TenantID); err != nil {
				return nil, fmt.Errorf("retention horizon of tenant %s: %w", e.TenantID, err)
			}
			horizons[e.TenantID] = hz
		}
		if prefix && !hz.IsZero() && domain.IsConversationSeqEvent(e.EventType) {
			out = append(out, r.droppedPrefix(e, hz)...)
		}
		out = append(out, projections.Expire([]domain.Envelope{e}, hz)...)
	}
	return out, nil
}

// droppedPrefix returns the expired markers of seqs 1..v-1 of e's conversation when e is the
// first seq event of it the pass reads (at version v): the events of those seqs are gone.
func (r *expiringReader) droppedPrefix(e domain.Envelope, horizon time.Time) []domain.Envelope {
	key := e.TenantID.String() + "/" + e.StreamID
	if r.seen == nil || r.seen[key] {
		return nil
	}
	r.seen[key] = true
	return projections.ExpiredBelow(e, horizon)
}
