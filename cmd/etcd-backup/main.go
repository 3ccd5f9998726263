package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	_ "github.com/etcdkit/etcdkit/store/all" // every backend's URL scheme
)

// Exit codes, as --help lists them.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitMismatch = 3
	exitUnknown  = 4
)

// errMismatch is a verification that ran and found the backup wrong, or
// an upgrade check that found something to fix first; errUnknown, a check
// that could not be made.
var (
	errMismatch = errors.New("verification failed")
	errUnknown  = errors.New("not everything could be checked")
)

// globals are the flags every command shares.
type globals struct {
	config   string
	storeURL string
	// secondURL is a second site's store, of the commands that take
	// --secondary-store.
	secondURL string
	// storeTimeout bounds the store standing still.
	storeTimeout time.Duration
	endpoints    []string
	etcd         cli.Etcd
	logFlags     cli.Log
	output       string
	// fromEtcdctl are the flags etcdctl's environment gave (ETCDCTL_*).
	fromEtcdctl map[string]bool
	codec       cli.Codec
	lock        cli.LockFlags
	log         *slog.Logger
	// progress is stderr: the restore's bar, and the log written above it.
	progress *cli.Progress
	// limits cap the bytes the stores move, for the commands that take
	// --upload-limit and --download-limit (nil: none).
	limits *store.Limits
}

func main() {
	os.Exit(cli.Main("etcd-backup", func() int { return run(os.Args[1:]) }))
}

func run(args []string) int {
	g := &globals{}
	root := &cobra.Command{
		Use:   "etcd-backup",
		Short: "Back up, restore and look after one etcd cluster",
		Long: `etcd-backup keeps an etcd cluster's backups on an object store, in etcd-backup-restore's layout.

"serve" runs the backup sidecar beside one member; the other commands are for operators.
Every flag can also come from the environment (ETCDKIT_<FLAG>, upper case, dashes as
underscores) or from a YAML file given with --config (keys are flag names). The flags
etcdctl has too (--endpoints, --cacert, --cert, --key, --user, --insecure-skip-tls-verify,
--dial-timeout, --command-timeout) come last from etcdctl's ETCDCTL_<FLAG>; an endpoint
without a scheme is https:// with --cacert or --cert, else http://, as in etcdctl.
-o json (etcdctl's -w json) prints JSON whose fields JSON.md describes.

Exit codes:
  0  success
  1  the command failed
  2  the command line is wrong
  3  verify found the backup and the cluster differ; check-upgrade found something to fix first
  4  check-upgrade could not check everything (a member did not answer)`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: g.bind,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.config, "config", "", "YAML file of flag values")
	pf.StringVar(&g.storeURL, "store", "", "where the backups are: file:///path, s3://bucket/prefix, gs://…, azblob://…")
	pf.DurationVar(&g.storeTimeout, "store-timeout", 2*time.Minute, cli.StoreTimeout)
	pf.StringSliceVar(&g.endpoints, "endpoints", []string{"http://127.0.0.1:2379"}, "etcd client URLs")
	g.etcd.Flags(pf)
	g.logFlags.Flags(pf)
	pf.StringVarP(&g.output, "output", "o", "table", "output: table or json")
	cli.Alias(pf, "output", "write-out", "w", "etcdctl")
	g.codec.Flags(pf)
	g.lock.Flags(pf)
	root.AddCommand(serveCmd(g), serverCmd(g), initializeCmd(g), brSnapshotCmd(g), brRestoreCmd(g), copyCmd(g), snapshotCmd(g), listCmd(g), restoreCmd(g), moveCmd(g), getCmd(g), diffCmd(g), undeleteCmd(g), verifyCmd(g), compactCmd(g), defragCmd(g), gcCmd(g), pinCmd(g), unpinCmd(g), deleteCmd(g), extendCmd(g), fleetCmd(g), checkUpgradeCmd(g),
		cli.Version(&g.output), cli.Man())
	cli.Outputs(root)
	cli.Strict(root)
	root.SetArgs(brArgs(args))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return exitCode(root.ExecuteContext(ctx))
}

// exitCode is the exit code of a command's error, said on stderr.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case cli.IsUsage(err):
		fmt.Fprintf(os.Stderr, "etcd-backup: %v (see --help)\n", err)
		return exitUsage
	case errors.Is(err, errMismatch):
		fmt.Fprintf(os.Stderr, "etcd-backup: %v\n", err)
		return exitMismatch
	case errors.Is(err, errUnknown):
		fmt.Fprintf(os.Stderr, "etcd-backup: %v\n", err)
		return exitUnknown
	}
	fmt.Fprintf(os.Stderr, "etcd-backup: %v\n", err)
	return exitFailed
}

// bind fills the flags from the environment, the config file and
// etcdctl's variables, and checks what every command reads, before the
// command runs.
func (g *globals) bind(cmd *cobra.Command, _ []string) error {
	if err := cli.Bind(cmd, "config"); err != nil {
		return cli.Usage(err)
	}
	var warnings []string
	g.fromEtcdctl, warnings = cli.BindEtcdctl(cmd)
	g.endpoints = cli.Schemes(g.endpoints, g.secure())
	if err := g.etcd.Check(); err != nil {
		return cli.Usage(err)
	}
	// Before the command does anything: a format given wrong must
	// not fail it after it deleted or moved something.
	if g.output != "table" && g.output != "json" {
		return cli.Usage(fmt.Errorf("--output (-o, -w) %q: table or json", g.output))
	}
	var err error
	g.progress = cli.NewProgress(os.Stderr)
	if g.log, err = g.logFlags.Logger(g.progress); err != nil {
		return cli.Usage(err)
	}
	for _, w := range warnings {
		g.log.Warn(w)
	}
	return nil
}

// openStore opens --store.
func (g *globals) openStore(ctx context.Context) (store.Store, error) {
	if g.storeURL == "" {
		return nil, cli.Usage(errors.New("--store is required"))
	}
	u, err := g.lock.URL(g.storeURL)
	if err != nil {
		return nil, err
	}
	st, err := cli.OpenStore(ctx, u, g.storeTimeout, g.log)
	return g.limited(st), err
}

// limited is st under the command's bandwidth limits.
func (g *globals) limited(st store.Store) store.Store {
	if st == nil {
		return nil
	}
	if _, local := store.AsLocal(st); local && g.limits != nil {
		g.log.Info("bandwidth limits: not applied to a store on the local file system", "store", st)
	}
	return store.Limited(st, g.limits)
}

// snapshotCodec builds the codec from the flags.
func (g *globals) snapshotCodec() (snapshot.Codec, error) {
	c, err := g.codec.Codec()
	if err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

// source opens --store for a command that reads chains, and fills in what
// every such read needs: the codec, the logger and a progress line, which
// the caller ends with Done once the read returns.
func (g *globals) source(ctx context.Context, src *restore.ReadOptions) (store.Store, *cli.Progress, error) {
	var (
		st  store.Store
		err error
	)
	if g.secondURL == "" {
		st, err = g.openStore(ctx)
	} else {
		// Either site may not answer: the read picks the one that has a
		// whole chain (restore.ReadOptions.Secondary).
		st, src.Secondary, err = g.sites(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	if src.Codec, err = g.snapshotCodec(); err != nil {
		return nil, nil, err
	}
	src.Progress, src.Logger = g.progress.Update, g.log
	return st, g.progress, nil
}

// readState reads the keys opts picks from the backups, as ReadState does,
// with the progress line on while the chain replays.
func (g *globals) readState(ctx context.Context, opts history.StateOptions) (history.State, error) {
	st, p, err := g.source(ctx, &opts.Read)
	if err != nil {
		return history.State{}, err
	}
	defer p.Done()
	return history.ReadState(ctx, st, opts)
}

// sites opens --store and --secondary-store as sites that may not answer.
func (g *globals) sites(ctx context.Context) (first, second store.Store, err error) {
	if g.storeURL == "" {
		return nil, nil, cli.Usage(errors.New("--store is required"))
	}
	if g.secondURL == g.storeURL {
		return nil, nil, cli.Usage(errors.New("--secondary-store is --store: a second site must be another store"))
	}
	if first, err = cli.OpenSite(ctx, g.storeURL, g.storeTimeout, g.log); err != nil {
		return nil, nil, err
	}
	if second, err = cli.OpenSite(ctx, g.secondURL, g.storeTimeout, g.log); err != nil {
		return nil, nil, fmt.Errorf("--secondary-store: %w", err)
	}
	return first, second, nil
}

// secondaryFlag gives a command that reads chains --secondary-store: the
// second site it reads when --store has no whole chain.
func (g *globals) secondaryFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&g.secondURL, "secondary-store", "",
		"a second site holding copies of the backups (serve --secondary-store): read when --store cannot be listed or its newest chain is broken")
}

// client connects to --endpoints.
func (g *globals) client(ctx context.Context) (*clientv3.Client, error) {
	return etcdclient.New(ctx, g.conn(g.endpoints))
}

// conn is the connection to endpoints the flags describe. Every command
// that reaches etcd snapshots, hashes, defragments or promotes: with
// authentication on, those need the root role, checked at start.
func (g *globals) conn(endpoints []string) etcdclient.Config {
	c := g.etcd.Config().With(cli.Schemes(endpoints, g.secure())...)
	c.RequireRoot, c.Logger = true, g.log
	return c
}

// secure says whether an endpoint without a scheme is https: with a CA
// or a client certificate, as in etcdctl.
func (g *globals) secure() bool { return g.etcd.CACert != "" || g.etcd.Cert != "" }

// print writes a command's result v as JSON with --output json (its lists
// [] when empty, never null: JSON.md), or calls table otherwise.
func (g *globals) print(v any, table func(w *tabwriter.Writer)) error {
	if g.output == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}
