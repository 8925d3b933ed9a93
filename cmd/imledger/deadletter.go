package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/projections"
)

func newDeadLetterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deadletter",
		Short: "List, replay or skip the events the projectors and the admin commands gave up on",
		Long: "An event a projection cannot apply (after its retries, or at once when it can never apply)\n" +
			"becomes a dead letter in PostgreSQL, and the later events of its conversation are parked\n" +
			"behind it so they are never applied out of order. Fix the cause, then replay the dead\n" +
			"letter (apply it again, then the parked events) or skip it (drop it, apply the parked\n" +
			"events). Both write to the read models directly, whether or not serve is running.\n\n" +
			"With --admin the commands are about admin commands that kept failing (answered failed and\n" +
			"kept in admin_command_failures, redacted): replay sends one again on im.admin.command as a\n" +
			"new command by the operator (new event_id, parent_event_id the original's, signed with\n" +
			"admin.signing_key or --signing-key) and waits for its result. A command with secret fields\n" +
			"(user.reset_password) is refused: its secret was redacted; send it again with admin send.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDeadLetterListCmd(), newDeadLetterResolveCmd(true), newDeadLetterResolveCmd(false))
	return cmd
}

// openDeadLetters opens the read models and the dead letters of serve's projections.
func openDeadLetters(cmd *cobra.Command) (*node, *projections.DeadLetters, error) {
	n, err := toolNode(cmd)
	if err != nil {
		return nil, nil, err
	}
	if err := n.openReadTools(cmd.Context()); err != nil {
		n.closeResources()
		return nil, nil, err
	}
	d := projections.NewDeadLetters(n.pool, n.cfg.Projections.Parking, n.log, n.readProjections()...)
	return n, d, nil
}

func newDeadLetterListCmd() *cobra.Command {
	var (
		f        projections.ListFilter
		adminCmd bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch f.Status {
			case projections.StatusOpen, projections.StatusReplayed, projections.StatusSkipped:
			case "all":
				f.Status = ""
			default:
				return fmt.Errorf("--status %q: want open, replayed, skipped or all", f.Status)
			}
			if f.Limit < 1 {
				return fmt.Errorf("--limit %d: want a positive number", f.Limit)
			}
			if adminCmd && f.ConsumerGroup != "" {
				return fmt.Errorf("--group %q: admin command failures are not listed by consumer group; leave --group out with --admin", f.ConsumerGroup)
			}
			if adminCmd {
				return listAdminFailures(cmd, admin.FailureFilter{Status: f.Status, TenantID: f.TenantID, Limit: f.Limit})
			}
			n, d, err := openDeadLetters(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			list, err := d.ListDeadLetters(cmd.Context(), f)
			if err != nil {
				return err
			}
			return printDeadLetters(cmd.OutOrStdout(), list)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Status, "status", projections.StatusOpen, "open, replayed, skipped or all")
	fl.StringVar(&f.ConsumerGroup, "group", "", "only this consumer group")
	fl.StringVar(&f.TenantID, "tenant", "", "only this tenant")
	fl.IntVar(&f.Limit, "limit", 100, "at most this many")
	fl.BoolVar(&adminCmd, "admin", false, "list the admin commands that failed instead")
	return cmd
}

func printDeadLetters(out io.Writer, list []projections.DeadLetter) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATUS\tGROUP\tTENANT\tCONVERSATION\tEVENT TYPE\tEVENT ID\tREASON\tPARKED\tCREATED\tERROR")
	for _, dl := range list {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", dl.ID, dl.Status, dl.ConsumerGroup, dl.TenantID,
			dl.ConversationKey, dl.EventType, dl.EventID, dl.Reason, dl.Parked, dl.CreatedAt.UTC().Format(time.RFC3339),
			oneLine(dl.Error, 120))
	}
	return w.Flush()
}

// oneLine shortens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// newDeadLetterResolveCmd is `deadletter replay <id>` (replay true) or `deadletter skip <id>`.
func newDeadLetterResolveCmd(replay bool) *cobra.Command {
	var (
		adminCmd bool
		timeout  time.Duration
		keys     adminKeyFlags
	)
	use, short := "skip <id>", "Drop a dead letter and apply the events parked behind it"
	if replay {
		use, short = "replay <id>", "Apply a dead letter again, then the events parked behind it"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return fmt.Errorf("dead letter id %q: want a positive number from `deadletter list`", args[0])
			}
			if adminCmd {
				return resolveAdminFailure(cmd, id, replay, timeout, keys)
			}
			n, d, err := openDeadLetters(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			resolve := d.SkipDeadLetter
			if replay {
				resolve = d.ReplayDeadLetter
			}
			res, err := resolve(cmd.Context(), id)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "dead letter %d: %s; %d parked events applied\n", id, res.DeadLetter.Status, res.Drained)
			if r := res.Reparked; r != nil {
				fmt.Fprintf(out, "a parked event failed: new dead letter %d (%s: %s); later events stay parked behind it\n",
					r.ID, r.Reason, oneLine(r.Error, 200))
			}
			return nil
		},
	}
	what := "skip an admin command failure (from `deadletter list --admin`) instead"
	if replay {
		what = "send an admin command failure (from `deadletter list --admin`) again as a new command, signed with admin.signing_key, and wait for its result"
		cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "with --admin: how long to wait for the result")
		keys.register(cmd.Flags(), false)
	}
	cmd.Flags().BoolVar(&adminCmd, "admin", false, what)
	return cmd
}
