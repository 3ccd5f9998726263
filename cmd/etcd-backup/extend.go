package main

import (
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/snapshot"
)

// extendCmd renews the lock of a hibernated cluster's backups.
func extendCmd(g *globals) *cobra.Command {
	var (
		gcFrom string
		br     brStore
	)
	cmd := &cobra.Command{
		Use:     "extend-immutability [--gc-from-timestamp T]",
		Aliases: []string{"extend-snapshot-immutability"},
		Short:   "Copy the latest full snapshot to a new name, on the store's server, so its write-once lock starts again",
		Long: `extend-immutability keeps a hibernated cluster's backups locked on a write-once bucket: it
copies the latest full snapshot (of the newest timeline) to a new name with the same revisions and
now's time, whose lock runs from now, with its cluster identity. S3, GCS and Azure copy it on their
servers (CopyObject, rewrite, Copy Blob): no byte of the snapshot passes through this process.
A cluster that resumes continues the copy's chain.

--gc-from-timestamp (RFC 3339 or unix seconds; etcd-druid's task passes its creation time) deletes the
earlier copies made since then once the new one is written; a lock that refuses keeps one. The full
the cluster took before it hibernated, older than that, is never deleted here. Also
etcd-backup-restore's "extend-snapshot-immutability", with its store flags (--storage-provider,
--store-container or STORAGE_CONTAINER, --store-prefix).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if br.provider != "" {
				if g.storeURL != "" {
					return cli.Usage(errors.New("--store and --storage-provider name the store twice: give one"))
				}
				u, err := br.url("STORAGE_CONTAINER")
				if err != nil {
					return cli.Usage(err)
				}
				g.storeURL = u
			}
			var from time.Time
			if gcFrom != "" {
				var err error
				if from, err = parseTimestamp(gcFrom); err != nil {
					return cli.Usage(fmt.Errorf("--gc-from-timestamp %q: %w", gcFrom, err))
				}
			}
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			res, err := snapshot.Extend(ctx, st, snapshot.ExtendOptions{GCFrom: from, Logger: g.log})
			if err != nil {
				return err
			}
			out := extendResult{Deleted: snapshotKeys(res.Deleted), DeltasAfter: res.DeltasAfter, From: res.From.Key, Locked: snapshotKeys(res.Locked),
				OnServer: res.OnServer, Revision: res.To.LastRevision, To: res.To.Key, TookSeconds: res.Took.Seconds()}
			return g.print(out, func(w *tabwriter.Writer) {
				how := "on the store's server"
				if !res.OnServer {
					how = "through this process (the store has no server-side copy)"
				}
				fmt.Fprintf(w, "copied\t%s\nto\t%s (its lock starts now)\nrevision\t%d\nhow\t%s, %s\n",
					res.From.Key, res.To.Key, res.To.LastRevision, how, res.Took.Round(time.Millisecond))
				for _, s := range res.Deleted {
					fmt.Fprintf(w, "deleted earlier copy\t%s\n", s.Key)
				}
				for _, s := range res.Locked {
					fmt.Fprintf(w, "earlier copy still locked\t%s\n", s.Key)
				}
				if res.DeltasAfter > 0 {
					fmt.Fprintf(w, "warning\t%d deltas follow the full; their locks are not renewed: take a full snapshot before hibernating\n", res.DeltasAfter)
				}
			})
		},
	}
	cmd.Flags().StringVar(&gcFrom, "gc-from-timestamp", "", "delete the earlier copies made since this time (RFC 3339 or unix seconds)")
	br.flags(cmd.Flags(), "")
	// etcd-backup-restore's flags work, and --help shows etcd-backup's own.
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	(&brStore{}).flags(fs, "")
	fs.VisitAll(func(f *pflag.Flag) { _ = cmd.Flags().MarkHidden(f.Name) })
	return cmd
}

// parseTimestamp reads RFC 3339 or unix seconds.
func parseTimestamp(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Parse(time.RFC3339, s)
}

func snapshotKeys(snaps []snapshot.Snapshot) []string {
	keys := make([]string, 0, len(snaps))
	for _, s := range snaps {
		keys = append(keys, s.Key)
	}
	return keys
}

// extendResult is what extend prints.
type extendResult struct {
	Deleted     []string `json:"deleted"`
	DeltasAfter int      `json:"deltas_after"`
	From        string   `json:"from"`
	Locked      []string `json:"locked"`
	OnServer    bool     `json:"on_server"`
	Revision    int64    `json:"revision"`
	To          string   `json:"to"`
	TookSeconds float64  `json:"took_seconds"`
}
