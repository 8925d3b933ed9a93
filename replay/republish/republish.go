package republish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/schollz/progressbar/v3"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/progress"
)

// Reader is what a republish needs of the event store (*eventstore.Store).
type Reader interface {
	// Horizon returns the oldest transaction id still running: events below it are final.
	Horizon(ctx context.Context) (uint64, error)
	// CountCommitted counts the events of f in r.
	CountCommitted(ctx context.Context, r eventstore.Range, f eventstore.Filter) (int64, error)
	// ScanCommitted hands the events of f in r to fn in commit-safe order, page by page.
	ScanCommitted(ctx context.Context, r eventstore.Range, f eventstore.Filter, page int, fn func([]eventstore.Record) error) error
}

// Producer sends a batch of records and returns once all are acknowledged
// (sarama.SyncProducer, configured like the relay's: internal/kafka.NewSyncProducer).
type Producer interface {
	SendMessages(msgs []*sarama.ProducerMessage) error
}

// Run republishes the events cfg selects to cfg.Topic and returns what it sent.
//
// Events are read in the relay's commit-safe order below a horizon fixed at the start and sent
// in batches; each batch is acknowledged by every replica before the next is sent and its cursor
// is saved to cfg.Checkpoint, so records of one conversation (one key, one partition) arrive in
// order and a republish that fails or is stopped resumes after the last acknowledged batch. A
// batch interrupted by a failure may have been written in part and is sent again on resume:
// delivery is at least once, and consumers dedupe on event_id as on the live topics. The events
// are sent as stored; old versions are not upcast (consumers upcast, as on the live topics).
//
// Errors: ErrLiveTopic and other configuration errors, domain.ErrInvalid for a start cursor
// (given or checkpointed) past the end of the log (eventstore.Range.CheckFrom) and for a checkpoint
// written by a republish of another tenant or topic, the store's (domain.ErrRetryable when
// PostgreSQL is unreachable), the producer's, and checkpoint file errors.
func Run(ctx context.Context, r Reader, p Producer, cfg Config) (Result, error) {
	return run(ctx, r, cfg, func(s *sender) batchSender { return &syncSender{p: p, s: s} })
}

// RunAsync is Run with an asynchronous producer (sarama.NewAsyncProducer with the configuration
// of kafka.NewProducerConfig: idempotent, one request in flight per broker, so records of one
// partition stay in order): up to Config.InFlight batches are in flight at once instead of one,
// and the checkpoint moves to the end of a batch once it and every batch before it are
// acknowledged. The guarantees are Run's. The caller closes p.
func RunAsync(ctx context.Context, r Reader, p sarama.AsyncProducer, cfg Config) (Result, error) {
	return run(ctx, r, cfg, func(s *sender) batchSender { return newAsyncSender(p, s) })
}

func run(ctx context.Context, r Reader, cfg Config, newSender func(*sender) batchSender) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg.setDefaults()
	start := cfg.Now()
	from := cfg.From
	if from.IsZero() && cfg.Checkpoint != "" {
		c, sel, ok, err := readCheckpoint(cfg.Checkpoint)
		if err != nil {
			return Result{}, err
		}
		if ok && sel != "" && sel != cfg.selection() {
			// Its cursor says how far that republish read the log, which events of this
			// selection before it were never sent: resuming from it would skip them.
			return Result{}, &domain.ValidationError{Field: "checkpoint", Reason: "selection_differs", Detail: fmt.Sprintf(
				"%s holds a republish of %s, not %s: resume it with the same --tenant and --topic, or use another checkpoint file",
				cfg.Checkpoint, sel, cfg.selection())}
		}
		if ok {
			from = c
			cfg.Logger.InfoContext(ctx, "resuming a republish", "checkpoint", cfg.Checkpoint, "cursor", c.String())
		}
	}
	horizon, err := r.Horizon(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("republish: %w", err)
	}
	rng := eventstore.Range{From: from, To: cfg.To, Horizon: horizon}
	if err := rng.CheckFrom(); err != nil {
		return Result{}, fmt.Errorf("republish: %w", err)
	}
	filter := eventstore.Filter{Tenant: cfg.Tenant}
	var bar *progressbar.ProgressBar
	if cfg.Progress != nil {
		total, err := r.CountCommitted(ctx, rng, filter)
		if err != nil {
			return Result{}, fmt.Errorf("republish: %w", err)
		}
		bar = progress.Bar(cfg.Progress, total, "republish")
	}
	s := &sender{cfg: cfg, start: start, bar: bar}
	s.out = newSender(s)
	err = s.run(ctx, r, rng, filter)
	if bar != nil {
		_ = bar.Finish()
	}
	res := Result{Events: s.sent, Cursor: s.cursor, Duration: cfg.Now().Sub(start)}
	if err != nil {
		return res, err
	}
	res.Cursor = rng.End()
	if cfg.Checkpoint != "" {
		if err := writeCheckpoint(cfg, res.Cursor); err != nil {
			return res, err
		}
	}
	cfg.Logger.InfoContext(ctx, "republished events", "topic", cfg.Topic, "events", res.Events, "cursor", res.Cursor.String(),
		"range", rng.String(), "duration", res.Duration)
	return res, nil
}

// batchSender sends the batches of a sender: send hands one over (and may return before it is
// acknowledged), flush waits until every batch handed over is acknowledged or failed.
type batchSender interface {
	send(ctx context.Context, msgs []*sarama.ProducerMessage, end eventstore.Cursor) error
	flush() error
}

// sender sends pages as rate-limited batches and checkpoints after each acknowledged one.
type sender struct {
	out    batchSender
	cfg    Config
	start  time.Time
	bar    *progressbar.ProgressBar
	sent   int64 // acknowledged
	queued int64 // handed to the producer
	cursor eventstore.Cursor
}

// run reads pages on a goroutine, two pages ahead, and sends them on this one.
func (s *sender) run(ctx context.Context, r Reader, rng eventstore.Range, f eventstore.Filter) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.cursor = rng.From
	pages := make(chan []eventstore.Record, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(pages)
		readErr <- r.ScanCommitted(ctx, rng, f, s.cfg.BatchSize, func(recs []eventstore.Record) error {
			select {
			case pages <- recs:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}()
	var serr error
	for recs := range pages {
		if serr != nil {
			continue
		}
		if serr = s.send(ctx, recs); serr != nil {
			cancel(serr)
		}
	}
	if ferr := s.out.flush(); serr == nil {
		serr = ferr
	}
	if rerr := <-readErr; serr == nil && rerr != nil {
		return fmt.Errorf("republish: %w", rerr)
	}
	return serr
}

// send waits for the rate limit, sends recs as one batch and saves the checkpoint.
func (s *sender) send(ctx context.Context, recs []eventstore.Record) error {
	if s.cfg.Rate > 0 {
		due := s.start.Add(time.Duration(float64(s.queued) / float64(s.cfg.Rate) * float64(time.Second)))
		if wait := due.Sub(s.cfg.Now()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			case <-t.C:
			}
		}
	}
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i := range recs {
		env := recs[i].Envelope
		env.Position = recs[i].Cursor.Position
		m, err := relay.NewMessage(env, s.cfg.Topic)
		if err != nil {
			return fmt.Errorf("republish: %w", err)
		}
		msgs[i] = m
	}
	s.queued += int64(len(msgs))
	return s.out.send(ctx, msgs, recs[len(recs)-1].Cursor)
}

// acked records that the batch ending at end, and every batch before it, was acknowledged.
func (s *sender) acked(n int, end eventstore.Cursor) error {
	s.sent += int64(n)
	s.cursor = end
	if s.bar != nil {
		_ = s.bar.Add(n)
	}
	if s.cfg.Checkpoint != "" {
		return writeCheckpoint(s.cfg, s.cursor)
	}
	return nil
}

// syncSender sends one batch at a time and waits for its acks.
type syncSender struct {
	p Producer
	s *sender
}

func (y *syncSender) send(_ context.Context, msgs []*sarama.ProducerMessage, end eventstore.Cursor) error {
	if err := y.p.SendMessages(msgs); err != nil {
		return fmt.Errorf("republish: send %d events after %s to %s: %w", len(msgs), y.s.cursor, y.s.cfg.Topic, firstError(err))
	}
	return y.s.acked(len(msgs), end)
}

func (y *syncSender) flush() error { return nil }

// asyncSender feeds batches to an AsyncProducer back to back, up to Config.InFlight at once,
// and acknowledges them in order.
type asyncSender struct {
	p     sarama.AsyncProducer
	s     *sender
	slots chan struct{} // one per batch in flight
	done  chan struct{} // closed when the collector ended

	mu       sync.Mutex
	batches  []*asyncBatch // in flight, oldest first
	inputs   int64         // records handed to the producer
	answered int64         // records acknowledged or failed
	err      error         // the first failure
	closing  bool
	wake     chan struct{}
}

type asyncBatch struct {
	n, acked int
	end      eventstore.Cursor
}

func newAsyncSender(p sarama.AsyncProducer, s *sender) *asyncSender {
	a := &asyncSender{p: p, s: s, slots: make(chan struct{}, s.cfg.InFlight), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go a.collect()
	return a
}

func (a *asyncSender) send(ctx context.Context, msgs []*sarama.ProducerMessage, end eventstore.Cursor) error {
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	a.mu.Lock()
	if a.err != nil {
		err := a.err
		a.mu.Unlock()
		<-a.slots
		return err
	}
	b := &asyncBatch{n: len(msgs), end: end}
	a.batches = append(a.batches, b)
	a.inputs += int64(len(msgs))
	a.mu.Unlock()
	for _, m := range msgs {
		m.Metadata = b
		a.p.Input() <- m
	}
	return nil
}

// collect counts the acks and failures of the records, in any order, and acknowledges the
// batches at the head that are complete.
func (a *asyncSender) collect() {
	defer close(a.done)
	succ, errs := a.p.Successes(), a.p.Errors()
	for {
		a.mu.Lock()
		finished := a.closing && a.answered == a.inputs
		a.mu.Unlock()
		if finished {
			return
		}
		select {
		case m := <-succ:
			a.mu.Lock()
			a.answered++
			m.Metadata.(*asyncBatch).acked++
			for len(a.batches) > 0 && a.batches[0].acked == a.batches[0].n {
				b := a.batches[0]
				a.batches = a.batches[1:]
				<-a.slots
				if err := a.s.acked(b.n, b.end); err != nil {
					a.failLocked(err)
				}
			}
			a.mu.Unlock()
		case pe := <-errs:
			a.mu.Lock()
			a.answered++
			a.failLocked(fmt.Errorf("republish: send after %s to %s: %w", a.s.cursor, a.s.cfg.Topic, pe.Err))
			a.mu.Unlock()
		case <-a.wake:
		}
	}
}

// failLocked records the first failure and gives up the batches in flight: none of them is
// acknowledged any more, so the checkpoint stays before them.
func (a *asyncSender) failLocked(err error) {
	if a.err == nil {
		a.err = err
	}
	for range a.batches {
		<-a.slots
	}
	a.batches = nil
}

// flush waits until every record handed over is answered and returns the first failure.
func (a *asyncSender) flush() error {
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// firstError unwraps sarama.ProducerErrors to its first error, which says why.
func firstError(err error) error {
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) && len(pe) > 0 {
		return fmt.Errorf("%d records failed, first: %w", len(pe), pe[0].Err)
	}
	return err
}

// selectionPrefix starts the line of a checkpoint file that records the republish's selection
// (the second; checkpoints written before it have none).
const selectionPrefix = "selection "

// selection is the record of the tenant and topic of c that a resumed republish must repeat, as
// a line of JSON.
func (c Config) selection() string {
	s := struct {
		Tenant string `json:"tenant,omitempty"`
		Topic  string `json:"topic"`
	}{Topic: c.Topic}
	if !c.Tenant.IsZero() {
		s.Tenant = c.Tenant.String()
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// readCheckpoint reads a checkpoint file: the cursor and the selection of the republish that
// wrote it ("" when the file does not record it). A missing file is false.
func readCheckpoint(path string) (eventstore.Cursor, string, bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return eventstore.Cursor{}, "", false, nil
	}
	if err != nil {
		return eventstore.Cursor{}, "", false, fmt.Errorf("republish: %w", err)
	}
	line, rest, _ := strings.Cut(string(raw), "\n")
	c, err := eventstore.ParseCursor(line)
	if err != nil {
		return eventstore.Cursor{}, "", false, fmt.Errorf("republish: checkpoint %s: %w", path, err)
	}
	sel, _, _ := strings.Cut(rest, "\n")
	sel, _ = strings.CutPrefix(sel, selectionPrefix)
	return c, sel, true, nil
}

// writeCheckpoint replaces the checkpoint file of cfg atomically.
func writeCheckpoint(cfg Config, c eventstore.Cursor) error {
	path := cfg.Checkpoint
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(c.String()+"\n"+selectionPrefix+cfg.selection()+"\n"), 0o644); err != nil {
		return fmt.Errorf("republish: checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("republish: checkpoint: %w", err)
	}
	return nil
}
