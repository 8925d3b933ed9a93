package projections_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/domain"
)

func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// recorder is an in-memory Applier for tests of the framework: it keeps each event once, in
// the order applied, per conversation.
type recorder struct {
	mu    sync.Mutex
	seen  map[string]bool
	convs map[string][]domain.Envelope
	calls int
}

func newRecorder() *recorder {
	return &recorder{seen: map[string]bool{}, convs: map[string][]domain.Envelope{}}
}

func (r *recorder) Apply(_ context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	n := 0
	for _, e := range events {
		if e.TenantID != tenant {
			return 0, fmt.Errorf("event of %s applied as %s", e.TenantID, tenant)
		}
		if r.seen[e.EventID.String()] {
			continue
		}
		r.seen[e.EventID.String()] = true
		k := e.TenantID.String() + ":" + domain.ConversationKey(e.StreamID)
		r.convs[k] = append(r.convs[k], e)
		n++
	}
	return n, nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// conv returns the event ids applied for a conversation, in order.
func (r *recorder) conv(tenant domain.TenantID, conv string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.convs[tenant.String()+":"+conv] {
		out = append(out, e.EventID.String())
	}
	return out
}

type stringEncoder string

func (s stringEncoder) Encode() ([]byte, error) { return []byte(s), nil }
func (s stringEncoder) Length() int             { return len(s) }
