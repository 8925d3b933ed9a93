package main

import (
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run an imledger node",
		Long: "serve runs a whole imledger node: it migrates the event store, starts the embedded Kafka\n" +
			"broker when no brokers are configured, creates the Kafka topics, provisions the demo tenant,\n" +
			"runs the relay and the projectors, and serves the REST API, the WebSocket gateway, the chat\n" +
			"page and the ops endpoints until SIGINT or SIGTERM, then shuts down gracefully within\n" +
			"shutdown_timeout. Nodes sharing PostgreSQL, MySQL, Redis and Kafka form a cluster; give each\n" +
			"its own node_id and all of them the same auth.keys.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := loadConfigAndLogger(cmd)
			if err != nil {
				return err
			}
			if cfg.HTTP.PprofAddr != "" {
				stop, err := servePprof(cfg.HTTP.PprofAddr, log)
				if err != nil {
					return err
				}
				defer stop()
			}
			ctx := cmd.Context()
			n, err := startNode(ctx, cfg, log)
			if err != nil {
				return err
			}
			n.announce(cmd.OutOrStdout())
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
