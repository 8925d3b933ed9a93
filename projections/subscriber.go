package projections

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/imledger/imledger/internal/kafka"
)

// PipelinedSubscriberConfig configures a PipelinedSubscriber.
type PipelinedSubscriberConfig struct {
	// Brokers are the Kafka bootstrap addresses. Required.
	Brokers []string
	// ConsumerGroup is the Kafka consumer group. Required.
	ConsumerGroup string
	// Sarama is the client configuration (consumer group settings included). Required.
	Sarama *sarama.Config
	// Unmarshaler turns a record into a watermill message. Required.
	Unmarshaler interface {
		Unmarshal(*sarama.ConsumerMessage) (*message.Message, error)
	}
	// InFlight is how many records of one partition may be delivered and not yet acked.
	// Default 256.
	InFlight int
	// NackResendSleep is how long a nacked record waits before it is delivered again.
	// Default 500ms.
	NackResendSleep time.Duration
	// Topics, when set, are every topic this subscriber will be asked for: it then joins the
	// consumer group once, as one member consuming all of them, when the last of them is
	// subscribed, instead of once per topic (one Kafka client, one fetch loop and one member
	// per topic). Subscribe refuses a topic not in the list.
	Topics []string
	// Prepare, when set, is called for every record in its partition's long-lived goroutine
	// before the record is delivered; the handler finds the result with Prepared. Decoding
	// there, ahead of the handler, spares each handler goroutine growing its stack for it.
	Prepare func(*message.Message) any
	// OnSession, when set, is called at the start of every consumer group session, before any
	// record of it is delivered: the partitions this member consumes may have changed.
	OnSession func()
	// CommitDelay is how soon after a record is acked its offset is committed, over a
	// connection of the subscriber's own (Sarama's auto-commit waits behind the fetch in
	// flight, up to its MaxWaitTime). The offsets acked within it go in one commit: at light
	// traffic a projector applies a batch every relay transaction, and a commit for each was
	// about a third of the node's Kafka requests. Negative: only Sarama's auto-commit. Default
	// 200ms.
	CommitDelay time.Duration
}

func (c *PipelinedSubscriberConfig) setDefaults() {
	if c.InFlight <= 0 {
		c.InFlight = 256
	}
	if c.NackResendSleep <= 0 {
		c.NackResendSleep = 500 * time.Millisecond
	}
	if c.CommitDelay == 0 {
		c.CommitDelay = 200 * time.Millisecond
	}
}

// Validate reports what is missing from c.
func (c PipelinedSubscriberConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("pipelined subscriber: brokers are required"))
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("pipelined subscriber: consumer group is required"))
	}
	if c.Sarama == nil || c.Unmarshaler == nil {
		errs = append(errs, errors.New("pipelined subscriber: sarama config and unmarshaler are required"))
	}
	return errors.Join(errs...)
}

// PipelinedSubscriber is a watermill message.Subscriber on a Sarama consumer group that keeps up
// to InFlight records of each partition delivered at once, instead of one record per partition
// waiting for its ack (watermill-kafka's subscriber). Records of a partition are sent on the
// channel in offset order; each record's offset is marked (and committed by Sarama's auto-commit)
// only once it and every record before it in its partition were acked, so a crash or rebalance
// redelivers what was not settled and never skips it. A nacked record is delivered again after
// NackResendSleep, still holding back the offsets behind it.
//
// A handler that must see a partition's records in order can call HandedOver(msg.Context()) once
// it has queued the record wherever its order matters: the next record of the partition is sent
// only after that call (or after the record's ack or nack). Handlers that do not call it receive
// the next record once the previous one is settled or handed over, whichever comes first.
type PipelinedSubscriber struct {
	cfg    PipelinedSubscriberConfig
	log    watermill.LoggerAdapter
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup

	mu      sync.Mutex                       // guards waiting (Topics only)
	waiting map[string]chan *message.Message // subscribed topics whose group has not started
	ctxs    []context.Context                // their subscriptions' contexts
}

var _ message.Subscriber = (*PipelinedSubscriber)(nil)

// NewPipelinedSubscriber validates cfg and returns a subscriber; it connects on Subscribe.
func NewPipelinedSubscriber(cfg PipelinedSubscriberConfig, log watermill.LoggerAdapter) (*PipelinedSubscriber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if log == nil {
		log = watermill.NopLogger{}
	}
	return &PipelinedSubscriber{cfg: cfg, log: log, closed: make(chan struct{})}, nil
}

// Subscribe joins the consumer group for topic and returns the channel of its records. The
// channel is closed once ctx ends or the subscriber is closed and every partition has stopped.
// With Config.Topics the group is joined once the last of them is subscribed, for all of them,
// and every channel closes when any of their contexts ends.
func (s *PipelinedSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	select {
	case <-s.closed:
		return nil, errors.New("pipelined subscriber: closed")
	default:
	}
	out := make(chan *message.Message)
	if len(s.cfg.Topics) == 0 {
		return out, s.start(ctx, map[string]chan *message.Message{topic: out}, func() {})
	}
	if !slices.Contains(s.cfg.Topics, topic) {
		return nil, fmt.Errorf("pipelined subscriber: topic %s is not one of %v", topic, s.cfg.Topics)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = map[string]chan *message.Message{}
	}
	if _, ok := s.waiting[topic]; ok {
		return nil, fmt.Errorf("pipelined subscriber: topic %s subscribed twice", topic)
	}
	s.waiting[topic] = out
	s.ctxs = append(s.ctxs, ctx)
	if len(s.waiting) < len(s.cfg.Topics) {
		return out, nil
	}
	joined, cancel := context.WithCancel(context.Background())
	for _, c := range s.ctxs {
		context.AfterFunc(c, cancel)
	}
	if err := s.start(joined, s.waiting, cancel); err != nil {
		return nil, err
	}
	return out, nil
}

// start joins the consumer group for the topics of outs and delivers each topic's records on its
// channel until ctx ends or the subscriber is closed; then it closes the channels and calls done
// (at once when it fails).
func (s *PipelinedSubscriber) start(ctx context.Context, outs map[string]chan *message.Message, done func()) error {
	group, err := sarama.NewConsumerGroup(s.cfg.Brokers, s.cfg.ConsumerGroup, s.cfg.Sarama)
	if err != nil {
		done()
		return fmt.Errorf("pipelined subscriber: consumer group %s: %w", s.cfg.ConsumerGroup, err)
	}
	topics := slices.Sorted(maps.Keys(outs))
	fields := watermill.LogFields{"consumer_group": s.cfg.ConsumerGroup, "topics": topics}
	var commits *offsetCommitter
	if s.cfg.CommitDelay > 0 {
		if commits, err = newOffsetCommitter(s.cfg.Brokers, s.cfg.Sarama, s.cfg.ConsumerGroup, s.cfg.CommitDelay, s.log); err != nil {
			_ = group.Close()
			done()
			return fmt.Errorf("pipelined subscriber: offset committer of %s: %w", s.cfg.ConsumerGroup, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &claimHandler{s: s, ctx: ctx, outs: outs, commits: commits}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		select {
		case <-ctx.Done():
		case <-s.closed:
		}
		cancel()
	}()
	report := func(_ context.Context, msg string, err error) { s.log.Error(msg, err, fields) }
	go func() {
		defer s.wg.Done()
		// Deferred calls run last first: RunGroup has closed the group, then the committer
		// closes, then the channels, and done runs last.
		defer done()
		defer func() {
			for _, out := range outs {
				close(out)
			}
		}()
		if commits != nil {
			defer commits.close()
		}
		// Only this goroutine closes the group, so RunGroup ends with ctx and returns nil.
		_ = kafka.RunGroup(ctx, group, topics, h, report)
	}()
	return nil
}

// Close stops every subscription and waits until their channels are closed.
func (s *PipelinedSubscriber) Close() error {
	s.once.Do(func() { close(s.closed) })
	s.wg.Wait()
	return nil
}

// deliveryKey is the context key of a record's *delivery.
type deliveryKey struct{}

// delivery is one record delivered to the handler, with its hand-over signal and what Prepare
// made of it.
type delivery struct {
	once     sync.Once
	handed   chan struct{}
	prepared any
}

// Prepared returns what PipelinedSubscriberConfig.Prepare returned for the record whose message
// context is ctx, or nil.
func Prepared(ctx context.Context) any {
	if d, ok := ctx.Value(deliveryKey{}).(*delivery); ok {
		return d.prepared
	}
	return nil
}

func (d *delivery) handOver() { d.once.Do(func() { close(d.handed) }) }

// HandedOver tells a PipelinedSubscriber that the record whose message context is ctx has been
// queued by its handler, so the next record of its partition may be delivered. It does nothing
// for other contexts and when called again.
func HandedOver(ctx context.Context) {
	if d, ok := ctx.Value(deliveryKey{}).(*delivery); ok {
		d.handOver()
	}
}

// claimHandler is the sarama.ConsumerGroupHandler of one consumer group member.
type claimHandler struct {
	s       *PipelinedSubscriber
	ctx     context.Context // the subscription's; message contexts derive from it
	outs    map[string]chan *message.Message
	commits *offsetCommitter // nil: only Sarama's auto-commit
}

func (h *claimHandler) Setup(sarama.ConsumerGroupSession) error {
	if h.s.cfg.OnSession != nil {
		h.s.cfg.OnSession()
	}
	return nil
}

func (h *claimHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// pending is a delivered record not yet acked, in partition order.
type pending struct {
	rec *sarama.ConsumerMessage
	msg *message.Message
}

// ConsumeClaim delivers the records of one partition, up to InFlight at a time, and marks
// offsets in order as records are acked. When the session ends it stops delivering and waits
// for the records in flight to settle (or the subscription to end) before returning, so no
// other member applies them at the same time.
func (h *claimHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	out := h.outs[claim.Topic()] // every record of the claim goes there
	inflight := make(chan pending, h.s.cfg.InFlight)
	ackerDone := make(chan struct{})
	go func() {
		defer close(ackerDone)
		h.ack(sess, out, inflight)
	}()
	defer func() {
		close(inflight)
		<-ackerDone
	}()
	for {
		var rec *sarama.ConsumerMessage
		select {
		case r, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			rec = r
		case <-sess.Context().Done():
			return nil
		case <-h.ctx.Done():
			return nil
		}
		msg, err := h.s.cfg.Unmarshaler.Unmarshal(rec)
		if err != nil {
			// The unmarshaler is expected not to fail; a record it cannot read is skipped
			// rather than stopping the partition forever.
			h.s.log.Error("unmarshal record; skipped", err, watermill.LogFields{"topic": rec.Topic,
				"partition": rec.Partition, "offset": rec.Offset})
			msg = nil
		}
		p := pending{rec: rec, msg: msg}
		if msg != nil {
			d := &delivery{handed: make(chan struct{})}
			if h.s.cfg.Prepare != nil {
				d.prepared = h.s.cfg.Prepare(msg)
			}
			msg.SetContext(context.WithValue(h.ctx, deliveryKey{}, d))
			select {
			case inflight <- p:
			case <-h.ctx.Done():
				return nil
			}
			if !h.send(out, msg) {
				return nil
			}
			select {
			case <-d.handed:
			case <-msg.Acked():
			case <-msg.Nacked():
			case <-h.ctx.Done():
				return nil
			}
			continue
		}
		select {
		case inflight <- p:
		case <-h.ctx.Done():
			return nil
		}
	}
}

// send puts msg on out, its topic's channel, unless the subscription ends first.
func (h *claimHandler) send(out chan<- *message.Message, msg *message.Message) bool {
	select {
	case out <- msg:
		return true
	case <-h.ctx.Done():
		return false
	}
}

// ack waits for the records of inflight in order and marks each offset once its record is acked;
// a nacked record is sent on out again after NackResendSleep. It returns when inflight is closed and
// drained, or when the subscription ends.
func (h *claimHandler) ack(sess sarama.ConsumerGroupSession, out chan<- *message.Message, inflight <-chan pending) {
	for p := range inflight {
		msg := p.msg
		for msg != nil {
			select {
			case <-msg.Acked():
				msg = nil
			case <-msg.Nacked():
				select {
				case <-time.After(h.s.cfg.NackResendSleep):
				case <-h.ctx.Done():
					return
				}
				if sess.Context().Err() != nil {
					// The partition may belong to another member now: leave the record to it.
					return
				}
				again := msg.Copy()
				again.SetContext(context.WithValue(h.ctx, deliveryKey{}, &delivery{handed: make(chan struct{}), prepared: Prepared(msg.Context())}))
				if !h.send(out, again) {
					return
				}
				msg = again
			case <-h.ctx.Done():
				return
			}
		}
		sess.MarkMessage(p.rec, "")
		if h.commits != nil {
			h.commits.mark(sess, p.rec.Topic, p.rec.Partition, p.rec.Offset+1)
		}
	}
}
