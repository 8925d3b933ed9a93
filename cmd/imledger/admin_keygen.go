package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/domain/admintrust"
)

func newAdminKeygenCmd() *cobra.Command {
	var (
		id, actor, scope string
		hmac, secrets    bool
	)
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Print a new admin producer key pair, or a new command-secrets key pair",
		Long: "admin keygen prints a new key in its two halves, as lines for an environment file (the same\n" +
			"specs go in YAML as strings):\n\n" +
			"  a producer key (default Ed25519): IM_ADMIN_SIGNING_KEY, the private half, for the producer\n" +
			"  (admin send, adminclient, deadletter replay --admin), and IM_ADMIN_PRODUCER_KEYS, the public\n" +
			"  half, for every node's admin.producer_keys (add it to the keys there, comma-separated, to\n" +
			"  rotate). The key acts as --actor for --scope (* is every tenant and the tenant.* commands).\n" +
			"  With --hmac it is an HMAC-SHA-256 secret that both halves hold: keep both secret.\n\n" +
			"  --secrets: a command-secrets key, IM_ADMIN_COMMAND_SECRET_KEYS, the private half, for every\n" +
			"  node (first in the list: the one producers seal to), and IM_ADMIN_SEAL_KEY, the public half,\n" +
			"  for producers.\n\n" +
			"Nothing is stored: the private halves are printed once.",
		Example: "  imledger admin keygen --id ops-2026 --actor admin/ops-7 --scope '*' >> producer.env\n" +
			"  imledger admin keygen --secrets --id cs-2026",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if secrets {
				if id == "" {
					id = "cs-" + time.Now().UTC().Format("20060102")
				}
				g, err := admintrust.GenerateSecretsKey(id)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "# command-secrets key %s (x25519)\n"+
					"# every node: admin.command_secret_keys (private: keep it secret)\n"+
					"IM_ADMIN_COMMAND_SECRET_KEYS='%s'\n"+
					"# producers: admin.seal_key (public)\n"+
					"IM_ADMIN_SEAL_KEY='%s'\n", id, g.Open, g.Seal)
				return err
			}
			who, err := admintrust.ParseActor(actor)
			if err != nil {
				return fmt.Errorf("--actor: %w", err)
			}
			if id == "" {
				id = who.ID + "-" + time.Now().UTC().Format("20060102")
			}
			alg := admintrust.AlgEd25519
			public := "public"
			if hmac {
				alg, public = admintrust.AlgHMACSHA256, "holds the shared secret: keep it secret too"
			}
			g, err := admintrust.GenerateProducerKey(alg, id, scope, who)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "# producer key %s (%s) acting as %s/%s, scope %s\n"+
				"# the producer: admin.signing_key (private: keep it secret)\n"+
				"IM_ADMIN_SIGNING_KEY='%s'\n"+
				"# every node: add to admin.producer_keys (%s)\n"+
				"IM_ADMIN_PRODUCER_KEYS='%s'\n", id, alg, who.Type, who.ID, scope, g.Signer, public, g.Producer)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "key id (default: the actor's id and today's date, or cs-<date> with --secrets)")
	f.StringVar(&actor, "actor", "admin/ops", "identity the key's commands act as: admin/<id> or system/<id>")
	f.StringVar(&scope, "scope", admintrust.PlatformScope, "* (every tenant and the platform commands) or one tenant id")
	f.BoolVar(&hmac, "hmac", false, "an HMAC-SHA-256 shared secret instead of an Ed25519 key pair")
	f.BoolVar(&secrets, "secrets", false, "a command-secrets key pair (X25519) instead of a producer key")
	return cmd
}
