package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/domain"
)

func newTenantCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Provision tenants",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTenantCreateCmd())
	return cmd
}

func newTenantCreateCmd() *cobra.Command {
	var noKey bool
	cmd := &cobra.Command{
		Use:   "create <tenant-id>",
		Short: "Create a tenant's MySQL read-model database and a tenant API key",
		Long: "tenant create provisions the tenant's MySQL database (mysql.database_template) and applies the\n" +
			"read-model migrations to it, then creates a tenant API key and prints it. The key is shown\n" +
			"this once: only its SHA-256 is stored. Running it again for an existing tenant is safe and\n" +
			"prints another key. A tenant id is 1-32 of [a-z0-9_], starting with a letter or digit.\n" +
			"Events of a tenant without a database are dead-lettered by the projectors.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tenant, err := domain.NewTenantID(args[0])
			if err != nil {
				return fmt.Errorf("tenant id %q: %w", args[0], err)
			}
			n, err := toolNode(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			if err := n.openRouter(); err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := n.router.Provision(ctx, tenant); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "tenant: %s\ndatabase: %s\n", tenant, n.router.DatabaseName(tenant))
			if noKey {
				return nil
			}
			if err := n.openPostgres(ctx); err != nil {
				return err
			}
			if err := n.newAccounts(); err != nil {
				return err
			}
			key, err := n.accounts.CreateAPIKey(ctx, tenant)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "api_key: %s\n", key)
			fmt.Fprintln(cmd.ErrOrStderr(), "Keep the API key: it is shown this once (clients send it as X-IM-API-Key).")
			return nil
		},
	}
	cmd.Flags().BoolVar(&noKey, "no-api-key", false, "provision the database only")
	return cmd
}
