package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
)

func compactCmd(g *globals) *cobra.Command {
	var workDir string
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Turn the latest chain into one new full snapshot, locally; nothing is deleted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var src restore.Source
			st, p, err := g.source(ctx, &src)
			if err != nil {
				return err
			}
			c, err := restore.Consolidate(ctx, st, restore.ConsolidateOptions{
				Source:  src,
				Full:    snapshot.FullOptions{Codec: src.Codec, SpoolDir: workDir, Logger: g.log},
				WorkDir: workDir,
			})
			p.Done()
			if err != nil {
				return err
			}
			out := map[string]any{"snapshot": c.Snapshot.Key, "revision": c.Snapshot.LastRevision, "replayed": c.Revisions,
				"input_bytes": c.InputBytes, "output_bytes": c.OutputBytes, "took_seconds": c.Took.Seconds(), "unchanged": c.Unchanged}
			return g.print(out, func(w *tabwriter.Writer) {
				if c.Unchanged {
					fmt.Fprintf(w, "nothing to compact: the latest chain is %s alone, with no deltas\n", c.Snapshot.Key)
					return
				}
				fmt.Fprintf(w, "new full snapshot\t%s\nrevision\t%d\nreplayed\t%d revisions\nsize\t%s, from %s\n",
					c.Snapshot.Key, c.Snapshot.LastRevision, c.Revisions, size(c.OutputBytes), size(c.InputBytes))
			})
		},
	}
	cmd.Flags().StringVar(&workDir, "work-dir", os.TempDir(), "where the chain is replayed")
	return cmd
}
