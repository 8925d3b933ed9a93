package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/internal/telemetry"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "imledger",
		Short:         "imledger: a multi-tenant, event-sourced instant-messaging server",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	config.RegisterFlags(root.PersistentFlags())
	root.AddCommand(newServeCmd(), newMigrateCmd(), newTenantCmd(), newTokenCmd(), newReplayCmd(),
		newExportCmd(), newRepublishCmd(), newSchemaCmd(), newDeadLetterCmd(), newAdminCmd(), newBenchCmd(), newVersionCmd())
	return root
}

// loadConfig reads the configuration for cmd from its flags and the process environment.
func loadConfig(cmd *cobra.Command) (config.Config, error) {
	return config.Load(config.Sources{Flags: cmd.Flags(), Environ: os.Environ()})
}

// newLogger builds the process logger from cfg, writing to w, and warns about IM_* variables that
// name no configuration key.
func newLogger(w io.Writer, cfg config.Config) (*slog.Logger, error) {
	log, err := telemetry.NewLogger(w, cfg.Log.Level, cfg.Log.Format, cfg.NodeID)
	if err != nil {
		return nil, fmt.Errorf("logger: %w", err)
	}
	for _, name := range config.UnknownEnv(os.Environ()) {
		log.Warn("environment variable names no configuration key; ignored", "name", name)
	}
	return log, nil
}
