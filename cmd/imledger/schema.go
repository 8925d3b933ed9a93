package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/domain/schemas"
	"github.com/imledger/imledger/transport/schemaapi"
)

func newSchemaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "List or print the JSON Schemas of the event stream",
		Long: "The binary embeds the JSON Schemas (draft 2020-12) of the envelope and of every event type's\n" +
			"payload; serve also serves them at /v1/schemas/.",
		Args: cobra.NoArgs,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the event types with their version, Kafka topic and, for old versions, what they upcast to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			idx := schemaapi.NewIndex(cfg.Kafka.Config, "")
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SCHEMA\tVERSION\tTOPIC\tUPCAST TO")
			fmt.Fprintf(w, "%s\t\t(every topic)\t\n", schemas.Envelope)
			for _, e := range idx.EventTypes {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", e.EventType, e.Version, e.Topic, e.SupersededBy)
			}
			return w.Flush()
		},
	}
	show := &cobra.Command{
		Use:   "show <envelope|event type>",
		Short: "Print one schema",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := schemas.Read(args[0])
			if err != nil {
				return fmt.Errorf("%w (see imledger schema list)", err)
			}
			_, err = cmd.OutOrStdout().Write(doc)
			return err
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}
