package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/internal/cli"
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
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			codec, err := g.snapshotCodec()
			if err != nil {
				return err
			}
			p := cli.NewProgress(os.Stderr)
			c, err := restore.Compact(ctx, st, restore.CompactOptions{
				Source:  restore.Source{Codec: codec, Progress: p.Update, Logger: g.log},
				Full:    snapshot.FullOptions{Codec: codec, SpoolDir: workDir, Logger: g.log},
				WorkDir: workDir,
			})
			p.Done()
			if err != nil {
				return err
			}
			out := map[string]any{"snapshot": c.Snapshot.Key, "revision": c.Snapshot.LastRevision, "replayed": c.Revisions,
				"input_bytes": c.InputBytes, "output_bytes": c.OutputBytes, "took_seconds": c.Took.Seconds()}
			return g.print(out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "new full snapshot\t%s\nrevision\t%d\nreplayed\t%d revisions\nsize\t%s, from %s\n",
					c.Snapshot.Key, c.Snapshot.LastRevision, c.Revisions, size(c.OutputBytes), size(c.InputBytes))
			})
		},
	}
	cmd.Flags().StringVar(&workDir, "work-dir", os.TempDir(), "where the chain is replayed")
	return cmd
}
