package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/view"
)

func snapshotCmd(g *globals) *cobra.Command {
	var delta, allowNewChain bool
	var source string
	cmd := &cobra.Command{
		Use:   "snapshot [--delta]",
		Short: "Take a full snapshot now, or with --delta the events since the latest chain's end",
		Long: `snapshot takes a full snapshot now, or with --delta the events since the latest chain's end.

With --storage-provider, snapshot takes etcdbrctl snapshot's flags instead and backs the
cluster up continuously, as etcd-backup-restore's snapshot command does
("etcd-backup snapshot --storage-provider= --help" lists them).`,
		Args: cobra.NoArgs,
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
			kind, err := snapshot.ParseSourceKind(source)
			if err != nil {
				return cli.Usage(fmt.Errorf("--source: %w", err))
			}
			conn := g.conn(g.endpoints)
			// kine serves no auth API: there is no root role to check.
			conn.RequireRoot = kind == snapshot.SourceEtcd
			cli, err := etcdclient.New(ctx, conn)
			if err != nil {
				return err
			}
			defer func() { _ = cli.Close() }()
			// Where this cluster's backups go on the store, decided as the
			// sidecar decides it: a delta only continues the cluster's own
			// past; a full may begin a timeline.
			lin, cat, err := capture.Place(ctx, cli, st, capture.PlaceOptions{AllowNewChain: allowNewChain && !delta, DryRun: delta, Source: kind,
				Codec: codec, Logger: g.log})
			if err != nil {
				return err
			}
			newest := func(ctx context.Context, _ snapshot.Snapshot) error { return snapshot.Newest(ctx, st, lin.Timeline) }
			stamp := func() time.Time { return lin.Timeline.Stamp(time.Now()) }
			var taken []snapshot.Snapshot
			if !delta {
				src := capture.NewDatastore(kind, cli, capture.DatastoreOptions{Logger: g.log})
				s, err := capture.FullOf(ctx, src, st, snapshot.FullOptions{Codec: codec, SpoolDir: os.TempDir(), BeforeUpload: newest, Logger: g.log, Now: stamp})
				if err != nil {
					return err
				}
				taken = append(taken, s)
			} else {
				if !lin.Continues {
					return fmt.Errorf("no delta written: %s; take a full snapshot (etcd-backup snapshot)", lin.Reason)
				}
				chain, err := cat.Latest()
				if err != nil {
					return err
				}
				if chain, err = chain.Check(); err != nil {
					return fmt.Errorf("the latest chain: %w; take a full snapshot to start a new one", err)
				}
				taken, err = capture.Delta(ctx, cli, st, chain.LastRevision(), capture.DeltaOptions{Codec: codec, Source: kind, BeforeUpload: newest, Logger: g.log, Now: stamp})
				if err != nil {
					return err
				}
			}
			views := make([]api.SnapshotView, 0, len(taken))
			for _, s := range taken {
				views = append(views, view.SnapshotOf(s))
			}
			return g.print(views, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "KEY\tREVISIONS\tSIZE")
				for _, v := range views {
					fmt.Fprintf(w, "%s\t%d-%d\t%s\n", v.Key, v.StartRevision, v.LastRevision, size(v.Size))
				}
			})
		},
	}
	cmd.Flags().StringVar(&source, "source", "etcd", "what --endpoints reach: etcd, or etcd-api (a datastore behind etcd's API such as kine; the full is logical)")
	cmd.Flags().BoolVar(&delta, "delta", false, "write a delta of the events since the latest chain's end instead")
	cmd.Flags().BoolVar(&allowNewChain, "allow-new-chain", false, "take the full snapshot even when the store's newest chain is another cluster's, in a timeline of this cluster's own")
	return cmd
}

// size is bytes for people.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
