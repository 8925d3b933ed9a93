package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
)

// rejoinPause is how long RunGroup waits after a failed session before it joins again, so a
// broker that refuses every join is not asked again at once.
const rejoinPause = time.Second

// Report receives what RunGroup has to tell: msg says what happened, err why. The binary's
// consumers log it with slog (LogReport); the projectors' subscriber with its watermill logger.
type Report func(ctx context.Context, msg string, err error)

// LogReport returns a Report that logs to log at warn level, the error under "err".
func LogReport(log *slog.Logger) Report {
	return func(ctx context.Context, msg string, err error) { log.WarnContext(ctx, msg, "err", err) }
}

// NewConsumerGroup returns a Sarama consumer group named name on cfg's brokers with the settings
// of NewSaramaConfig and Sarama's auto-commit of marked offsets. A partition without a committed
// offset is read from its oldest record, so what was produced before the group's first member
// joined is still consumed. returnErrors turns on Consumer.Return.Errors: the errors of a
// session's partitions then reach RunGroup, which reports them, instead of Sarama's logger. The
// group joins nothing until RunGroup (or Consume) runs.
func NewConsumerGroup(cfg Config, name string, returnErrors bool) (sarama.ConsumerGroup, error) {
	sc, err := NewSaramaConfig(cfg)
	if err != nil {
		return nil, err
	}
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Return.Errors = returnErrors
	g, err := sarama.NewConsumerGroup(cfg.Brokers, name, sc)
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s: %w", name, err)
	}
	return g, nil
}

// RunGroup is the one loop every Sarama consumer group of imledger runs in: it consumes topics
// with g, h handling each session's claims, until ctx ends or g is closed by someone else.
//
//   - A session that fails while ctx lasts (Consume returns an error: a join refused, a Setup
//     that failed) is reported, and g joins again after a second, unless ctx ends first.
//   - The errors g sends on Errors() are reported while it runs. They come only with
//     Consumer.Return.Errors; without it the channel stays empty, and since Sarama closes it when
//     the group closes, draining it never holds RunGroup up.
//   - At the end g is closed, once, and a failed close is reported; RunGroup returns after that
//     and after the last of g's errors was reported. It returns nil when ctx ended, and an error
//     wrapping sarama.ErrClosedConsumerGroup when g was closed elsewhere while ctx lasted, so the
//     caller can tell a consumer that stopped on its own from one that was stopped.
func RunGroup(ctx context.Context, g sarama.ConsumerGroup, topics []string, h sarama.ConsumerGroupHandler, report Report) error {
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range g.Errors() {
			report(ctx, "consumer group error", err)
		}
	}()
	err := consume(ctx, g, topics, h, report)
	if cerr := g.Close(); cerr != nil && !errors.Is(cerr, sarama.ErrClosedConsumerGroup) {
		report(ctx, "close the consumer group", cerr)
	}
	<-errsDone
	return err
}

// consume runs g's sessions one after another until ctx ends or g is closed.
func consume(ctx context.Context, g sarama.ConsumerGroup, topics []string, h sarama.ConsumerGroupHandler, report Report) error {
	for ctx.Err() == nil {
		err := g.Consume(ctx, topics, h)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return fmt.Errorf("kafka: consumer group of %v closed: %w", topics, err)
		}
		if err != nil {
			report(ctx, "consumer group session failed; joining again", err)
			select {
			case <-ctx.Done():
			case <-time.After(rejoinPause):
			}
		}
	}
	return nil
}
