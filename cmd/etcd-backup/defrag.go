package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/defrag"
)

// defragFlags are the defragmentation options serve and defrag share.
func defragFlags(cmd *cobra.Command, o *defrag.Options) {
	f := cmd.Flags()
	f.Int64Var(&o.Policy.MinDBSize, "defrag-min-size", 0, "skip members whose database is smaller (bytes)")
	f.Int64Var(&o.Policy.MinFreeBytes, "defrag-min-free", 0, "skip members with fewer free bytes (size minus size in use)")
	f.Float64Var(&o.Policy.MinFreeRatio, "defrag-min-free-ratio", 0, "skip members whose free share of the database is lower (0-1)")
	f.BoolVar(&o.CompactKeyspace, "defrag-compact", false, "compact the keyspace to the current revision first (drops history)")
	f.DurationVar(&o.Pause, "defrag-pause", 5*time.Second, "pause between members")
	f.DurationVar(&o.Timeout, "defrag-timeout", 5*time.Minute, "bound on each member's defragmentation")
	f.BoolVar(&o.DisarmNOSPACE, "disarm-nospace", false, "disarm NOSPACE alarms once every database is under its quota")
}

func defragCmd(g *globals) *cobra.Command {
	var o defrag.Options
	cmd := &cobra.Command{
		Use:   "defrag [--dry-run]",
		Short: "Defragment every member, followers first, the leader last",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cli, err := g.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = cli.Close() }()
			o.Logger = g.log
			res, err := defrag.Run(cmd.Context(), cli, o)
			if perr := g.print(res, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "MEMBER\tLEADER\tBEFORE\tAFTER\tRECLAIMED\tTOOK\tSKIPPED")
				for _, m := range res.Members {
					skipped := m.Skipped
					if skipped == "" && res.DryRun {
						skipped = "(dry run: would defragment)"
					}
					fmt.Fprintf(w, "%s\t%v\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Leader, size(m.SizeBefore), size(m.SizeAfter), size(m.Reclaimed), m.Took.Round(time.Millisecond), skipped)
				}
			}); perr != nil {
				return perr
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "say what would be done, change nothing")
	defragFlags(cmd, &o)
	return cmd
}
