package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/transport/kafka/adminclient"
)

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Send commands of the admin plane over Kafka",
		Long: "Admin systems change tenants, users, groups and messages by producing commands on\n" +
			"im.admin.command, signed with a producer key; serve verifies them and answers on\n" +
			"im.admin.command.result. `admin send` does both ends for one command; admin systems written\n" +
			"in Go can import transport/kafka/adminclient to do the same. `admin keygen` makes the keys.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAdminSendCmd(), newAdminKeygenCmd())
	return cmd
}

func newAdminSendCmd() *cobra.Command {
	var (
		typ, tenantID, payload, source string
		keys                           adminKeyFlags
		timeout                        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Produce one admin command and wait for its result",
		Long: "admin send produces one command (a new event_id) of --type for --tenant with --payload on\n" +
			"im.admin.command and waits up to --timeout for its result, which it prints as JSON. It exits\n" +
			"with an error unless the command succeeded. The record is signed with admin.signing_key\n" +
			"(--signing-key; required with kafka.brokers) and the secret fields of the payload (a\n" +
			"password) are sealed to admin.seal_key (--seal-key; default the public half of the first\n" +
			"admin.command_secret_keys). Types: " + adminTypes() + ".",
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
			c, err := newAdminClient(cmd, source, keys)
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
	f.StringVar(&source, "source", "imledger-cli", "source_service of the command")
	keys.register(f, true)
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the result")
	_ = cmd.MarkFlagRequired("type")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

// adminKeyFlags are the flags of the tools that send admin commands.
type adminKeyFlags struct {
	actor, signingKey, sealKey string
}

func (k *adminKeyFlags) register(f *pflag.FlagSet, actor bool) {
	if actor {
		f.StringVar(&k.actor, "actor", "", "administrator id recorded as the actor of the events (default: the signing key's identity, else cli)")
	}
	f.StringVar(&k.signingKey, "signing-key", "", "signing key spec, or @FILE holding it (default admin.signing_key; prefer IM_ADMIN_SIGNING_KEY or a file: a flag shows in the process list)")
	if actor {
		f.StringVar(&k.sealKey, "seal-key", "", "the nodes' public command-secrets key spec, or @FILE (default admin.seal_key)")
	}
}

// spec reads a key flag: the spec itself, or @FILE for the spec in a file.
func spec(v string) (string, error) {
	path, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read key file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// adminSigner is the signing key of the tools: the flag's, else admin.signing_key. With
// kafka.brokers one is required: the nodes refuse unsigned commands.
func adminSigner(cfg config.Config, k adminKeyFlags) (*admintrust.Signer, error) {
	flag, err := spec(k.signingKey)
	if err != nil {
		return nil, fmt.Errorf("--signing-key: %w", err)
	}
	s, err := cfg.AdminSigner(flag)
	if err != nil {
		return nil, err
	}
	if s == nil && !cfg.Kafka.UseEmbedded() {
		return nil, errors.New("a signing key is required with kafka.brokers (the nodes refuse unsigned admin commands): " +
			"set admin.signing_key (IM_ADMIN_SIGNING_KEY) or --signing-key; `imledger admin keygen` makes one")
	}
	return s, nil
}

// newAdminClient connects an admin client to the configured Kafka (with no kafka.brokers, to the
// embedded broker a local serve runs on kafka.embedded.addr), signing with the tools' signing key
// and sealing secrets to the nodes' seal key.
func newAdminClient(cmd *cobra.Command, source string, k adminKeyFlags) (*adminclient.Client, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	signer, err := adminSigner(cfg, k)
	if err != nil {
		return nil, err
	}
	sealFlag, err := spec(k.sealKey)
	if err != nil {
		return nil, fmt.Errorf("--seal-key: %w", err)
	}
	seal, err := cfg.AdminSealKey(sealFlag)
	if err != nil {
		return nil, err
	}
	actor := domain.Actor{}
	if k.actor != "" {
		actor = domain.Actor{Type: domain.ActorAdmin, ID: k.actor}
	} else if signer == nil {
		actor = domain.Actor{Type: domain.ActorAdmin, ID: "cli"}
	}
	kcfg := cfg.Kafka.ClientOfServe()
	c, err := adminclient.New(adminclient.Config{Kafka: kcfg, Source: source, Actor: actor, Signer: signer, SealKey: seal})
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
