package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/drill"
	"github.com/etcdkit/etcdkit/fleet"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// scanFlags are the fleet commands' --stale and --price-per-gib-month.
type scanFlags struct {
	opts fleet.ScanOptions
}

func (s *scanFlags) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&s.opts.Stale, "stale", 24*time.Hour, "a prefix without a new snapshot for longer is stale: an orphan, or a sidecar that stopped")
	f.Float64Var(&s.opts.PricePerGiBMonth, "price-per-gib-month", 0.023, "the store's price of a GiB kept a month, for the cost estimate")
}

func (s *scanFlags) check() error {
	if s.opts.PricePerGiBMonth < 0 {
		return cli.Usage(fmt.Errorf("--price-per-gib-month %g: a price is 0 or more", s.opts.PricePerGiBMonth))
	}
	return cli.AtLeast("stale", int64(s.opts.Stale), int64(time.Second))
}

func fleetCmd(g *globals) *cobra.Command {
	var sf scanFlags
	cmd := &cobra.Command{
		Use:   "fleet --store URL-OF-THE-BUCKET",
		Short: "Every cluster's backups in one bucket: RPO, chain, size, restore estimate, last drill, stale prefixes",
		Long: `fleet lists the bucket --store names once (give the bucket, or a prefix above the
clusters' prefixes) and sums up every prefix that holds etcdkit or etcd-backup-restore
backups: the cluster, its newest full and delta (RPO), its latest chain, its bytes and
their monthly cost, an estimated restore time, the newest drill recorded (by its sidecar,
or by fleet drill), and whether it went stale (no new snapshot for longer than --stale).

"fleet serve" serves the same as Prometheus metrics labelled by prefix; "fleet drill"
restores one prefix, or a day's sample, far from its cluster and checks it against the
digest its sidecar's drill recorded.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := sf.check(); err != nil {
				return err
			}
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			sf.opts.Logger = g.log
			f, err := fleet.Scan(ctx, st, sf.opts)
			if err != nil {
				return err
			}
			return g.print(f, func(w *tabwriter.Writer) { printFleet(w, f, sf.opts) })
		},
	}
	sf.flags(cmd)
	cmd.AddCommand(fleetServeCmd(g), fleetDrillCmd(g))
	return cmd
}

func printFleet(w *tabwriter.Writer, f fleet.Fleet, o fleet.ScanOptions) {
	fmt.Fprintf(w, "PREFIX\tCLUSTER\tREVISION\tRPO\tDELTAS\tSIZE\tRESTORE\tDRILL\tPINS\tSTALE\tPROBLEM\n")
	var bytes int64
	var stale, failed []string
	for _, c := range f.Clusters {
		bytes += c.Bytes
		drill := "-"
		if d := c.Drill; d != nil {
			drill = fmt.Sprintf("%s (%s, %s ago)", d.Result, d.Source, ago(f.At, d.At))
			if d.Result != snapshot.DrillOK {
				failed = append(failed, c.Prefix)
			}
		}
		staleMark := ""
		if c.Stale {
			staleMark = "stale: " + ago(f.At, c.LastBackupAt)
			stale = append(stale, c.Prefix)
		}
		cluster := c.ClusterID
		if cluster == "" {
			cluster = "(" + c.Layout + ")"
		}
		prefix := c.Prefix
		if prefix == "" {
			prefix = "(the bucket's root)"
		}
		pins := "-"
		if len(c.Pins) > 0 {
			labels := make([]string, len(c.Pins))
			for i, p := range c.Pins {
				labels[i] = cmp.Or(p.Label, "(no label)")
			}
			pins = strings.Join(labels, ", ")
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", prefix, cluster, c.Revision, (time.Duration(c.RPOSeconds) * time.Second).String(),
			c.ChainDeltas, size(c.Bytes), (time.Duration(c.EstimatedRestoreSeconds) * time.Second).String(), drill, pins, staleMark, c.Problem)
	}
	fmt.Fprintf(w, "\n%d prefixes with backups, %s (about %.2f a month at %g a GiB), listed in %s\n", len(f.Clusters), size(bytes),
		float64(bytes)/(1<<30)*o.PricePerGiBMonth, o.PricePerGiBMonth, f.Took.Round(time.Millisecond))
	if len(stale) > 0 {
		fmt.Fprintf(w, "stale (no new snapshot for %s)\t%d\t%s\n", o.Stale, len(stale), keyList(stale))
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "newest drill not ok\t%d\t%s\n", len(failed), keyList(failed))
	}
}

// ago is how long before now t was, for people.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return d.Round(time.Second).String()
}

func fleetServeCmd(g *globals) *cobra.Command {
	var (
		sf       scanFlags
		listen   string
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve --store URL-OF-THE-BUCKET [--listen ADDR]",
		Short: "Serve fleet's view as Prometheus metrics labelled by prefix, scanned every --interval",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := errors.Join(sf.check(), cli.AtLeast("interval", int64(interval), int64(time.Second))); err != nil {
				return err
			}
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			sf.opts.Logger = g.log
			return fleet.Serve(ctx, fleet.NewExporter(st, sf.opts, interval), listen, func(addr string) {
				g.log.Info("etcd-backup: fleet metrics served", "listen", addr, "store", st, "interval", interval)
			})
		},
	}
	sf.flags(cmd)
	cmd.Flags().StringVar(&listen, "listen", ":9471", "where /metrics is served")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Minute, "how often the bucket is scanned")
	return cmd
}

// fleetDrill is fleet drill's flags and what it does with them.
type fleetDrill struct {
	bandwidth cli.Bandwidth
	splay     time.Duration
	prefix    string
	sample    int
	index     int
	work      string
}

func fleetDrillCmd(g *globals) *cobra.Command {
	var d fleetDrill
	cmd := &cobra.Command{
		Use:   "drill --store URL-OF-THE-BUCKET (--prefix P | --sample N [--index I])",
		Short: "Restore one prefix, or one of the day's sample, far from its cluster and check it against its recorded digest",
		Long: `drill restores the backups under --prefix in a scratch directory and checks the
keyspace against the newest digest the prefix's sidecar recorded equal to its live
cluster (serve --drill-period); without one, the latest chain must replay whole. The
result is recorded beside the backups, where fleet reads it.

With --sample N, the day's sample of N prefixes is drawn (the same for every caller that
day) and the one at --index is drilled: a Kubernetes Indexed Job runs N of these, each
with its JOB_COMPLETION_INDEX, as parallel as it allows (deploy/kubernetes/fleet.yaml).
Exit 3 when the backup does not match its recorded digest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return d.run(cmd, g) },
	}
	cmd.Flags().StringVar(&d.prefix, "prefix", "", "the prefix to drill, under the bucket --store names")
	cmd.Flags().IntVar(&d.sample, "sample", 0, "drill one of the day's sample of this many prefixes")
	cmd.Flags().IntVar(&d.index, "index", 0, "which of the sample (default: $JOB_COMPLETION_INDEX)")
	cmd.Flags().StringVar(&d.work, "work-dir", "", "where the chain is replayed (default: the system's temporary directory)")
	d.bandwidth.Flags(cmd.Flags(), false)
	cmd.Flags().DurationVar(&d.splay, "splay", 0, "wait an offset below this, fixed by the prefix, before the drill starts, so the drills a Job starts at once do not all download at once (0: none)")
	return cmd
}

func (d *fleetDrill) run(cmd *cobra.Command, g *globals) error {
	ctx := cmd.Context()
	if (d.prefix == "") == (d.sample == 0) {
		return cli.Usage(errors.New("give --prefix, or --sample N with --index"))
	}
	if !cmd.Flags().Changed("index") {
		if v := os.Getenv("JOB_COMPLETION_INDEX"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return cli.Usage(fmt.Errorf("JOB_COMPLETION_INDEX %q: %w", v, err))
			}
			d.index = n
		}
	}
	if err := errors.Join(cli.AtLeast("sample", int64(d.sample), 0), cli.AtLeast("index", int64(d.index), 0),
		cli.Durations{{"splay", d.splay, true}}.Check(), d.bandwidth.Check()); err != nil {
		return err
	}
	g.limits = d.bandwidth.Limits()
	bucket, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	if d.sample > 0 {
		if d.prefix, err = d.picked(ctx, g, bucket); err != nil || d.prefix == "" {
			return err
		}
	}
	st, err := store.WithPrefix(bucket, d.prefix)
	if err != nil {
		return cli.Usage(fmt.Errorf("--prefix: %w", err))
	}
	if wait := capture.SplayOffset(fmt.Sprint(st), d.splay); wait > 0 {
		g.log.Info("fleet drill: splayed", "prefix", d.prefix, "wait", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	codec, err := g.snapshotCodec()
	if err != nil {
		return err
	}
	out, err := drill.Far(ctx, st, drill.Options{WorkDir: d.work,
		Read: restore.ReadOptions{Codec: codec, Logger: g.log, Progress: g.progress.Update}})
	g.progress.Done()
	if err != nil {
		return err
	}
	rec := out.Record
	res := fleetDrillResult{Compared: rec.Compared, Error: rec.Error, Keys: rec.Keys, Prefix: d.prefix, Record: rec.Key, Result: rec.Result,
		Revision: rec.Revision, SHA256: rec.SHA256, TookSeconds: rec.TookSeconds}
	switch err := g.print(res, res.table); {
	case err != nil:
		return err
	case rec.Result == snapshot.DrillMismatch:
		return fmt.Errorf("%w: %s", errMismatch, rec.Error)
	case rec.Result != snapshot.DrillOK:
		return fmt.Errorf("fleet drill of %s: %s", d.prefix, rec.Error)
	}
	return nil
}

// picked is the prefix at --index of the day's sample, "" when the sample
// is smaller.
func (d *fleetDrill) picked(ctx context.Context, g *globals, bucket store.Store) (string, error) {
	f, err := fleet.Scan(ctx, bucket, fleet.ScanOptions{Logger: g.log})
	if err != nil {
		return "", err
	}
	var all []string
	for _, c := range f.Clusters {
		all = append(all, c.Prefix)
	}
	picked := fleet.Sample(all, d.sample, time.Now())
	if d.index >= len(picked) {
		g.log.Info("fleet drill: the day's sample is smaller than this index; nothing to drill", "index", d.index, "sample", len(picked))
		return "", nil
	}
	return picked[d.index], nil
}

// fleetDrillResult is what fleet drill prints.
type fleetDrillResult struct {
	Compared    bool                 `json:"compared"`
	Error       string               `json:"error"`
	Keys        int64                `json:"keys"`
	Prefix      string               `json:"prefix"`
	Record      string               `json:"record"`
	Result      snapshot.DrillResult `json:"result"`
	Revision    int64                `json:"revision"`
	SHA256      string               `json:"sha256"`
	TookSeconds float64              `json:"took_seconds"`
}

func (r fleetDrillResult) table(w *tabwriter.Writer) {
	fmt.Fprintf(w, "prefix\t%s\nresult\t%s\n", r.Prefix, r.Result)
	if r.Compared {
		fmt.Fprintf(w, "checked\t%d keys at revision %d against the digest its sidecar recorded\n", r.Keys, r.Revision)
	} else {
		fmt.Fprintf(w, "checked\tthe latest chain replays whole, to revision %d (no digest recorded to compare)\n", r.Revision)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "why\t%s\n", r.Error)
	}
	fmt.Fprintf(w, "recorded\t%s\n", r.Record)
}
