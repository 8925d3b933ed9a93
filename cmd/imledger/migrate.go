package main

import (
	"github.com/spf13/cobra"
)

func newMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create the PostgreSQL database if missing and apply the event store migrations",
		Long: "migrate connects to the server of postgres.url, creates the database the URL names when it\n" +
			"does not exist (through the \"postgres\" maintenance database) and applies every pending event\n" +
			"store migration. Running it again is a no-op; several processes may run it at once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := loadConfigAndLogger(cmd)
			if err != nil {
				return err
			}
			return migratePostgres(cmd.Context(), cfg.Postgres, log)
		},
	}
}
