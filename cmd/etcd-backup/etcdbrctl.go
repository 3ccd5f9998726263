package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/defrag"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr"
	"github.com/etcdkit/etcdkit/startup"
)

// etcdbrctl's snapshot and restore are etcd-backup's own commands with
// other flags: an invocation that names --storage-provider (etcdkit's
// commands take --store) is etcdbrctl's, and runs as the hidden command
// brCommands names, with etcdbrctl's flags.
var brCommands = map[string]string{"snapshot": "etcdbrctl-snapshot", "restore": "etcdbrctl-restore"}

// brArgs turns an etcdbrctl snapshot or restore command line into the
// hidden command that takes its flags.
func brArgs(args []string) []string {
	if len(args) == 0 {
		return args
	}
	hidden, ok := brCommands[args[0]]
	if !ok || !slices.ContainsFunc(args[1:], func(a string) bool {
		return a == "--storage-provider" || strings.HasPrefix(a, "--storage-provider=")
	}) {
		return args
	}
	return append([]string{hidden}, args[1:]...)
}

// brCommand is a command that takes etcd-backup-restore's flags: they
// are parsed by run, apart from the root's. run logs to log, at
// etcd-backup-restore's default level, which has already said which of
// the flags given mean nothing to etcdkit.
func brCommand(g *globals, use, name, short, long string, flags func(*pflag.FlagSet), run func(*cobra.Command, *slog.Logger) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Long: long,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, err := parseBRFlags(cmd, name, args, flags)
			if fs == nil {
				return err
			}
			log := brLogLevel(4).logger(g.progress)
			logIgnored(fs, name, log)
			return run(cmd, log)
		},
	}
}

// brInitialize holds etcdbrctl initialize's flags.
type brInitialize struct {
	store brStore
	brConn
	brMember
	mode string
}

func (b *brInitialize) flags(fs *pflag.FlagSet) {
	fs.StringVar(&b.mode, "validation-mode", "full", "mode to do data initialization[full/sanity]")
	b.store.flags(fs, "")
	b.brConn.flags(fs)
	b.brMember.flags(fs)
}

func initializeCmd(g *globals) *cobra.Command {
	var b brInitialize
	return brCommand(g, "initialize [etcdbrctl initialize's flags]", "initialize",
		"Make the member's data dir ready and exit, in etcdbrctl initialize's place (an init container)",
		`initialize takes etcd-backup-restore's "etcdbrctl initialize" flags and environment (STORAGE_CONTAINER,
POD_NAME, ETCD_CONF and the credential variables) and runs the start-up procedure once, as
an init container before etcd: it validates the data dir (--validation-mode sanity: the
quicker check, for a member that shut down cleanly), restores it from the store when it is
missing or damaged and the store holds backups, and exits 0 with the data dir ready for
etcd. The members are read from ETCD_CONF (or /var/etcd/config/etcd.conf.yaml) when
there is one, else from --name, --initial-cluster and --initial-advertise-peer-urls.
It exits non-zero with the reason and what would let the member start when the data dir
cannot be made ready: a damaged data dir with no backups to restore from is moved aside
by no one (etcd-backup-restore removes it), a member the cluster removed on purpose stays
out. A data dir is never deleted: one a restore replaces is moved aside beside it.
"initialize --help" lists the flags; those that mean nothing to etcdkit are accepted and
logged as ignored.`,
		b.flags, func(cmd *cobra.Command, log *slog.Logger) error { return b.run(cmd, g, log) })
}

func (b *brInitialize) run(cmd *cobra.Command, g *globals, log *slog.Logger) error {
	ctx := cmd.Context()
	if b.mode != "full" && b.mode != "sanity" {
		return cli.Usage(fmt.Errorf("--validation-mode %q: full or sanity", b.mode))
	}
	if len(b.endpoints) == 0 {
		return cli.Usage(errors.New("--endpoints is empty: give this member's client URL"))
	}
	// etcd-backup-restore makes its temporary directory here; etcdkit's
	// restore works beside the data dir, but the directory is there for
	// whatever runs next, as etcd-backup-restore leaves it.
	if err := os.MkdirAll(b.store.tempDir, 0o700); err != nil {
		return fmt.Errorf("--snapstore-temp-directory: %w", err)
	}
	st, storeURL, err := b.store.open(ctx, g, log)
	if err != nil {
		return err
	}
	conn, err := b.conn(log, b.store.tempDir)
	if err != nil {
		return err
	}
	conf, pod, err := b.etcdConf(b.endpoints[0])
	if err != nil {
		return cli.Usage(err)
	}
	pod = conf.Pod(pod)
	etcd, err := etcdclient.New(ctx, conn)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.Close() }()
	srv, err := etcdbr.New(sidecar.Options{Client: etcd, Endpoint: b.endpoints[0], WorkDir: b.store.tempDir, Logger: log,
		Backups: sidecar.BackupOptions{Store: st}, Membership: sidecar.MembershipOptions{Conn: conn}},
		etcdbr.Config{EtcdConf: conf, Pod: pod, DataDir: b.dataDir, StorePrefix: b.store.prefix, ServiceEndpoints: b.serviceEndpoints,
			Startup: startup.Options{Conn: conn, KeepMovedAside: 1, Logger: log}, Logger: log})
	if err != nil {
		return cli.Usage(err)
	}
	p, err := srv.Initialize(ctx, b.mode == "sanity")
	if err != nil {
		return fmt.Errorf("initialize the data dir of member %s: %w", srv.MemberName(), err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "initialized\t%s (member %s, store %s)\naction\t%s: %s\n", b.dataDir, srv.MemberName(), orNone(storeURL), p.Action, p.Reason)
	if st != nil && p.Action == startup.Bootstrap {
		warnEmptyStore(log, storeURL, "--storage-provider, --store-container and --store-prefix")
	}
	return nil
}

// warnEmptyStore says that a store given holds no backups, so a new,
// empty cluster begins: a store named wrong looks just so.
func warnEmptyStore(log *slog.Logger, storeURL, flags string) {
	log.Warn("the store holds no backups: the member bootstraps a new, empty cluster; if its cluster had backups, "+flags+" name another place", "store", storeURL)
}

// orNone is s, or "none".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// brSnapshot holds etcdbrctl snapshot's flags.
type brSnapshot struct {
	store brStore
	brConn
	brSnapshots
	defragSchedule string
}

func (b *brSnapshot) flags(fs *pflag.FlagSet) {
	b.store.flags(fs, "")
	b.brConn.flags(fs)
	b.brSnapshots.flags(fs)
	brDefragFlag(fs, &b.defragSchedule)
}

func brSnapshotCmd(g *globals) *cobra.Command {
	var b brSnapshot
	c := brCommand(g, brCommands["snapshot"]+" [etcdbrctl snapshot's flags]", "snapshot",
		"Back a cluster up from outside it, in etcdbrctl snapshot's place",
		`snapshot with --storage-provider takes etcd-backup-restore's "etcdbrctl snapshot" flags and
environment (STORAGE_CONTAINER and the credential variables) and backs the cluster at
--endpoints up from outside it until it is stopped, as a Deployment beside a kubeadm etcd
runs it: a full snapshot on --schedule, deltas every --delta-snapshot-period, garbage
collection by --garbage-collection-policy, and every member defragmented on
--defragmentation-schedule. It uploads while a member of --endpoints names a leader,
whichever member leads (serve --from-outside); a second one on the same store stops (the
newest run writes). The chain
goes on from where etcd-backup-restore's left off. Without --storage-provider, snapshot
is etcd-backup's own one-shot snapshot (etcd-backup snapshot --help).`,
		b.flags, func(cmd *cobra.Command, log *slog.Logger) error { return b.run(cmd, g, log) })
	c.Hidden = true
	return c
}

func (b *brSnapshot) run(cmd *cobra.Command, g *globals, log *slog.Logger) error {
	ctx := cmd.Context()
	if len(b.endpoints) == 0 {
		return cli.Usage(errors.New("--endpoints is empty: give the cluster's client URLs"))
	}
	st, storeURL, err := b.store.require(ctx, g, log, "back up to")
	if err != nil {
		return err
	}
	snaps, err := b.snapshotting("snapshot", log)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.store.tempDir, 0o700); err != nil {
		return fmt.Errorf("--snapstore-temp-directory: %w", err)
	}
	conn, err := b.conn(log, b.store.tempDir)
	if err != nil {
		return err
	}
	etcd, err := etcdclient.New(ctx, conn)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.Close() }()
	snaps.FullFrom = capture.FromLeader(etcd, conn)
	sc, err := sidecar.New(sidecar.Options{
		Client: etcd, WorkDir: b.store.tempDir, Logger: log,
		Backups: sidecar.BackupOptions{Store: st, Snapshots: snaps, FromOutside: true},
		Defrag:  sidecar.DefragOptions{Schedule: b.defragSchedule, Options: defrag.Options{Timeout: b.defragTimeout}},
	})
	if err != nil {
		return cli.Usage(err)
	}
	log.Info("etcd-backup snapshot: backing the cluster up from outside it", "endpoints", strings.Join(b.endpoints, ","), "store", storeURL,
		"schedule", b.schedule, "delta_period", b.deltaPeriod)
	err = untilDisplaced(ctx, sc, storeURL, "snapshot", sc.Run)
	log.Info("etcd-backup snapshot: stopped")
	return err
}

// untilDisplaced runs sc (with run) until ctx ends, or until another
// writer on the store displaces it (a second sidecar outside the cluster
// on the same prefix, the newer of which writes): then it exits with the
// reason, rather than live on backing nothing up while its supervisor sees
// it healthy.
func untilDisplaced(ctx context.Context, sc *sidecar.Sidecar, storeURL, command string, run func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
		if st := sc.SnapshotStatus(); st.Refused == capture.RefusedConflict {
			cancel()
			return errors.Join(fmt.Errorf("another uploader writes %s (%s): this one exits; run one %s per store prefix", storeURL, st.LastError, command), <-done)
		}
	}
}

// brRestore holds etcdbrctl restore's flags.
type brRestore struct {
	store brStore
	brMember
}

func (b *brRestore) flags(fs *pflag.FlagSet) {
	b.store.flags(fs, "")
	b.brMember.flags(fs)
}

func brRestoreCmd(g *globals) *cobra.Command {
	var b brRestore
	c := brCommand(g, brCommands["restore"]+" [etcdbrctl restore's flags]", "restore",
		"Restore the latest backup into a data dir, in etcdbrctl restore's place",
		`restore with --storage-provider takes etcd-backup-restore's "etcdbrctl restore" flags and
environment (STORAGE_CONTAINER and the credential variables) and builds the member
--name, --initial-cluster, --initial-advertise-peer-urls and --initial-cluster-token
describe at --data-dir from the store's latest full snapshot and the deltas after it.
An existing data dir is moved aside, never deleted. Without --storage-provider, restore
is etcd-backup's own (etcd-backup restore --help).`,
		b.flags, func(cmd *cobra.Command, log *slog.Logger) error { return b.run(cmd, g, log) })
	c.Hidden = true
	return c
}

func (b *brRestore) run(cmd *cobra.Command, g *globals, log *slog.Logger) error {
	ctx := cmd.Context()
	st, _, err := b.store.require(ctx, g, log, "restore from")
	if err != nil {
		return err
	}
	opts := restore.Options{Member: b.spec(), KeepMovedAside: 1,
		Read: restore.ReadOptions{Logger: log, Progress: g.progress.Update}}
	if opts.Read.Codec, err = g.snapshotCodec(); err != nil {
		return err
	}
	res, err := restore.Restore(ctx, st, opts)
	g.progress.Done()
	if err != nil {
		return err
	}
	out := restoreResultOf(opts, res)
	return g.print(out, out.table)
}

// ifNeeded is restore --if-needed: the start-up's own decision, and a
// restore only when it says so.
func (r *restoreRun) restoreIfNeeded(ctx context.Context, cmd *cobra.Command, g *globals) error {
	for _, f := range []string{"revision", "time", "timeline", "follow", "prefix", "to"} {
		if cmd.Flags().Changed(f) {
			return cli.Usage(fmt.Errorf("--if-needed restores the newest state, as a member's start-up does: it takes no --%s", f))
		}
	}
	if r.opts.RevisionBump != 0 {
		return cli.Usage(errors.New("--if-needed bumps the revision by its estimate (auto), or keeps it with --revision-bump 0"))
	}
	st, p, err := g.source(ctx, &r.opts.Read)
	if err != nil {
		return err
	}
	defer p.Done()
	src := &startup.Local{Store: st, Secondary: r.opts.Read.Secondary, Codec: r.opts.Read.Codec, KeepMovedAside: r.opts.KeepMovedAside,
		KeepRevision: r.opts.KeepRevision, Progress: p.Update, Logger: g.log}
	m := r.opts.Member.WithDefaults()
	cfg := startup.Config{Member: m, Etcd: r.opts.Release}
	if cmd.Flags().Changed("endpoints") {
		// The other members', asked whether a cluster runs.
		cfg.Endpoints = g.endpoints
	}
	// A start-up's bound: its waits, with room for a restore.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	plan, _, err := startup.Assess(ctx, cfg, src, startup.Options{Conn: g.etcd.Config(), KeepMovedAside: r.opts.KeepMovedAside, Logger: g.log})
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	switch plan.Action {
	case startup.Restore:
	case startup.Refuse:
		return fmt.Errorf("restore --if-needed into %s: %s", m.DataDir, plan.Reason)
	default:
		fmt.Fprintf(w, "nothing restored\t%s: %s (%s)\n", m.DataDir, plan.Reason, plan.Action)
		if plan.Action == startup.Bootstrap {
			warnEmptyStore(g.log, g.storeURL, "--store")
		}
		return nil
	}
	res, err := src.Restore(ctx, cfg, plan)
	if err != nil {
		return err
	}
	p.Done()
	fmt.Fprintf(w, "restored\t%s: %s\nrevision\t%d (%d replayed), bumped by %d\n", m.DataDir, plan.Reason, res.Revision, res.Revisions, res.RevisionBump)
	if res.MovedAside != "" {
		fmt.Fprintf(w, "moved aside\t%s\n", res.MovedAside)
	}
	return nil
}
