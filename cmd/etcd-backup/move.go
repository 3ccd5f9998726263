package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/tenant"
)

// moveRun is move's flags and what it does with them.
type moveRun struct {
	tn        tenantFlags
	opts      tenant.MoveOptions
	sidecar   api.Client
	tokenFile string
}

func moveCmd(g *globals) *cobra.Command {
	var r moveRun
	cmd := &cobra.Command{
		Use:   "move --prefix P --to ENDPOINTS [--rename P=Q] [--endpoints SOURCE] [--sidecar-url URL]",
		Short: "Move a tenant's keys to another cluster: load them from the backups, follow the deltas, cut over on SIGTERM",
		Long: `move copies the keys under --prefix from the backups into the cluster at --to (the
prefix there is made exactly the latest state), then applies each new delta's events
under the prefix as the source's sidecar uploads them.

To cut over, stop the tenant's writers and send SIGTERM or SIGINT: move reads the
source's revision (--endpoints), asks the source's sidecar for a delta now
(--sidecar-url), applies the deltas up to that revision (with --endpoints alone, the
sidecar's next delta is waited for), reports the lag it closed and exits; a second
signal abandons the cut-over. One of --endpoints and --sidecar-url is required. Then point the writers at the
target. Until the cut-over the target's prefix is move's: keys written there are
overwritten by the source's next events.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return r.run(cmd, g) },
	}
	r.tn.keyFlags(cmd)
	f := cmd.Flags()
	f.DurationVar(&r.opts.Poll, "poll", time.Second, "how often the store is listed for new deltas")
	f.DurationVar(&r.opts.CutOverTimeout, "cut-over-timeout", 2*time.Minute, "how long the cut-over may wait for the last delta")
	f.StringVar(&r.sidecar.URL, "sidecar-url", "", "the source's sidecar API (etcd-backup serve): asked for a delta at the cut-over")
	f.StringVar(&r.tokenFile, "sidecar-token-file", "", "the sidecar API's bearer token")
	f.StringVar(&r.sidecar.TLS.CA, "sidecar-cacert", "", "CA bundle that signed the sidecar's certificate, for an https --sidecar-url")
	return cmd
}

func (r *moveRun) run(cmd *cobra.Command, g *globals) error {
	ctx := cmd.Context()
	tn, opts := &r.tn, &r.opts
	if tn.prefix == "" || len(tn.to) == 0 {
		return cli.Usage(errors.New("--prefix and --to are required: the tenant's keys and the cluster they move to"))
	}
	// The source is named for this move: etcdctl's environment
	// (ETCDCTL_ENDPOINTS) points wherever the shell's etcdctl does, the
	// target as likely as the source, and a cut-over that reads the
	// target's revision as the source's loses writes.
	named := cmd.Flags().Changed("endpoints") && !g.fromEtcdctl["endpoints"]
	if !named && r.sidecar.URL == "" {
		return cli.Usage(errors.New("--endpoints (the source cluster) or --sidecar-url (its sidecar) is required: the cut-over waits for the delta that holds the source's last write, and needs one of them to know which that is"))
	}
	if err := tn.check(cmd, "", false); err != nil {
		return err
	}
	opts.Prefix, opts.Rename, opts.WorkDir = tn.prefix, tn.rename, tn.work
	if err := cli.AtLeast("poll", int64(opts.Poll), int64(10*time.Millisecond)); err != nil {
		return err
	}
	conn := g.etcd.Config()
	conn.Logger = g.log
	target, err := etcdclient.New(ctx, conn.With(cli.Schemes(tn.to, g.secure())...))
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer func() { _ = target.Close() }()
	if named {
		source, err := etcdclient.New(ctx, conn.With(g.endpoints...))
		if err != nil {
			return fmt.Errorf("--endpoints (the source): %w", err)
		}
		defer func() { _ = source.Close() }()
		if err := distinct(ctx, source, target); err != nil {
			return err
		}
		opts.CutOverRevision = func(ctx context.Context) (int64, error) {
			resp, err := source.Get(ctx, tn.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				return 0, err
			}
			return resp.Header.Revision, nil
		}
	}
	if err := r.askSidecar(); err != nil {
		return err
	}
	st, p, err := g.source(ctx, &opts.Read)
	if err != nil {
		return err
	}
	opts.Followed = func(mp tenant.MoveProgress) {
		p.Done()
		g.log.Info("move: following", "revision", mp.Revision, "delta", mp.Delta, "events_so_far", mp.Events)
	}
	// The first SIGTERM or SIGINT cuts over; a second aborts the cut-over.
	opts.CutOver = ctx.Done()
	mctx, abort := abortOnSecondSignal(ctx, g)
	defer abort()
	m, err := tenant.Move(mctx, st, target, *opts)
	p.Done()
	if err != nil {
		return err
	}
	out := moveResultOf(tn, m)
	return g.print(out, out.table)
}

// distinct refuses a target that is the source cluster (--to naming the
// --endpoints' cluster), whatever the backups record of it: the move
// would write their older keys over the tenant's.
func distinct(ctx context.Context, source, target *clientv3.Client) error {
	s, err := source.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("--endpoints (the source): %w", err)
	}
	t, err := target.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if s.Header.ClusterId == t.Header.ClusterId {
		return cli.Usage(fmt.Errorf("--to is the source cluster (%x, as --endpoints): a move copies a tenant to another cluster", s.Header.ClusterId))
	}
	return nil
}

// askSidecar makes the cut-over ask the source's sidecar for a delta,
// when --sidecar-url names it.
func (r *moveRun) askSidecar() error {
	if r.sidecar.URL == "" {
		return nil
	}
	if err := errors.Join(cli.URLs("sidecar-url", r.sidecar.URL), r.sidecar.Check()); err != nil {
		return cli.Usage(err)
	}
	if r.tokenFile != "" {
		b, err := os.ReadFile(r.tokenFile)
		if err != nil {
			return cli.Usage(fmt.Errorf("--sidecar-token-file: %w", err))
		}
		r.sidecar.Token = strings.TrimSpace(string(b))
	}
	r.opts.Trigger = func(ctx context.Context) (int64, error) {
		v, err := r.sidecar.Delta(ctx)
		// 409: no events since the last snapshot, nothing to wait for.
		if e := (*api.Error)(nil); errors.As(err, &e) && e.Code == http.StatusConflict {
			return 0, nil
		}
		return v.LastRevision, err
	}
	return nil
}

// abortOnSecondSignal is the move's context: the first SIGTERM or SIGINT
// ends ctx, which cuts over; a second ends this one, which abandons the
// cut-over.
func abortOnSecondSignal(ctx context.Context, g *globals) (context.Context, context.CancelFunc) {
	mctx, abort := context.WithCancel(context.WithoutCancel(ctx))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		defer signal.Stop(sigs)
		for range 2 {
			select {
			case <-sigs:
			case <-mctx.Done():
				return
			}
		}
		g.log.Warn("move: a second signal: the cut-over is abandoned; the target may lack the source's last writes")
		abort()
	}()
	return mctx, abort
}

// moveResult is what move prints.
type moveResult struct {
	CutOverRevision int64    `json:"cut_over_revision"`
	CutOverSeconds  float64  `json:"cut_over_seconds"`
	DeletedInTarget int      `json:"deleted_in_target"`
	Deltas          int      `json:"deltas"`
	Events          int64    `json:"events"`
	FirstStateKeys  int      `json:"first_state_keys"`
	LagClosed       int64    `json:"lag_closed"`
	Leases          int      `json:"leases"`
	LeasesGranted   int      `json:"leases_granted"`
	Prefix          string   `json:"prefix"`
	Revision        int64    `json:"revision"`
	To              []string `json:"to"`
	WrittenUnder    string   `json:"written_under"`

	m tenant.Moved
}

func moveResultOf(tn *tenantFlags, m tenant.Moved) moveResult {
	return moveResult{CutOverRevision: m.CutOverAt, CutOverSeconds: m.CutOverTook.Seconds(), DeletedInTarget: len(m.Loaded.Deleted),
		Deltas: m.Deltas, Events: m.Events, FirstStateKeys: len(m.Loaded.Created) + len(m.Loaded.Overwritten) + len(m.Loaded.Same),
		LagClosed: m.LagClosed, Leases: m.Leases, LeasesGranted: m.LeasesGranted, Prefix: tn.prefix, Revision: m.Revision,
		To: nonNil(tn.to), WrittenUnder: tn.rename.Of(tn.prefix), m: m}
}

func (o moveResult) table(w *tabwriter.Writer) {
	m := o.m
	fmt.Fprintf(w, "moved\t%s to %s under %s\n", o.Prefix, strings.Join(o.To, ","), o.WrittenUnder)
	fmt.Fprintf(w, "first state\t%d keys written, %d kept, %d deleted that the source did not hold\n",
		len(m.Loaded.Created)+len(m.Loaded.Overwritten), len(m.Loaded.Same), len(m.Loaded.Deleted))
	fmt.Fprintf(w, "followed\t%d deltas, %d events of the prefix\n", m.Deltas, m.Events)
	if m.Leases > 0 {
		fmt.Fprintf(w, "leases\t%d in the target under their IDs (%d granted by this move), live for their TTL: the tenant's clients keep them alive from now on\n", m.Leases, m.LeasesGranted)
	}
	fmt.Fprintf(w, "cut over\tat revision %d: %d revisions of lag closed in %s\n", m.Revision, m.LagClosed, m.CutOverTook.Round(time.Millisecond))
	fmt.Fprintf(w, "next\tpoint the tenant's writers at %s\n", strings.Join(o.To, ","))
}
