package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/snapshot"
)

// brCopy holds etcd-backup-restore's copy flags, as etcd-druid's
// copy-backups Job passes them.
type brCopy struct {
	target, source        brStore
	maxAgeDays, maxChains int
	parallel              int
	waitFinal             bool
	waitTimeout           time.Duration
}

func (b *brCopy) flags(fs *pflag.FlagSet) {
	b.target.flags(fs, "")
	b.source.flags(fs, "source-")
	fs.IntVar(&b.maxAgeDays, "max-backup-age", -1, "copy only the backups not older than the specified number of days")
	fs.IntVar(&b.maxChains, "max-backups-to-copy", -1, "copy the specified number of backups sorted by date from newest to oldest")
	fs.IntVar(&b.parallel, "max-parallel-copy-operations", 10, "maximum number of parallel copy operations")
	fs.BoolVar(&b.waitFinal, "wait-for-final-snapshot", false, "wait for a final full snapshot before copying backups")
	fs.DurationVar(&b.waitTimeout, "wait-for-final-snapshot-timeout", 0, "timeout for waiting for a final full snapshot")
}

func copyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "copy [etcd-backup-restore's copy flags]",
		Short: "Copy the backups of one store to another, as etcd-druid's copy-backups Job asks",
		Long: `copy takes etcd-backup-restore's "etcdbrctl copy" flags: the target store as --storage-provider,
--store-container (or STORAGE_CONTAINER) and --store-prefix, the source store as the same flags
prefixed with source- (or SOURCE_STORAGE_CONTAINER), each cloud store's credentials from its usual
variables (the source's prefixed with SOURCE_). It copies whole chains, newest first, skips the
objects the target holds, and writes a final full snapshot without its .final.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var b brCopy
			fs, err := parseBRFlags(cmd, "copy", args, b.flags)
			if fs == nil {
				return err
			}
			return b.run(cmd, g)
		},
	}
}

// parseBRFlags parses one of etcd-backup-restore's flag sets apart from
// the root's: nil and no error after --help.
func parseBRFlags(cmd *cobra.Command, name string, args []string, flags func(*pflag.FlagSet)) (*pflag.FlagSet, error) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(cmd.OutOrStdout())
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%s\n\nUsage:\n  etcd-backup %s [flags]\n\nFlags:\n", cmd.Long, name)
			fs.PrintDefaults()
			return nil, nil
		}
		return nil, cli.Usage(err)
	}
	if fs.NArg() > 0 {
		return nil, cli.Usage(fmt.Errorf("%s takes flags only, not %q", name, fs.Arg(0)))
	}
	return fs, nil
}

func (b *brCopy) run(cmd *cobra.Command, g *globals) error {
	ctx := cmd.Context()
	targetURL, err := b.target.url("STORAGE_CONTAINER")
	if err != nil {
		return cli.Usage(fmt.Errorf("the target: %w", err))
	}
	// The source's credentials are its own variables, SOURCE_….
	sourceURL, err := b.source.urlFor("SOURCE_STORAGE_CONTAINER", "SOURCE_")
	if err != nil {
		return cli.Usage(fmt.Errorf("the source: %w", err))
	}
	if targetURL == "" || sourceURL == "" {
		return cli.Usage(errors.New("copy needs a source and a target store: --source-storage-provider and --storage-provider"))
	}
	if b.parallel < 1 {
		return cli.Usage(fmt.Errorf("--max-parallel-copy-operations %d: 1 or more", b.parallel))
	}
	src, err := cli.OpenStore(ctx, sourceURL, g.storeTimeout, g.log)
	if err != nil {
		return err
	}
	dst, err := cli.OpenStore(ctx, targetURL, g.storeTimeout, g.log)
	if err != nil {
		return err
	}
	o := snapshot.CopyOptions{Parallel: b.parallel, WaitForFinal: b.waitFinal, WaitTimeout: b.waitTimeout, Logger: g.log}
	if b.maxChains >= 0 {
		// etcd-backup-restore: 0 copies nothing, -1 everything.
		if b.maxChains == 0 {
			g.log.Info("copy: --max-backups-to-copy 0: nothing to copy")
			return nil
		}
		o.MaxChains = b.maxChains
	}
	switch {
	case b.maxAgeDays == 0:
		// etcd-backup-restore: only what is younger than 0 days.
		g.log.Info("copy: --max-backup-age 0: nothing to copy")
		return nil
	case b.maxAgeDays > 0:
		o.MaxAge = time.Duration(b.maxAgeDays) * 24 * time.Hour
	}
	g.log.Info("copy: copying backups", "from", sourceURL, "to", targetURL)
	res, err := snapshot.Copy(ctx, src, dst, o)
	g.log.Info("copy: done", "copied", len(res.Copied), "skipped", len(res.Skipped), "final_seen", res.FinalSeen)
	return err
}
