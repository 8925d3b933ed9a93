package main

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/spf13/cobra"

	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/replay/republish"
)

func newRepublishCmd() *cobra.Command {
	var (
		sel streamFlags
		cfg republish.Config
	)
	cmd := &cobra.Command{
		Use:   "republish",
		Short: "Re-emit events from the event store to a replay topic on Kafka",
		Long: "republish sends the events of --tenant (or every tenant), or a --from-cursor/--to-cursor\n" +
			"range, from the PostgreSQL event store to --topic (default im.replay.<tenant> with the\n" +
			"configured topic prefix), created if missing, with the envelope, key and headers the live\n" +
			"topics carry, so a stream job can start again from the beginning after Kafka's retention\n" +
			"dropped the original records. Events go in commit order, a conversation in order on one\n" +
			"partition; --rate caps the events per second. With --checkpoint the cursor of every\n" +
			"acknowledged batch is saved to that file and a new run resumes from it. It refuses to write\n" +
			"to the platform's own topics. A progress bar goes to stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sel.parse(); err != nil {
				return err
			}
			n, err := toolNode(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			if n.cfg.Kafka.UseEmbedded() {
				return errNoKafka
			}
			kcfg := n.cfg.Kafka.Config
			if cfg.Topic == "" {
				cfg.Topic = kcfg.Topic(republish.DefaultTopic(sel.parsedTenant))
			}
			cfg.LiveTopics, cfg.Tenant, cfg.From, cfg.To = kcfg.LiveTopics(), sel.parsedTenant, sel.parsedFrom, sel.toCu
			cfg.Progress = cmd.ErrOrStderr()
			if err := cfg.Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			n.bulkReads = true
			if err := n.openPostgres(ctx); err != nil {
				return err
			}
			if err := kafka.EnsureTopic(ctx, kcfg, cfg.Topic); err != nil {
				return err
			}
			p, err := newRepublishProducer(kcfg)
			if err != nil {
				return err
			}
			defer func() { _ = p.Close() }()
			cfg.Logger = n.log
			res, err := republish.RunAsync(ctx, n.store, p, cfg)
			out := cmd.OutOrStdout()
			if err != nil {
				if res.Events > 0 {
					fmt.Fprintf(out, "republished %d events to %s before the error; resume after cursor %s\n", res.Events, cfg.Topic, res.Cursor)
				}
				return err
			}
			fmt.Fprintf(out, "republished %d events to %s in %s (%.0f events/s)\ncursor: %s\n", res.Events, cfg.Topic,
				res.Duration.Round(time.Millisecond), res.PerSecond(), res.Cursor)
			return nil
		},
	}
	sel.register(cmd)
	f := cmd.Flags()
	f.StringVar(&cfg.Topic, "topic", "", "target topic, a full name (default <topic_prefix>im.replay.<tenant>, or im.replay.all)")
	f.StringVar(&cfg.Checkpoint, "checkpoint", "", "file that keeps the cursor of the last acknowledged batch; a run resumes from it")
	f.IntVar(&cfg.Rate, "rate", 0, "events per second at most (default: as fast as Kafka acknowledges)")
	f.IntVar(&cfg.BatchSize, "batch", 0, "events per produce request (default 1000)")
	f.IntVar(&cfg.InFlight, "in-flight", 0, "batches sent and not yet acknowledged at once (default 16)")
	return cmd
}

// newRepublishProducer connects the asynchronous producer of a republish: the relay's safe
// configuration (idempotent, acks from all replicas, records of a partition in order), with
// produce requests filled up to 1 MiB or 5 ms of linger, since a republish sends in bulk.
func newRepublishProducer(kcfg kafka.Config) (sarama.AsyncProducer, error) {
	sc, err := kafka.NewProducerConfig(kcfg)
	if err != nil {
		return nil, err
	}
	if sc.Producer.Flush.Bytes == 0 && sc.Producer.Flush.Frequency == 0 && sc.Producer.Flush.Messages == 0 {
		sc.Producer.Flush.Bytes = 1 << 20
		sc.Producer.Flush.Frequency = 5 * time.Millisecond
	}
	sc.ChannelBufferSize = 4096
	p, err := sarama.NewAsyncProducer(kcfg.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("kafka: connect producer to %v: %w", kcfg.Brokers, err)
	}
	return p, nil
}
