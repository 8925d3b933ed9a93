package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

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
	root.AddCommand(newServeCmd(), newMigrateCmd(), newTenantCmd(), newTokenCmd(), newReplayCmd(), newRetentionCmd(),
		newExportCmd(), newRepublishCmd(), newSchemaCmd(), newDeadLetterCmd(), newAdminCmd(), newBenchCmd(), newVersionCmd())
	for _, c := range root.Commands() {
		requireSubcommand(c)
	}
	return root
}

// requireSubcommand makes cmd and every command below it that only groups subcommands fail
// when run without a known subcommand, naming what was given, instead of printing help and
// exiting 0 (cobra's default for a command without Run), so a mistyped subcommand in a script
// is not taken for success.
func requireSubcommand(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		requireSubcommand(c)
	}
	if !cmd.HasSubCommands() || cmd.Run != nil || cmd.RunE != nil {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q for %q; its commands: %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
		}
		return fmt.Errorf("%q needs a command: %s (see %s --help)", cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())
	}
}

// loadConfig reads the configuration for cmd from its flags and the process environment.
func loadConfig(cmd *cobra.Command) (config.Config, error) {
	return config.Load(config.Sources{Flags: cmd.Flags(), Environ: os.Environ()})
}

// loadConfigAndLogger reads cmd's configuration and builds the logger of a command that runs
// (part of) a node, writing to cmd's stderr.
func loadConfigAndLogger(cmd *cobra.Command) (config.Config, *slog.Logger, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return cfg, nil, err
	}
	log, err := newLogger(cmd.ErrOrStderr(), cfg)
	return cfg, log, err
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
