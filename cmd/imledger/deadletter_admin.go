package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/internal/kafka"
)

// openAdminFailures opens the event store's pool and the admin command failures over it.
func openAdminFailures(cmd *cobra.Command) (*node, *admin.Failures, error) {
	n, err := toolNode(cmd)
	if err != nil {
		return nil, nil, err
	}
	if err := n.openPostgres(cmd.Context()); err != nil {
		n.closeResources()
		return nil, nil, err
	}
	return n, admin.NewFailures(n.pool, nil, "", nil), nil
}

func listAdminFailures(cmd *cobra.Command, f admin.FailureFilter) error {
	n, failures, err := openAdminFailures(cmd)
	if err != nil {
		return err
	}
	defer n.closeResources()
	list, err := failures.List(cmd.Context(), f)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATUS\tTENANT\tCOMMAND\tEVENT ID\tATTEMPTS\tREPLAYED AS\tCREATED\tERROR")
	for _, fl := range list {
		replayed := "-"
		if fl.ReplayedEventID != nil {
			replayed = fl.ReplayedEventID.String()
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", fl.ID, fl.Status, fl.TenantID, fl.CommandType, fl.EventID,
			fl.Attempts, replayed, fl.CreatedAt.UTC().Format(time.RFC3339), oneLine(fl.Error, 120))
	}
	return w.Flush()
}

// resolveAdminFailure replays (and waits for the new command's result) or skips failure id. A
// replay is a new command by the operator, signed with the tools' signing key.
func resolveAdminFailure(cmd *cobra.Command, id int64, replay bool, timeout time.Duration, keys adminKeyFlags) error {
	n, failures, err := openAdminFailures(cmd)
	if err != nil {
		return err
	}
	defer n.closeResources()
	out := cmd.OutOrStdout()
	if !replay {
		if err := failures.Skip(cmd.Context(), id); err != nil {
			return fmt.Errorf("admin command failure %d: %w", id, err)
		}
		_, err := fmt.Fprintf(out, "admin command failure %d: skipped\n", id)
		return err
	}
	signer, err := adminSigner(n.cfg, keys)
	if err != nil {
		return err
	}
	client, err := newAdminClient(cmd, "imledger-cli", keys)
	if err != nil {
		return err
	}
	defer client.Close()
	kcfg := n.cfg.Kafka.ClientOfServe()
	producer, err := kafka.NewSyncProducer(kcfg)
	if err != nil {
		return err
	}
	defer producer.Close()
	newID, err := uuid.NewV7()
	if err != nil {
		return err
	}
	pending := client.Expect(newID)
	replayer := admin.NewFailures(n.pool, saramaPublisher{producer}, kcfg.Topic(kafka.TopicAdminCommand), signer)
	sent, err := replayer.Replay(cmd.Context(), id, newID)
	if err != nil {
		pending.Cancel()
		return fmt.Errorf("admin command failure %d: %w", id, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "replayed failure %d as %s %s (event_id %s, parent_event_id %s), waiting for its result\n",
		id, sent.EventType, sent.TenantID, sent.EventID, sent.ParentEventID)
	ctx, cancel := contextWithTimeout(cmd, timeout)
	defer cancel()
	res, err := pending.Await(ctx)
	if err != nil {
		return err
	}
	return printResult(out, res)
}
