package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// serveRun is serve's flags and what it does with them.
type serveRun struct {
	o                        sidecar.Options
	ret                      retention
	secondaryRetention       string
	bandwidth                cli.Bandwidth
	memberEndpoint, listen   string
	tokenFile                string
	tlsCert, tlsKey, tlsCA   string
	peerTLS                  tlsfiles.Files
	memoryLimit              int64
	fullSchedule, fullFrom   string
	deltaPeriod, gcPeriod    time.Duration
	followInterval, shutdown time.Duration
	profiling, fromOutside   bool
	source                   string
	leases                   leaseFlags
	objects                  backupObjects
	standby                  restore.FollowOptions
}

func serveCmd(g *globals) *cobra.Command {
	var r serveRun
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the backup sidecar beside one etcd member",
		Long: `serve follows its etcd member. While the member leads, this sidecar uploads: full
snapshots on a schedule, deltas in between, retention, scheduled defragmentation and
compaction of the chain. It promotes its member when it is a learner, and serves the
HTTP API (health, readiness, metrics, snapshots, restore, defrag, compact). On SIGTERM
it uploads the pending delta and exits 0.

With --from-outside, one serve backs up a whole cluster it does not run beside (an
external or kubeadm etcd, from a Deployment of one replica): it uploads while a member
of --endpoints names a leader, whichever member leads, streams fulls from the leader
(or a follower with --full-from follower), and leaves the members' membership alone.
A second serve on the same prefix takes over and this one exits 1.

On Kubernetes it keeps the leases etcd-druid reads, made when missing, in POD_NAMESPACE:
the member's (named POD_NAME) with --enable-member-lease-renewal, and the full and delta
snapshot leases with --enable-snapshot-lease-renewal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return r.run(cmd.Context(), g) },
	}
	r.flags(cmd, g)
	return cmd
}

func (r *serveRun) flags(cmd *cobra.Command, g *globals) {
	f := cmd.Flags()
	f.StringVar(&r.source, "source", "etcd", "what --endpoints reach: etcd (a cluster; fulls are its snapshots) or etcd-api (a datastore that serves etcd's KV and Watch API without snapshots, such as kine over SQLite, Postgres or MySQL; fulls are logical: its keys at one revision)")
	f.StringVar(&r.memberEndpoint, "member-endpoint", "", "client URL of this sidecar's own member (default: the first of --endpoints)")
	f.BoolVar(&r.fromOutside, "from-outside", false, "back up the whole cluster --endpoints name from outside it, following whichever member leads, with no member of its own (an external or kubeadm etcd, one serve per cluster)")
	f.StringVar(&r.listen, "listen", "127.0.0.1:8080", "address of the HTTP API")
	f.StringVar(&r.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (read again when it changes)")
	f.StringVar(&r.tlsKey, "tls-key", "", "and this key")
	f.StringVar(&r.tlsCA, "client-ca", "", "accept API clients with a certificate from this CA (mTLS) instead of the token")
	f.StringVar(&r.peerTLS.CA, "sidecar-cacert", "", "CA bundle that signed the other sidecars' certificates, for calls forwarded to them (--peers)")
	f.StringVar(&r.peerTLS.Cert, "sidecar-cert", "", "client certificate presented to the other sidecars, where they take client certificates")
	f.StringVar(&r.peerTLS.Key, "sidecar-key", "", "the client certificate's key")
	f.StringVar(&r.tokenFile, "token-file", "", "file holding the API's bearer token, read again when it changes")
	f.StringVar(&r.fullSchedule, "full-schedule", "0 * * * *", "cron schedule of full snapshots")
	f.DurationVar(&r.o.Backups.Snapshots.FullSplay, "full-splay", 0, fullSplayHelp)
	r.bandwidth.Flags(f, true)
	f.StringVar(&r.fullFrom, "full-from", "member", "which member full snapshots stream from: member (the one the uploader talks to, its leader) or follower (a healthy follower, so a long full does not load the leader; the member when none is)")
	f.DurationVar(&r.deltaPeriod, "delta-period", 20*time.Second, "longest an event waits before it is uploaded in a delta (0: no deltas, full snapshots only)")
	f.Int64Var(&r.memoryLimit, "delta-memory-limit", 100<<20, "bytes of events held in memory before a delta is forced")
	f.DurationVar(&r.gcPeriod, "gc-period", time.Minute, "how often retention runs (0: never)")
	r.ret.flags(cmd)
	f.StringVar(&r.o.Defrag.Schedule, "defrag-schedule", "", "cron schedule of defragmentation (empty: never); the defrag policy skips members below it")
	defragFlags(cmd, &r.o.Defrag.Options)
	f.StringVar(&g.secondURL, "secondary-store", "", "a second site: the uploader copies each snapshot there too, with the retention of --secondary-retention (cloud credentials: add ?env-prefix=SECONDARY_ to read SECONDARY_… variables)")
	f.StringVar(&r.secondaryRetention, "secondary-retention", "same", secondaryRetentionHelp)
	f.StringSliceVar(&r.o.Backups.Bundle, "bundle", nil, "a file or directory written after each full, when it changed, into a restore bundle sealed to --encrypt-to (the kube-apiserver's EncryptionConfiguration and keys, /etc/kubernetes/pki); repeatable; restore --bundle DIR gives them back")
	f.DurationVar(&r.o.Backups.SecondaryPeriod, "secondary-sync-period", time.Hour, "with --secondary-store: how often the second site is checked for snapshots it lacks, besides after each snapshot")
	f.BoolVar(&r.profiling, "enable-profiling", false, "serve Go's runtime profiles at /debug/pprof/, behind the API's token or client certificate")
	f.BoolVar(&r.o.Backups.Snapshots.AllowNewChain, "allow-new-chain", false, "when the store's latest chain is another cluster's, start a new chain under the same prefix instead of refusing to back up")
	f.Int64Var(&r.o.Backups.CompactAfter, "compact-after", 0, "compact the chain into a new full snapshot once its deltas cover this many revisions (0: never)")
	f.DurationVar(&r.o.Backups.MaxRestoreTime, "max-restore-time", 0,
		"compact the chain into a new full snapshot once its estimated restore time on this node passes this (0: no budget)")
	f.DurationVar(&r.o.Backups.DrillPeriod, "drill-period", 0,
		"restore the latest chain in the work dir this often and compare it with the live cluster; metrics etcdkit_drill_* (0: never)")
	f.StringVar(&r.standby.Restore.Member.DataDir, "standby-data-dir", "", "keep a warm standby of the store's newest state beside this data dir, made a data dir at exit, as restore --follow does (empty: none)")
	f.StringVar(&r.standby.Restore.Member.Name, "standby-name", member.DefaultName, "with --standby-data-dir: the standby member's name")
	f.StringSliceVar(&r.standby.Restore.Member.PeerURLs, "standby-peer-urls", []string{member.DefaultPeerURL}, "with --standby-data-dir: the standby member's peer URLs")
	f.StringVar(&r.o.WorkDir, "work-dir", os.TempDir(), "spool of snapshots and compactions")
	f.StringVar(&r.o.API.RestoreRoot, "restore-root", "", "the API may restore data dirs under this directory (empty: no restores)")
	cli.KeepMovedAside(f, &r.o.API.KeepMovedAside)
	f.StringToStringVar(&r.o.API.Peers, "peers", nil, "other members' sidecars, name=URL, where mutating calls are forwarded")
	f.DurationVar(&r.o.Backups.MaxBackupAge, "max-backup-age", 10*time.Minute, "/readyz answers 503 once this sidecar uploads and its backups have failed for longer")
	f.DurationVar(&r.o.Backups.WriteOncePeriod, "write-once-check-period", time.Hour, "how often the uploader asks whether the store refuses deletes, with a probe object under etcdkit/lock-probe/ (/readyz write_once; 0: never)")
	f.BoolVar(&r.o.Backups.RequireWriteOnce, "require-write-once", false, "/readyz answers 503 while the store deletes what it holds (no write-once lock on the bucket)")
	f.DurationVar(&r.followInterval, "follow-interval", 500*time.Millisecond, "how often the member is asked who leads")
	f.DurationVar(&r.shutdown, "shutdown-timeout", 30*time.Second, "bound on draining the API at exit")
	r.leases.flags(f)
	r.objects.flags(f)
	f.BoolVar(&r.leases.memberStatus, "etcd-member-status", false, "write the member's state to its EtcdMember's status (etcd-druid's DEP-04, druid.gardener.cloud/v1alpha1, named POD_NAME in POD_NAMESPACE; deploy/kubernetes/etcdmember-crd.yaml): role transitions, snapshots, last restore and defragmentation, within a second of a change")
	f.StringVar(&r.leases.kubeconfig, "kubeconfig", "", "kubeconfig of the API server the leases are on (default: $KUBECONFIG, the pod's service account, ~/.kube/config)")
}

func (r *serveRun) run(ctx context.Context, g *globals) error {
	if err := errors.Join(r.bandwidth.Check(), cli.Durations{{"full-splay", r.o.Backups.Snapshots.FullSplay, true}}.Check()); err != nil {
		return err
	}
	g.limits = r.bandwidth.Limits()
	st, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	o := &r.o
	if o.Backups.Snapshots.Codec, err = g.snapshotCodec(); err != nil {
		return err
	}
	if o.Backups.Snapshots.Retention, err = r.ret.retention(); err != nil {
		return err
	}
	if err := checkServeFlags(o, r.deltaPeriod, r.gcPeriod, r.followInterval, r.shutdown, r.memoryLimit); err != nil {
		return err
	}
	if o.Backups.Snapshots.Source, err = snapshot.ParseSourceKind(r.source); err != nil {
		return cli.Usage(fmt.Errorf("--source: %w", err))
	}
	// The API serves before etcd runs: a wrapper in --init=sidecar waits
	// for it to prepare etcd's data dir.
	conn := g.conn(g.endpoints)
	conn.AllowUnreachable = true
	// kine serves no auth API: there is no root role to check.
	conn.RequireRoot = o.Backups.Snapshots.Source == snapshot.SourceEtcd
	etcd, err := etcdclient.New(ctx, conn)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.Close() }()
	if err := r.outside(); err != nil {
		return err
	}
	if r.memberEndpoint == "" && !r.fromOutside {
		r.memberEndpoint = g.endpoints[0]
	}
	if r.fromOutside {
		warnFewEndpoints(ctx, etcd, g.endpoints, g.log)
	}
	if err := r.secondary(ctx, g); err != nil {
		return err
	}
	o.Client, o.Endpoint, o.Backups.Store, o.Membership.Conn, o.Logger = etcd, r.memberEndpoint, st, conn, g.log
	if err := r.snapshots(etcd, conn); err != nil {
		return err
	}
	o.Membership.Follow = member.FollowOptions{Interval: r.followInterval}
	o.API.PeerTLS = r.peerTLS
	o.API.PeerTLS.Names = tlsfiles.Names{CA: "--sidecar-cacert", Cert: "--sidecar-cert", Key: "--sidecar-key"}
	so, err := r.serveOptions(g)
	if err != nil {
		return err
	}
	if r.standby.Restore.Member.DataDir != "" {
		o.Standby = &r.standby
	}
	o.OnOperation = r.leases.onOperation
	sc, err := sidecar.New(*o)
	if err != nil {
		return cli.Usage(err)
	}
	// The leases are this sidecar's own: it makes them when missing.
	hb, err := r.leases.heartbeat(sc.Registry(), os.Getenv("POD_NAME"), o.Backups.Snapshots.DeltaPeriod, true, g.log)
	if err != nil {
		return err
	}
	runErr := withHeartbeat(ctx, hb, sc, func(ctx context.Context) error {
		return r.objects.run(ctx, r.leases.kubeconfig, st, g.storeURL, sc, g.log, func(ctx context.Context) error {
			if r.fromOutside {
				// Two serves outside one cluster would displace each
				// other in turn: the one displaced exits.
				return untilDisplaced(ctx, sc, g.storeURL, "serve", func(ctx context.Context) error { return sc.Serve(ctx, so) })
			}
			return sc.Serve(ctx, so)
		})
	})
	g.log.Info("etcd-backup: stopped")
	return runErr
}

// outside checks --from-outside against the flags of a member's own
// sidecar: a serve outside the cluster has no member to name, promote or
// keep a lease or an EtcdMember for.
func (r *serveRun) outside() error {
	if !r.fromOutside {
		return nil
	}
	r.o.Backups.FromOutside = true
	for flag, set := range map[string]bool{
		"--member-endpoint": r.memberEndpoint != "", "--enable-member-lease-renewal": r.leases.member,
		"--etcd-member-status": r.leases.memberStatus, "--standby-data-dir": r.standby.Restore.Member.DataDir != "",
	} {
		if set {
			return cli.Usage(fmt.Errorf("%s names this sidecar's own member, and --from-outside backs the cluster up with none", flag))
		}
	}
	return nil
}

// warnFewEndpoints says when the cluster has members --endpoints does not
// name: a serve outside the cluster follows only the members it is given,
// and stops backing up when they stop answering while the others still
// run. A cluster that does not answer now is not asked again.
func warnFewEndpoints(ctx context.Context, etcd *clientv3.Client, endpoints []string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := etcd.MemberList(ctx)
	if err != nil || len(list.Members) <= len(endpoints) {
		return
	}
	var urls []string
	for _, m := range list.Members {
		urls = append(urls, m.ClientURLs...)
	}
	log.Warn(fmt.Sprintf("--endpoints names %d of the cluster's %d members: the backups stop when those stop answering, while the others still run; give every member's client URL", len(endpoints), len(list.Members)),
		"members", strings.Join(urls, ","))
}

// secondary opens the second site, which may not answer yet.
func (r *serveRun) secondary(ctx context.Context, g *globals) error {
	if g.secondURL == "" {
		if r.secondaryRetention != "same" {
			return cli.Usage(errors.New("--secondary-retention needs --secondary-store: it is the second site's"))
		}
		return nil
	}
	if g.secondURL == g.storeURL {
		return cli.Usage(errors.New("--secondary-store is --store: a second site must be another store"))
	}
	var err error
	if r.o.Backups.SecondaryRetention, r.o.Backups.SecondaryKeepsAll, err = siteRetention("secondary-retention", r.secondaryRetention); err != nil {
		return err
	}
	// A second site that does not answer now is copied to later: it must
	// not keep the sidecar from starting.
	if r.o.Backups.Secondary, err = cli.OpenSite(ctx, g.secondURL, g.storeTimeout, g.log); err != nil {
		return fmt.Errorf("--secondary-store: %w", err)
	}
	r.o.Backups.Secondary = g.limited(r.o.Backups.Secondary)
	return nil
}

// snapshots fills the Snapshotter's schedule from the flags.
func (r *serveRun) snapshots(etcd *clientv3.Client, conn etcdclient.Config) error {
	so := &r.o.Backups.Snapshots
	// On the command line 0 is off; in the options, capture.Off.
	so.FullSchedule, so.DeltaPeriod, so.DeltaMemoryLimit = r.fullSchedule, offIfZero(r.deltaPeriod), r.memoryLimit
	so.Now = clock
	so.RetentionPeriod = offIfZero(r.gcPeriod)
	so.OnResult = r.objects.onResult
	switch r.fullFrom {
	case "member":
		if r.fromOutside {
			so.FullFrom = capture.FromLeader(etcd, conn)
		}
	case "follower":
		so.FullFrom = capture.FromFollower(etcd, conn)
	default:
		return cli.Usage(fmt.Errorf("--full-from %q: want member or follower", r.fullFrom))
	}
	return nil
}

// serveOptions are the API server's: its address, TLS and callers.
func (r *serveRun) serveOptions(g *globals) (sidecar.ServeOptions, error) {
	so := sidecar.ServeOptions{Listen: r.listen, Auth: sidecar.Auth{TokenFile: r.tokenFile}, ShutdownTimeout: r.shutdown, Profiling: r.profiling,
		OnListening: func(addr string) {
			member := r.memberEndpoint
			if r.fromOutside {
				member = "none: the cluster at " + strings.Join(g.endpoints, ",") + ", from outside it"
			}
			g.log.Info("etcd-backup: serving", "listen", addr, "member", member, "store", g.storeURL)
		}}
	switch {
	case r.tlsCert != "" || r.tlsKey != "":
		files := tlsfiles.Files{CA: r.tlsCA, Cert: r.tlsCert, Key: r.tlsKey, Names: tlsfiles.Names{CA: "--client-ca", Cert: "--tls-cert", Key: "--tls-key"}}
		var err error
		if so.TLS, err = files.NewServer(g.log); err != nil {
			return so, cli.Usage(err)
		}
		so.Auth.ClientCerts = r.tlsCA != ""
	case r.tlsCA != "":
		return so, cli.Usage(errors.New("--client-ca needs --tls-cert and --tls-key"))
	}
	if err := so.Auth.Check(); err != nil {
		return so, cli.Usage(err)
	}
	return so, nil
}

// checkServeFlags refuses values serve cannot run with, naming the valid
// range.
func checkServeFlags(o *sidecar.Options, deltaPeriod, gcPeriod, followInterval, shutdown time.Duration, memoryLimit int64) error {
	if err := (cli.Durations{
		{"delta-period", deltaPeriod, true}, {"gc-period", gcPeriod, true}, {"follow-interval", followInterval, false},
		{"shutdown-timeout", shutdown, false}, {"max-backup-age", o.Backups.MaxBackupAge, false},
		{"defrag-pause", o.Defrag.Options.Pause, true}, {"defrag-timeout", o.Defrag.Options.Timeout, false},
		{"max-restore-time", o.Backups.MaxRestoreTime, true}, {"drill-period", o.Backups.DrillPeriod, true}, {"write-once-check-period", o.Backups.WriteOncePeriod, true},
	}).Check(); err != nil {
		return err
	}
	if err := cli.AtLeast("delta-memory-limit", memoryLimit, 1); err != nil {
		return err
	}
	if err := cli.AtLeast("compact-after", o.Backups.CompactAfter, 0); err != nil {
		return err
	}
	if err := cli.AtLeast("keep-moved-aside", int64(o.API.KeepMovedAside), -1); err != nil {
		return err
	}
	for name, u := range o.API.Peers {
		if err := cli.URLs("peers "+name, u); err != nil {
			return err
		}
	}
	return nil
}

// offIfZero maps a flag's 0 (off) to capture.Off (the options' 0 is the
// default).
func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return capture.Off
	}
	return d
}
