package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/auth"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue access tokens",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTokenIssueCmd())
	return cmd
}

func newTokenIssueCmd() *cobra.Command {
	var (
		tenant, user string
		ttl          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "issue",
		Short: "Print a signed access token for a user",
		Long: "token issue signs a bearer token for --user of --tenant with the configured signing key\n" +
			"(auth.keys, auth.signing_key_id), valid for --ttl (default auth.token_ttl), and prints it.\n" +
			"Servers accept it when they share the key. The tenant must be provisioned and active and the\n" +
			"user not banned; the user need not have registered: the token is the operator's word. For\n" +
			"tools, tests and service accounts; people log in.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := domain.NewTenantID(tenant)
			if err != nil {
				return fmt.Errorf("--tenant: %w", err)
			}
			u, err := domain.ParseUserID(user)
			if err != nil {
				return fmt.Errorf("--user: %w", err)
			}
			n, err := toolNode(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			cfg := n.cfg
			if len(cfg.Auth.Keys) == 0 {
				return errors.New("auth.keys is empty: configure the keys the servers verify tokens with")
			}
			if ttl == 0 {
				ttl = cfg.Auth.TokenTTL
			}
			signer, err := auth.NewSigner(cfg.Auth.Signer())
			if err != nil {
				return err
			}
			if err := n.checkTokenSubject(cmd.Context(), t, u); err != nil {
				return err
			}
			token, err := signer.Issue(t, u, ttl)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant of the token (required)")
	f.StringVar(&user, "user", "", "user id, 42 or usr42 (required)")
	f.DurationVar(&ttl, "ttl", 0, "lifetime (default auth.token_ttl; at most auth.max_ttl)")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("user")
	return cmd
}

// checkTokenSubject refuses to sign for a tenant the registry does not hold or has suspended, or
// for a banned user.
func (n *node) checkTokenSubject(ctx context.Context, t domain.TenantID, u domain.UserID) error {
	if err := n.openPostgres(ctx); err != nil {
		return err
	}
	if err := n.openRegistry(nil); err != nil {
		return err
	}
	info, err := n.registry.Get(ctx, t)
	if err == nil {
		err = info.Check()
	}
	if err != nil {
		return fmt.Errorf("tenant %s: %w", t, err)
	}
	guard, err := account.NewGuard(n.pool, account.GuardConfig{}, nil)
	if err != nil {
		return err
	}
	if err := guard.Load(ctx); err != nil {
		return err
	}
	if err := guard.Check(t, u, time.Time{}); err != nil {
		return fmt.Errorf("user %s of tenant %s: %w", u, t, err)
	}
	return nil
}
