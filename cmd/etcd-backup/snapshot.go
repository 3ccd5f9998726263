package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

func snapshotCmd(g *globals) *cobra.Command {
	var delta, allowNewChain bool
	cmd := &cobra.Command{
		Use:   "snapshot [--delta]",
		Short: "Take a full snapshot now, or with --delta the events since the latest chain's end",
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
			cli, err := g.client(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = cli.Close() }()
			if err := checkChain(ctx, st, cli, delta || !allowNewChain); err != nil {
				return err
			}
			var taken []snapshot.Snapshot
			if !delta {
				s, err := snapshot.Full(ctx, cli, st, snapshot.FullOptions{Codec: codec, SpoolDir: os.TempDir(), Logger: g.log})
				if err != nil {
					return err
				}
				taken = append(taken, s)
			} else {
				cat, err := snapshot.List(ctx, st)
				if err != nil {
					return err
				}
				chain, err := cat.Latest()
				if errors.Is(err, snapshot.ErrNoFull) {
					return fmt.Errorf("%w: take a full snapshot first (etcd-backup snapshot)", err)
				}
				if err != nil {
					return err
				}
				if chain, err = chain.Check(); err != nil {
					return fmt.Errorf("the latest chain: %w; take a full snapshot to start a new one", err)
				}
				taken, err = snapshot.Delta(ctx, cli, st, chain.LastRevision(), snapshot.DeltaOptions{Codec: codec, Logger: g.log})
				if err != nil {
					return err
				}
			}
			views := make([]api.SnapshotView, 0, len(taken))
			for _, s := range taken {
				views = append(views, sidecar.ViewOf(s))
			}
			return g.print(views, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "KEY\tREVISIONS\tSIZE")
				for _, v := range views {
					fmt.Fprintf(w, "%s\t%d-%d\t%s\n", v.Key, v.StartRevision, v.LastRevision, size(v.Size))
				}
			})
		},
	}
	cmd.Flags().BoolVar(&delta, "delta", false, "write a delta of the events since the latest chain's end instead")
	cmd.Flags().BoolVar(&allowNewChain, "allow-new-chain", false, "take the full snapshot even when the store's latest chain is another cluster's")
	return cmd
}

// checkChain refuses, when strict, to write beside another cluster's
// latest chain.
func checkChain(ctx context.Context, st store.Store, cli *clientv3.Client, strict bool) error {
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return err
	}
	chain, err := cat.Latest()
	if err != nil || !strict {
		return nil //nolint:nilerr // no chain yet: nobody's to refuse
	}
	id, err := snapshot.IdentityOf(ctx, cli)
	if err != nil {
		return err
	}
	if err := snapshot.CheckChain(ctx, st, chain, id.ClusterID); err != nil {
		return fmt.Errorf("%w (a full snapshot with --allow-new-chain)", err)
	}
	return nil
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
