package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/config"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running configuration's throughput and latency",
		Long: "bench measures the configured services from inside this process: the send path and the\n" +
			"relay (write), the WebSocket gateway of an in-process or running node (ws), the admin\n" +
			"command consumer through Kafka (admin), the messages-mysql projection, live and rebuilt\n" +
			"(projection), the analysts' export and republish of a tenant's history (export, republish), and\n" +
			"user search by prefix in the business read model (search).",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchWriteCmd(), newBenchWSCmd(), newBenchProjectionCmd(), newBenchAdminCmd(), newBenchExportCmd(), newBenchRepublishCmd(), newBenchPushCmd(), newBenchSearchCmd())
	return cmd
}

// scratchBroker points cfg's embedded broker at a free port and, unless kafka.embedded.data_dir
// names a place, at a temporary directory: a benchmark's records stay out of the node's state
// directory (where nothing would ever read them) and are removed by the returned function.
func scratchBroker(cfg *config.Config) (remove func(), err error) {
	cfg.Kafka.Embedded.Addr = "127.0.0.1:0"
	if cfg.Kafka.Embedded.DataDir != "" {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "imledger-bench-kafka-")
	if err != nil {
		return nil, fmt.Errorf("bench: a directory for the embedded broker: %w", err)
	}
	cfg.Kafka.Embedded.DataDir = dir
	return func() { _ = os.RemoveAll(dir) }, nil
}
