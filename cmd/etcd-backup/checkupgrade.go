package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/upgrade"
)

func checkUpgradeCmd(g *globals) *cobra.Command {
	var (
		dataDir, walDir, etcdConfig, workDir string
		backup                               bool
		streamTimeout                        time.Duration
		to                                   etcdversion.Version
	)
	cmd := &cobra.Command{
		Use:   "check-upgrade [--to RELEASE] [--data-dir DIR | --backup]",
		Short: "Say whether the cluster may step to the next etcd release (or --to one), and what to fix first",
		Long: `check-upgrade checks a step of the etcd release a cluster runs, one minor at a time as
etcd allows: up to the next minor by default, or --to a release (one minor down is a
step through etcd's downgrade API). It names the release it found, and checks:
every member runs one release; the step's own rules: before 3.6, every member runs
3.5.26 or later and no zombie member (one the v3 store lists and etcd 3.5's v2
membership does not); down, the downgrade is enabled (etcdctl downgrade enable) and
each member migrated its storage; the bbolt freelist type etcd-druid sets (array).
It reads the live cluster at --endpoints, a stopped member's --data-dir (whether the
target release starts on it), or with --backup the newest full of --store, and
changes nothing. The verdict is safe (exit 0), fix-first (exit 3) or unknown (exit
4: a member did not answer, or a data dir cannot tell its release).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if dataDir != "" && backup {
				return cli.Usage(fmt.Errorf("--data-dir and --backup: check one of them"))
			}
			o, err := stepOptions(etcdConfig)
			if err != nil {
				return err
			}
			o.To = to
			var r upgrade.Report
			switch {
			case dataDir != "":
				r, err = upgrade.DataDir(ctx, dataDir, walDir, o)
			case backup:
				r, err = g.checkBackup(ctx, workDir, o)
			default:
				cl, cerr := g.client(ctx)
				if cerr != nil {
					return cerr
				}
				defer func() { _ = cl.Close() }()
				r, err = upgrade.Live(ctx, cl, upgrade.LiveOptions{Step: o, WorkDir: workDir, StreamTimeout: streamTimeout})
			}
			if err != nil {
				return err
			}
			if err := g.print(r, func(w *tabwriter.Writer) { upgradeTable(w, r) }); err != nil {
				return err
			}
			switch r.Verdict {
			case upgrade.FixFirst:
				return fmt.Errorf("%w: fix what it names before the upgrade", errMismatch)
			case upgrade.Unknown:
				return fmt.Errorf("%w: %s", errUnknown, "the findings marked unread say what is missing (a member that did not answer, a release that cannot be told, no step to check)")
			}
			return nil
		},
	}
	f := cmd.Flags()
	cli.Release(f, &to, "to", "the release to step to: one minor up or down (default: the next minor)")
	f.StringVar(&dataDir, "data-dir", "", "check a stopped member's data dir instead of the live cluster")
	f.StringVar(&walDir, "wal-dir", "", "the data dir's WAL, when etcd keeps it apart (wal-dir)")
	f.BoolVar(&backup, "backup", false, "check the newest full snapshot of --store instead of the live cluster")
	f.StringVar(&etcdConfig, "etcd-config", os.Getenv("ETCD_CONF"), "the members' etcd.conf.yaml, for backend-bbolt-freelist-type (default $ETCD_CONF)")
	f.StringVar(&workDir, "work-dir", "", "where a database is held while it is read (default the system's temporary dir)")
	f.DurationVar(&streamTimeout, "stream-timeout", 10*time.Minute, "bound on streaming the live cluster's database for its v3 membership")
	return cmd
}

// stepOptions are the members' settings a step checks, read from the
// etcd.conf.yaml the members run with, none without one.
func stepOptions(etcdConfig string) (upgrade.Options, error) {
	if etcdConfig == "" {
		return upgrade.Options{}, nil
	}
	b, err := os.ReadFile(etcdConfig)
	if err != nil {
		return upgrade.Options{}, cli.Usage(fmt.Errorf("--etcd-config: %w", err))
	}
	conf := map[string]any{}
	if err := yaml.Unmarshal(b, &conf); err != nil {
		return upgrade.Options{}, cli.Usage(fmt.Errorf("--etcd-config %s: %w", etcdConfig, err))
	}
	return upgrade.ConfigOptions(conf), nil
}

// upgradeTable prints a report a finding a row, each with its fix.
func upgradeTable(w *tabwriter.Writer, r upgrade.Report) {
	fmt.Fprintf(w, "%s\t%s\n", r.Source, r.Verdict)
	if r.From != "" || r.To != "" {
		fmt.Fprintf(w, "step\tfrom %s\tto %s\n", orUnknown(r.From), orUnknown(r.To))
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.Status, f.Check, f.Subject, f.Detail)
		if f.Fix != "" {
			fmt.Fprintf(w, "\t\t\tfix: %s\n", f.Fix)
		}
	}
}

// checkBackup checks the newest full of the store.
func (g *globals) checkBackup(ctx context.Context, workDir string, o upgrade.Options) (upgrade.Report, error) {
	st, err := g.openStore(ctx)
	if err != nil {
		return upgrade.Report{}, err
	}
	codec, err := g.snapshotCodec()
	if err != nil {
		return upgrade.Report{}, err
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return upgrade.Report{}, err
	}
	chain, err := cat.Latest()
	if err != nil {
		return upgrade.Report{}, err
	}
	rc, err := snapshot.Open(ctx, st, chain.Full, codec)
	if err != nil {
		return upgrade.Report{}, err
	}
	defer func() { _ = rc.Close() }()
	f, err := os.CreateTemp(workDir, "check-upgrade-*.db")
	if err != nil {
		return upgrade.Report{}, fmt.Errorf("--work-dir: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return upgrade.Report{}, fmt.Errorf("snapshot %s: %w", chain.Full.Key, err)
	}
	return upgrade.Database(ctx, f.Name(), "backup "+chain.Full.Key, o)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
