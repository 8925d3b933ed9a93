package main

import "github.com/spf13/cobra"

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running configuration's throughput and latency",
		Long: "bench measures the configured services from inside this process: the send path and the\n" +
			"relay (write), the WebSocket gateway of an in-process or running node (ws), the admin\n" +
			"command consumer through Kafka (admin), the messages-mysql projection, live and rebuilt\n" +
			"(projection), and the analysts' export and republish of a tenant's history (export, republish).",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchWriteCmd(), newBenchWSCmd(), newBenchProjectionCmd(), newBenchAdminCmd(), newBenchExportCmd(), newBenchRepublishCmd(), newBenchPushCmd())
	return cmd
}
