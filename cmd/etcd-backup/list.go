package main

import (
	"cmp"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

func listCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the backups as chains: each full snapshot with its deltas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			if e, ok := st.(store.Exister); ok {
				switch exists, err := e.Exists(ctx); {
				case err != nil:
					return err
				case !exists:
					return fmt.Errorf("store %s: the directory does not exist: nothing was ever backed up there (check --store)", st)
				}
			}
			cat, err := snapshot.List(ctx, st)
			if err != nil {
				return err
			}
			type chainOut struct {
				api.ChainView
				Problem string `json:"problem,omitempty"`
				// EstimatedRestore is restore.EstimateRestore at the
				// bench machine's speed: a sidecar's drills measure its own.
				EstimatedRestore float64 `json:"estimated_restore_seconds"`
			}
			chains := []chainOut{}
			for _, c := range cat.Chains() {
				out := chainOut{ChainView: sidecar.ChainViewOf(c), EstimatedRestore: restore.EstimateRestore(c, restore.Speed{}).Seconds()}
				if id, ok, err := snapshot.ReadIdentity(ctx, st, c.Full); err == nil && ok {
					out.ClusterID = id.ClusterID
				}
				if _, err := c.Check(); err != nil {
					out.Problem = err.Error()
				}
				chains = append(chains, out)
			}
			now := time.Now()
			problems := 0
			for _, c := range chains {
				if c.Problem != "" {
					problems++
				}
			}
			if len(chains) == 0 {
				fmt.Fprintf(os.Stderr, "no snapshots in %s\n", st)
			}
			err = g.print(map[string]any{"chains": chains}, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "CHAIN\tCLUSTER\tKIND\tREVISIONS\tSIZE\tAGE\tCODEC\tKEY")
				for i, c := range chains {
					cluster := cmp.Or(c.ClusterID, "-")
					row := func(v api.SnapshotView) {
						fmt.Fprintf(w, "%d\t%s\t%s\t%d-%d\t%s\t%s\t%s\t%s\n", i+1, cluster, v.Kind, v.StartRevision, v.LastRevision,
							size(v.Size), age(now.Sub(v.Created)), codecOf(v), v.Key)
					}
					row(c.Full)
					for _, d := range c.Deltas {
						row(d)
					}
					if c.Problem != "" {
						fmt.Fprintf(w, "%d\t%s\t!\t%s\n", i+1, cluster, c.Problem)
					} else {
						fmt.Fprintf(w, "%d\t%s\t~\trestores in about %s\n", i+1, cluster, time.Duration(c.EstimatedRestore*float64(time.Second)).Round(100*time.Millisecond))
					}
				}
			})
			if err == nil && problems > 0 {
				// Scripts and alerts read the exit code, not the table.
				err = fmt.Errorf("%d of %d chains cannot be restored whole (the rows marked !)", problems, len(chains))
			}
			return err
		},
	}
}

func codecOf(v api.SnapshotView) string {
	c := v.Compression
	if c == "" {
		c = "none"
	}
	if v.Encrypted {
		c += "+age"
	}
	return c
}

// age is a duration for people.
func age(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}
