package main

import "github.com/spf13/cobra"

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running configuration's throughput and latency",
		Long: "bench runs load against the configured PostgreSQL, Redis and Kafka (the embedded broker\n" +
			"when none is configured) from inside this process, without HTTP.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchWriteCmd())
	return cmd
}
