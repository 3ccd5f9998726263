package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/compact"
	"github.com/etcdkit/etcdkit/heartbeat"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// brCompact holds etcd-backup-restore's compact flags, as etcd-druid's
// compaction Job passes them; compact accepts them beside its own.
type brCompact struct {
	store   brStore
	dataDir string
	leases  leaseFlags
}

func (b *brCompact) flags(fs *pflag.FlagSet) {
	b.store.flags(fs, "")
	fs.StringVarP(&b.dataDir, "data-dir", "d", "default.etcd", "path to the data directory")
	for name, def := range map[string]string{"auto-compaction-mode": "periodic", "auto-compaction-retention": "30m",
		"initial-cluster": "default=http://localhost:2380", "initial-cluster-token": "etcd-cluster", "name": "default",
		"restoration-temp-snapshots-dir": "default.restoration.tmp"} {
		fs.String(name, def, "etcd-backup-restore's; no effect")
	}
	fs.Bool("defragment", true, "etcd-backup-restore's; the new full snapshot is always defragmented")
	b.leases.snapshotFlags(fs)
	fs.Bool("skip-hash-check", false, "etcd-backup-restore's; every checksum is verified")
	fs.Int64("embedded-etcd-quota-bytes", 8<<30, "etcd-backup-restore's; no embedded etcd")
	fs.Duration("etcd-defrag-timeout", 8*time.Minute, "etcd-backup-restore's; no effect")
	fs.Duration("etcd-snapshot-timeout", 30*time.Minute, "etcd-backup-restore's; no effect")
	fs.Duration("metrics-scrape-wait-duration", 0, "etcd-backup-restore's; no effect")
	fs.StringArray("initial-advertise-peer-urls", []string{member.DefaultPeerURL}, "etcd-backup-restore's; no effect")
	fs.Int("max-call-send-message-size", 10<<20, "etcd-backup-restore's; no effect")
	fs.Uint("max-fetchers", 6, "etcd-backup-restore's; no effect")
	fs.Uint("max-request-bytes", 10<<20, "etcd-backup-restore's; no effect")
	fs.Uint("max-txn-ops", 10240, "etcd-backup-restore's; no effect")
}

func compactCmd(g *globals) *cobra.Command {
	var (
		workDir string
		br      brCompact
	)
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Turn the latest chain into one new full snapshot, locally; nothing is deleted",
		Long: `compact replays the latest chain into a new full snapshot, locally, and uploads it.

It also takes etcd-backup-restore's "etcdbrctl compact" flags, as etcd-druid's compaction Job
passes them (--storage-provider, --store-container or STORAGE_CONTAINER, --store-prefix, and
--data-dir, whose directory is the work dir). Without --compression the new full snapshot is
compressed as the chain's last snapshot is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := br.apply(cmd, g, &workDir); err != nil {
				return err
			}
			// A compaction's Go heap needs about 90 MiB whatever the chain
			// (bench/README.md); without a limit of the operator's the heap
			// would grow to twice what is live before each collection.
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(compact.ReplayMemory)
			}
			// Known before the work: the new full snapshot's revision goes
			// to its lease, where etcd-druid counts the revisions since it.
			var leases *heartbeat.Leases
			if br.leases.snapshots {
				var err error
				if leases, err = br.leases.leases(g.log); err != nil {
					return err
				}
			}
			var src restore.ReadOptions
			st, p, err := g.source(ctx, &src)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("compression") {
				if src.Codec.Compression, err = chainCompression(ctx, st); err != nil {
					return err
				}
			}
			c, err := compact.Compact(ctx, st, compact.Options{
				Read:    src,
				Full:    snapshot.FullOptions{Codec: src.Codec, SpoolDir: workDir, Logger: g.log},
				WorkDir: workDir,
			})
			p.Done()
			if err != nil {
				return err
			}
			if leases != nil {
				updateFullLease(ctx, g, leases, br.leases.fullName, c.Snapshot)
			}
			out := compactResult{InputBytes: c.InputBytes, OutputBytes: c.OutputBytes, Replayed: c.Revisions, Revision: c.Snapshot.LastRevision,
				Snapshot: c.Snapshot.Key, TookSeconds: c.Took.Seconds(), Unchanged: c.Unchanged}
			return g.print(out, out.table)
		},
	}
	cmd.Flags().StringVar(&workDir, "work-dir", os.TempDir(), "where the chain is replayed")
	br.flags(cmd.Flags())
	// etcd-backup-restore's flags work, and --help shows etcd-backup's own.
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	br.flags(fs)
	fs.VisitAll(func(f *pflag.Flag) { _ = cmd.Flags().MarkHidden(f.Name) })
	return cmd
}

// updateFullLease writes the new full's revision to etcd-druid's full
// snapshot lease. The snapshot is on the store: a lease not written is a
// warning, as in etcd-backup-restore's compaction.
func updateFullLease(ctx context.Context, g *globals, leases *heartbeat.Leases, name string, full snapshot.Snapshot) {
	if err := leases.UpdateFull(ctx, name, full.LastRevision, full.Created); err != nil {
		g.log.Warn("etcd-backup compact: the full snapshot lease is not updated", "error", err)
		return
	}
	g.log.Info("etcd-backup compact: full snapshot lease updated", "lease", name, "revision", full.LastRevision)
}

// compactResult is what compact prints.
type compactResult struct {
	InputBytes  int64   `json:"input_bytes"`
	OutputBytes int64   `json:"output_bytes"`
	Replayed    int64   `json:"replayed"`
	Revision    int64   `json:"revision"`
	Snapshot    string  `json:"snapshot"`
	TookSeconds float64 `json:"took_seconds"`
	Unchanged   bool    `json:"unchanged"`
}

func (r compactResult) table(w *tabwriter.Writer) {
	if r.Unchanged {
		fmt.Fprintf(w, "nothing to compact: the latest chain is %s alone, with no deltas\n", r.Snapshot)
		return
	}
	fmt.Fprintf(w, "new full snapshot\t%s\nrevision\t%d\nreplayed\t%d revisions\nsize\t%s, from %s\n",
		r.Snapshot, r.Revision, r.Replayed, size(r.OutputBytes), size(r.InputBytes))
}

// apply turns etcd-backup-restore's store flags into --store, and its
// data dir into the work dir.
func (b *brCompact) apply(cmd *cobra.Command, g *globals, workDir *string) error {
	if b.store.provider == "" {
		return nil
	}
	if g.storeURL != "" {
		return cli.Usage(errors.New("--store and --storage-provider name the store twice: give one"))
	}
	u, err := b.store.url("STORAGE_CONTAINER")
	if err != nil {
		return cli.Usage(err)
	}
	g.storeURL = u
	if cmd.Flags().Changed("data-dir") && !cmd.Flags().Changed("work-dir") {
		*workDir = filepath.Dir(b.dataDir)
	}
	return nil
}

// chainCompression is the compression of the latest chain's last
// snapshot, which a compaction keeps (etcd-backup-restore's does too);
// gzip stands in for the ones etcdkit reads but never writes.
func chainCompression(ctx context.Context, st store.Store) (snapshot.Compression, error) {
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return "", err
	}
	chain, err := cat.Latest()
	if err != nil {
		return "", err
	}
	last := chain.Full
	if n := len(chain.Deltas); n > 0 {
		last = chain.Deltas[n-1]
	}
	switch last.Compression {
	case snapshot.Zlib, snapshot.LZW:
		return snapshot.Gzip, nil
	}
	return last.Compression, nil
}
