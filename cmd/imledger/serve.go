package main

import (
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run an imledger node",
		Long: "serve migrates the event store, starts the embedded Kafka broker when no brokers are\n" +
			"configured, creates the Kafka topics and serves HTTP until SIGINT or SIGTERM, then shuts\n" +
			"down gracefully within shutdown_timeout.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			n, err := startNode(ctx, cfg, log)
			if err != nil {
				return err
			}
			waitErr := n.wait(ctx)
			if waitErr != nil {
				log.Error("stopping after a failure", "err", waitErr)
			}
			if err := n.shutdown(); err != nil {
				return err
			}
			return waitErr
		},
	}
}
