package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/kafka/adminclient"
)

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Send commands of the admin plane over Kafka",
		Long: "Admin systems change tenants, users, groups and messages by producing commands on\n" +
			"im.admin.command; serve consumes them and answers on im.admin.command.result. `admin send`\n" +
			"does both ends for one command; admin systems written in Go can import\n" +
			"transport/kafka/adminclient to do the same.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAdminSendCmd())
	return cmd
}

func newAdminSendCmd() *cobra.Command {
	var (
		typ, tenantID, payload, actor, source string
		timeout                               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Produce one admin command and wait for its result",
		Long: "admin send produces one command (a new event_id) of --type for --tenant with --payload on\n" +
			"im.admin.command and waits up to --timeout for its result, which it prints as JSON. It exits\n" +
			"with an error unless the command succeeded. Types: " + adminTypes() + ".",
		Example: `  imledger admin send --type user.ban --tenant demo --payload '{"user_id":"42","reason":"spam"}'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, ok := domain.LookupAdminCommand(domain.AdminCommandType(typ)); !ok {
				return fmt.Errorf("--type %q: not an admin command; one of %s", typ, adminTypes())
			}
			var p json.RawMessage
			if err := json.Unmarshal([]byte(payload), &p); err != nil {
				return fmt.Errorf("--payload: not JSON: %w", err)
			}
			c, err := newAdminClient(cmd, source, actor)
			if err != nil {
				return err
			}
			defer c.Close()
			command, err := c.NewCommand(tenantID, domain.AdminCommandType(typ), p)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "sent %s %s (event_id %s), waiting for its result\n", typ, tenantID, command.EventID)
			ctx, cancel := contextWithTimeout(cmd, timeout)
			defer cancel()
			res, err := c.Send(ctx, command)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "command type, e.g. user.ban (required)")
	f.StringVar(&tenantID, "tenant", "", "tenant the command is for (required)")
	f.StringVar(&payload, "payload", "{}", "the command's payload as JSON")
	f.StringVar(&actor, "actor", "cli", "administrator id recorded as the actor of the events")
	f.StringVar(&source, "source", "imledger-cli", "source_service of the command")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the result")
	_ = cmd.MarkFlagRequired("type")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

// newAdminClient connects an admin client to the configured Kafka; with no kafka.brokers, to the
// embedded broker a local serve runs on kafka.embedded.addr.
func newAdminClient(cmd *cobra.Command, source, actor string) (*adminclient.Client, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	kcfg := cfg.Kafka.ClientOfServe()
	c, err := adminclient.New(adminclient.Config{Kafka: kcfg, Source: source, Actor: domain.Actor{Type: domain.ActorAdmin, ID: actor}})
	if err != nil && cfg.Kafka.UseEmbedded() {
		return nil, fmt.Errorf("%w (no kafka.brokers configured: tried the embedded broker of a local serve at %s)", err, kcfg.Brokers[0])
	}
	return c, err
}

// printResult prints res as indented JSON and fails unless it succeeded.
func printResult(out io.Writer, res domain.AdminResult) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, string(b))
	if res.Status != domain.AdminSucceeded {
		if res.Reason != "" {
			return fmt.Errorf("command %s: %s", res.Status, res.Reason)
		}
		return fmt.Errorf("command %s", res.Status)
	}
	return nil
}

func adminTypes() string {
	var names []string
	for _, i := range domain.AdminCommands() {
		names = append(names, string(i.Type))
	}
	return strings.Join(names, ", ")
}

// contextWithTimeout is the command's context bounded by d.
func contextWithTimeout(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), d)
}
