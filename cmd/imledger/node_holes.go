package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

// holeMarker is the send handler's HoleRecorder: it appends a seq-skip marker at every seq a
// send gave up, so the hole is final at once instead of after the relay's gap deadline. It runs
// off the sequencer's partition goroutines: SeqsAbandoned only queues, and a full queue drops the
// holes (the relay's gap sweeper still makes them final). Appending a marker is safe at any
// time: a seq that holds a message keeps it.
type holeMarker struct {
	store *eventstore.Store
	log   *slog.Logger
	queue chan []message.AbandonedSeq
}

// holeQueue bounds the batches of holes waiting for their markers.
const holeQueue = 1024

// holeAppendTimeout bounds one marker append.
const holeAppendTimeout = 5 * time.Second

func newHoleMarker(store *eventstore.Store, log *slog.Logger) *holeMarker {
	return &holeMarker{store: store, log: log, queue: make(chan []message.AbandonedSeq, holeQueue)}
}

var _ message.HoleRecorder = (*holeMarker)(nil)

// SeqsAbandoned implements message.HoleRecorder.
func (m *holeMarker) SeqsAbandoned(ctx context.Context, holes []message.AbandonedSeq) {
	select {
	case m.queue <- holes:
	default:
		m.log.WarnContext(ctx, "seq-skip queue full; the relay's gap sweeper will mark these holes", slog.Int("holes", len(holes)))
	}
}

// Run appends the queued markers until ctx ends, then appends what is still queued.
func (m *holeMarker) Run(ctx context.Context) error {
	for {
		select {
		case holes := <-m.queue:
			m.append(ctx, holes)
		case <-ctx.Done():
			for {
				select {
				case holes := <-m.queue:
					m.append(ctx, holes)
				default:
					return nil
				}
			}
		}
	}
}

func (m *holeMarker) append(ctx context.Context, holes []message.AbandonedSeq) {
	skips := make([]eventstore.Skip, len(holes))
	for i, h := range holes {
		skips[i] = eventstore.Skip{Tenant: h.Tenant, Topic: h.Topic, Seq: h.Seq, Reason: domain.SkipAbandoned}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holeAppendTimeout)
	defer cancel()
	if _, err := m.store.AppendSkips(actx, skips); err != nil {
		m.log.WarnContext(ctx, "append seq-skip markers; the relay's gap sweeper will", slog.Int("holes", len(skips)), slog.Any("error", err))
	}
}
