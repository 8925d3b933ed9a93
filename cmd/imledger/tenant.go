package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
)

func newTenantCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Provision, list, show, suspend and resume tenants and manage their API keys",
		Long: "Tenants live in the registry in PostgreSQL; only provisioned tenants are served. Changes made\n" +
			"here are events with the system actor, and running nodes hear of them at once (over Redis\n" +
			"when it is reachable, and through im.config.event) or at their next refresh.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTenantCreateCmd(), newTenantListCmd(), newTenantShowCmd(), newTenantStatusCmd(true),
		newTenantStatusCmd(false), newTenantKeyCmd())
	return cmd
}

func tenantArg(s string) (domain.TenantID, error) {
	t, err := domain.NewTenantID(s)
	if err != nil {
		return domain.TenantID{}, fmt.Errorf("tenant id %q: %w", s, err)
	}
	return t, nil
}

func newTenantCreateCmd() *cobra.Command {
	var (
		noKey    bool
		settings string
	)
	cmd := &cobra.Command{
		Use:   "create <tenant-id>",
		Short: "Provision a tenant: its MySQL read-model database, its registry entry and an API key",
		Long: "tenant create provisions the tenant's MySQL database (mysql.database_template) and applies the\n" +
			"read-model migrations to it, records the tenant in the registry (tenant.provisioned.v1), then\n" +
			"creates a tenant API key and prints it. The key is shown this once: only its SHA-256 is stored.\n" +
			"Running it again for an existing tenant is safe and prints another key. A tenant id is 1-32 of\n" +
			"[a-z0-9_], starting with a letter or digit. --settings takes the JSON object of tenant.config_set.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tenantArg(args[0])
			if err != nil {
				return err
			}
			var changes map[string]json.RawMessage
			if settings != "" {
				if err := json.Unmarshal([]byte(settings), &changes); err != nil {
					return fmt.Errorf("--settings: %w", err)
				}
			}
			n, err := openTenantTools(cmd, true)
			if err != nil {
				return err
			}
			defer n.closeResources()
			ctx := cmd.Context()
			res, err := n.registry.Provision(ctx, t, changes, tenant.Meta{})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "tenant: %s\nstatus: %s\ndatabase: %s\n", t, res.Info.Status, n.router.DatabaseName(t))
			if noKey {
				return nil
			}
			key, err := n.accounts.CreateAPIKey(ctx, t)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "api_key: %s\n", key)
			fmt.Fprintln(cmd.ErrOrStderr(), "Keep the API key: it is shown this once (clients send it as X-IM-API-Key).")
			return nil
		},
	}
	cmd.Flags().BoolVar(&noKey, "no-api-key", false, "provision the tenant only")
	cmd.Flags().StringVar(&settings, "settings", "", `initial settings, e.g. '{"max_content_bytes":4096}'`)
	return cmd
}

func newTenantListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the tenants of the registry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := openTenantTools(cmd, false)
			if err != nil {
				return err
			}
			defer n.closeResources()
			all, err := n.registry.List(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TENANT\tSTATUS\tVERSION\tCREATED\tUPDATED\tSETTINGS")
			for _, i := range all {
				s, _ := json.Marshal(i.Settings)
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", i.Tenant, i.Status, i.Version, i.CreatedAt.Format(time.RFC3339),
					i.UpdatedAt.Format(time.RFC3339), s)
			}
			return w.Flush()
		},
	}
}

func newTenantShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show <tenant-id>",
		Short: "Show a tenant: status, settings as set and as every node applies them, API keys",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tenantArg(args[0])
			if err != nil {
				return err
			}
			n, err := openTenantTools(cmd, false)
			if err != nil {
				return err
			}
			defer n.closeResources()
			info, err := n.registry.Get(cmd.Context(), t)
			if err != nil {
				return err
			}
			keys, err := n.accounts.ListAPIKeys(cmd.Context(), t)
			if err != nil {
				return err
			}
			return printTenant(cmd.OutOrStdout(), info, n.cfg.Send.MaxContentBytes, len(keys))
		},
	}
}

func printTenant(out io.Writer, i tenant.Info, nodeLimit, keys int) error {
	set, _ := json.Marshal(i.Settings)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "tenant:\t%s\n", i.Tenant)
	fmt.Fprintf(w, "status:\t%s\n", i.Status)
	fmt.Fprintf(w, "version:\t%d\n", i.Version)
	fmt.Fprintf(w, "created_at:\t%s\n", i.CreatedAt.Format(time.RFC3339Nano))
	fmt.Fprintf(w, "updated_at:\t%s\n", i.UpdatedAt.Format(time.RFC3339Nano))
	if !i.NotBefore.IsZero() {
		fmt.Fprintf(w, "tokens_not_before:\t%s\n", i.NotBefore.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "settings:\t%s\n", set)
	fmt.Fprintf(w, "registration_open:\t%t\n", i.Settings.Registration())
	fmt.Fprintf(w, "max_content_bytes:\t%d\n", i.Settings.ContentLimit(nodeLimit))
	fmt.Fprintf(w, "api_keys:\t%d\n", keys)
	return w.Flush()
}

// newTenantStatusCmd is `tenant suspend <id>` (suspend true) or `tenant resume <id>`.
func newTenantStatusCmd(suspend bool) *cobra.Command {
	var reason string
	use, short := "resume <tenant-id>", "Resume a suspended tenant"
	if suspend {
		use, short = "suspend <tenant-id>", "Suspend a tenant: refuse it everywhere and end its sessions"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tenantArg(args[0])
			if err != nil {
				return err
			}
			n, err := openTenantTools(cmd, false)
			if err != nil {
				return err
			}
			defer n.closeResources()
			var res tenant.Result
			if suspend {
				res, err = n.registry.Suspend(cmd.Context(), t, reason, tenant.Meta{})
			} else {
				res, err = n.registry.Resume(cmd.Context(), t, tenant.Meta{})
			}
			if err != nil {
				return err
			}
			note := ""
			if res.Unchanged {
				note = " (unchanged)"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "tenant %s: %s%s\n", t, res.Info.Status, note)
			return err
		},
	}
	if suspend {
		cmd.Flags().StringVar(&reason, "reason", "", "recorded in tenant.suspended.v1")
	}
	return cmd
}

func newTenantKeyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "List or revoke a tenant's API keys", Args: cobra.NoArgs}
	list := &cobra.Command{
		Use:   "list <tenant-id>",
		Short: "List a tenant's API keys by id (the first 12 hex digits of their SHA-256)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tenantArg(args[0])
			if err != nil {
				return err
			}
			n, err := openTenantTools(cmd, false)
			if err != nil {
				return err
			}
			defer n.closeResources()
			keys, err := n.accounts.ListAPIKeys(cmd.Context(), t)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY ID\tCREATED\tREVOKED")
			for _, k := range keys {
				revoked := "-"
				if !k.RevokedAt.IsZero() {
					revoked = k.RevokedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", k.ID, k.CreatedAt.Format(time.RFC3339), revoked)
			}
			return w.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke <tenant-id> <key-id>",
		Short: "Revoke a tenant's API key by its id (nodes that cached it accept it for up to account.api_key_cache_ttl)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tenantArg(args[0])
			if err != nil {
				return err
			}
			n, err := openTenantTools(cmd, false)
			if err != nil {
				return err
			}
			defer n.closeResources()
			if err := n.accounts.RevokeAPIKeyID(cmd.Context(), t, strings.ToLower(args[1])); err != nil {
				return fmt.Errorf("revoke key %s of tenant %s: %w", args[1], t, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "key %s of tenant %s revoked\n", args[1], t)
			return err
		},
	}
	cmd.AddCommand(list, revoke)
	return cmd
}
