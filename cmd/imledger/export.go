package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/replay/export"
)

// streamFlags are the selection flags export and republish share.
type streamFlags struct {
	tenant           string
	fromCursor       string
	toCursor         string
	parsedTenant     domain.TenantID
	parsedFrom, toCu eventstore.Cursor
}

func (f *streamFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.tenant, "tenant", "", "only this tenant's events (default: every tenant)")
	fl.StringVar(&f.fromCursor, "from-cursor", "", "resume after this cursor (<tx_id>:<position>, or a file holding one)")
	fl.StringVar(&f.toCursor, "to-cursor", "", "stop after this cursor (inclusive; default: everything committed)")
}

// parse validates the shared flags.
func (f *streamFlags) parse() error {
	if f.tenant != "" {
		t, err := domain.NewTenantID(f.tenant)
		if err != nil {
			return fmt.Errorf("--tenant: %w", err)
		}
		f.parsedTenant = t
	}
	var err error
	if f.parsedFrom, err = cursorFlag("--from-cursor", f.fromCursor); err != nil {
		return err
	}
	if f.toCu, err = cursorFlag("--to-cursor", f.toCursor); err != nil {
		return err
	}
	if f.toCursor != "" && f.toCu.IsZero() {
		// The zero cursor is before every event: as an end it selects nothing (and the
		// configurations read a zero To as "no end").
		return fmt.Errorf("--to-cursor %s is before every event: the range is empty", f.toCu)
	}
	return nil
}

// cursorFlag parses a cursor given as text or as the path of a cursor file.
func cursorFlag(name, v string) (eventstore.Cursor, error) {
	if v == "" {
		return eventstore.Cursor{}, nil
	}
	if c, err := eventstore.ParseCursor(v); err == nil {
		return c, nil
	}
	c, ok, err := export.ReadCursorFile(v)
	if err != nil {
		return eventstore.Cursor{}, fmt.Errorf("%s: %w", name, err)
	}
	if !ok {
		return eventstore.Cursor{}, fmt.Errorf("%s %q: neither a cursor (<tx_id>:<position>) nor a cursor file", name, v)
	}
	return c, nil
}

// timeFlag parses an RFC 3339 time or a UTC date.
func timeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time (2026-03-01T12:00:00Z) or a date (2026-03-01)", name, v)
}

// exportFlags are the flags of export.
type exportFlags struct {
	sel                 streamFlags
	cfg                 export.Config
	format, since, till string
	types               []string
}

func (fl *exportFlags) register(cmd *cobra.Command) {
	fl.sel.register(cmd)
	f := cmd.Flags()
	f.StringVar(&fl.format, "format", string(export.FormatJSONL), "jsonl or parquet")
	f.StringVar(&fl.cfg.Out, "out", "", "a file, a directory (existing or ending in /), or - for stdout (required)")
	f.StringSliceVar(&fl.types, "types", nil, "only event types matching these globs, e.g. 'message.*,member.*'")
	f.StringVar(&fl.since, "since", "", "only events that occurred at or after this time (RFC 3339 or a date, UTC)")
	f.StringVar(&fl.till, "until", "", "only events that occurred before this time")
	f.BoolVar(&fl.cfg.AsStored, "as-stored", false, "write old event versions as stored instead of upcast")
	f.IntVar(&fl.cfg.PartEvents, "part-events", 0, "events per part file of a directory (default 1000000)")
	f.IntVar(&fl.cfg.PageSize, "page-size", 0, "events per read of the event store (default 5000)")
	f.IntVar(&fl.cfg.Readers, "readers", 0, "stretches of about 20000 log events read at once, each on its own connection (default 1)")
	_ = cmd.MarkFlagRequired("out")
}

// parse completes the export's configuration from the flags and validates it.
func (fl *exportFlags) parse(cmd *cobra.Command) error {
	if err := fl.sel.parse(); err != nil {
		return err
	}
	var err error
	if fl.cfg.Since, err = timeFlag("--since", fl.since); err != nil {
		return err
	}
	if fl.cfg.Until, err = timeFlag("--until", fl.till); err != nil {
		return err
	}
	fl.cfg.Format, fl.cfg.Tenant, fl.cfg.From, fl.cfg.To = export.Format(fl.format), fl.sel.parsedTenant, fl.sel.parsedFrom, fl.sel.toCu
	for _, t := range fl.types {
		for _, g := range strings.Split(t, ",") {
			if g = strings.TrimSpace(g); g != "" {
				fl.cfg.Types = append(fl.cfg.Types, g)
			}
		}
	}
	fl.cfg.Stdout, fl.cfg.Progress = cmd.OutOrStdout(), cmd.ErrOrStderr()
	return fl.cfg.Validate()
}

func newExportCmd() *cobra.Command {
	var fl exportFlags
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export events from the event store as JSON Lines or Parquet, with a resumable cursor",
		Long: "export writes the events of --tenant (or every tenant) from the PostgreSQL event store in\n" +
			"commit order: as JSON Lines (one envelope a line, the JSON of the Kafka record values) or as\n" +
			"Apache Parquet (one row an event: typed envelope columns, the payload as JSON, and topic, seq,\n" +
			"from, msg_type and sent_at of message events in columns of their own).\n\n" +
			"--out is a file, a directory (existing, or ending in /) of part files of at most\n" +
			"--part-events events, or - for stdout (JSON Lines only). At the end it prints a cursor and\n" +
			"writes it beside the output (FILE.cursor, or DIR/cursor): an export from that cursor gets\n" +
			"exactly the events committed since, none twice, however transactions interleaved. An export\n" +
			"into a directory resumes from the directory's cursor by itself. Old event versions are\n" +
			"upcast to the current ones unless --as-stored. A progress bar goes to stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return fl.run(cmd) },
	}
	fl.register(cmd)
	return cmd
}

// run exports the events the flags select and prints a summary: to stderr when the events go
// to stdout.
func (fl *exportFlags) run(cmd *cobra.Command) error {
	if err := fl.parse(cmd); err != nil {
		return err
	}
	n, err := toolNode(cmd)
	if err != nil {
		return err
	}
	defer n.closeResources()
	n.bulkReads = true
	if err := n.openPostgres(cmd.Context()); err != nil {
		return err
	}
	fl.cfg.Logger, fl.cfg.Opener = n.log, n.opener()
	res, err := export.Run(cmd.Context(), n.store, fl.cfg)
	if err != nil {
		return err
	}
	summary := cmd.OutOrStdout()
	if fl.cfg.Out == export.Stdout {
		summary = cmd.ErrOrStderr()
	}
	fmt.Fprintf(summary, "exported %d events in %s (%.0f events/s)", res.Events, res.Duration.Round(time.Millisecond), res.PerSecond())
	if len(res.Files) > 0 {
		fmt.Fprintf(summary, " to %s", strings.Join(res.Files, ", "))
	}
	fmt.Fprintf(summary, "\ncursor: %s\n", res.Cursor)
	if res.CursorFile != "" {
		fmt.Fprintf(summary, "cursor file: %s\n", res.CursorFile)
	}
	return nil
}

// errNoKafka is the error of a command that writes to Kafka when no brokers are configured.
var errNoKafka = errors.New("kafka.brokers is empty: set IM_KAFKA_BROKERS (or --kafka-brokers) to the cluster to write to")
