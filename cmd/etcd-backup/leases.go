package main

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/heartbeat"
	"github.com/etcdkit/etcdkit/internal/buildinfo"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/store"
)

// leaseFlags are etcd-backup-restore's flags of the Kubernetes leases,
// which serve, server and compact take alike.
type leaseFlags struct {
	member, snapshots   bool
	fullName, deltaName string
	period              time.Duration
	// kubeconfig: "" finds the API server as a pod does.
	kubeconfig string
	// memberStatus writes the member's EtcdMember status (DEP-04):
	// serve's --etcd-member-status, server's ETCDKIT_ETCD_MEMBER_STATUS.
	memberStatus bool
	// ran forwards the sidecar's operations to the heartbeat once it
	// exists (sidecar.Options.OnOperation is set before it).
	ran atomic.Pointer[heartbeat.Heartbeat]
}

// onOperation is the sidecar's OnOperation: its restores and
// defragmentations go into the EtcdMember's status.
func (l *leaseFlags) onOperation(op sidecar.Operation) {
	if hb := l.ran.Load(); hb != nil {
		end := time.Now()
		hb.Ran(heartbeat.Operation{Name: op.Name, Start: end.Add(-op.Took), End: end, Err: op.Err})
	}
}

func (l *leaseFlags) flags(fs *pflag.FlagSet) {
	l.snapshotFlags(fs)
	fs.BoolVar(&l.member, "enable-member-lease-renewal", false, "renew the member's Kubernetes lease (named POD_NAME, in POD_NAMESPACE) every --k8s-heartbeat-duration")
	fs.DurationVar(&l.period, "k8s-heartbeat-duration", 30*time.Second, "period of the member lease's renewal")
}

// snapshotFlags are the snapshot leases' flags alone, which compact takes.
func (l *leaseFlags) snapshotFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&l.snapshots, "enable-snapshot-lease-renewal", false, "write the revisions of the latest full and delta snapshots to their Kubernetes leases (in POD_NAMESPACE)")
	fs.StringVar(&l.fullName, "full-snapshot-lease-name", "full-snapshot-revisions", "full snapshot lease name")
	fs.StringVar(&l.deltaName, "delta-snapshot-lease-name", "delta-snapshot-revisions", "delta snapshot lease name")
}

// leases is a writer of the leases in POD_NAMESPACE, on the API server
// the kubeconfig or the pod names; it makes none. What the Kubernetes
// client logs goes to log.
func (l *leaseFlags) leases(log *slog.Logger) (*heartbeat.Leases, error) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return nil, cli.Usage(errors.New("POD_NAMESPACE is not set: it is the namespace of the Kubernetes leases " +
			"(set it from the pod's metadata.namespace)"))
	}
	cfg, err := heartbeat.RESTConfig(l.kubeconfig)
	if err != nil {
		return nil, cli.Usage(err)
	}
	klog.SetSlogLogger(log)
	c, err := heartbeat.NewClient(cfg, "etcd-backup/"+buildinfo.Read().Version, 30*time.Second)
	if err != nil {
		return nil, err
	}
	return &heartbeat.Leases{Client: c, Namespace: ns}, nil
}

// heartbeat is the lease keeper the flags ask for, nil when they ask for
// none. memberLease names the member lease; create makes missing leases
// (etcd-druid makes its own). deltaPeriod is the delta snapshots'
// (negative: none, and no delta lease).
func (l *leaseFlags) heartbeat(reg prometheus.Registerer, memberLease string, deltaPeriod time.Duration, create bool, log *slog.Logger) (*heartbeat.Heartbeat, error) {
	if !l.member && !l.snapshots && !l.memberStatus {
		return nil, nil
	}
	if err := (cli.Durations{{"k8s-heartbeat-duration", l.period, false}}).Check(); err != nil {
		return nil, err
	}
	w, err := l.leases(log)
	if err != nil {
		return nil, err
	}
	o := heartbeat.Options{Client: w.Client, Namespace: w.Namespace, Period: l.period, DeltaPeriod: deltaPeriod, Create: create, Registry: reg, Logger: log}
	if l.member {
		if memberLease == "" {
			return nil, cli.Usage(errors.New("--enable-member-lease-renewal: POD_NAME is not set: it names the member lease"))
		}
		o.MemberLease = memberLease
	}
	if l.snapshots {
		o.FullLease = l.fullName
		if deltaPeriod > 0 {
			o.DeltaLease = l.deltaName
		}
	}
	if l.memberStatus {
		if memberLease == "" {
			return nil, cli.Usage(errors.New("the EtcdMember's status: POD_NAME is not set: it names the member"))
		}
		cfg, err := heartbeat.RESTConfig(l.kubeconfig)
		if err != nil {
			return nil, cli.Usage(err)
		}
		if o.StatusClient, err = heartbeat.NewStatusClient(cfg, "etcd-backup/"+buildinfo.Read().Version, 30*time.Second); err != nil {
			return nil, err
		}
		o.EtcdMember = memberLease
	}
	hb, err := heartbeat.New(o)
	if err != nil {
		return nil, cli.Usage(err)
	}
	l.ran.Store(hb)
	return hb, nil
}

// backupObjects is serve's --backup-objects: the store's catalog as
// EtcdSnapshot objects in POD_NAMESPACE, and the EtcdBackups answered.
type backupObjects struct {
	cluster string
	// keeper is set once the objects are kept, for the sidecar's
	// OnResult, which is set before it exists.
	keeper atomic.Pointer[heartbeat.Backups]
}

func (b *backupObjects) flags(fs *pflag.FlagSet) {
	fs.StringVar(&b.cluster, "backup-objects", "", "keep an EtcdSnapshot object per full snapshot in the store (its chain summed up: revisions, size, drill, lock; deleted when retention deletes the full) and take the full each EtcdBackup asks for, in POD_NAMESPACE, as the cluster of this name (backup.etcdkit.io, deploy/kubernetes/etcdsnapshot-crd.yaml); \"\": none")
}

// onResult tells the keeper a snapshot landed.
func (b *backupObjects) onResult(capture.Result) {
	if k := b.keeper.Load(); k != nil {
		k.Changed()
	}
}

// run keeps the objects beside serve until ctx ends; without
// --backup-objects it runs serve alone.
func (b *backupObjects) run(ctx context.Context, kubeconfig string, st store.Store, storeURL string, sc *sidecar.Sidecar, log *slog.Logger, serve func(context.Context) error) error {
	if b.cluster == "" {
		return serve(ctx)
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return cli.Usage(errors.New("--backup-objects: POD_NAMESPACE is not set: it is the namespace of the objects (set it from the pod's metadata.namespace)"))
	}
	cfg, err := heartbeat.RESTConfig(kubeconfig)
	if err != nil {
		return cli.Usage(err)
	}
	klog.SetSlogLogger(log)
	c, err := heartbeat.NewObjectClient(cfg, "etcd-backup/"+buildinfo.Read().Version, 30*time.Second)
	if err != nil {
		return err
	}
	k, err := heartbeat.NewBackups(heartbeat.BackupsOptions{Client: c, Namespace: ns, Cluster: b.cluster, Store: st, StoreURL: shownURL(storeURL), Logger: log})
	if err != nil {
		return cli.Usage(err)
	}
	b.keeper.Store(k)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Run(ctx, sc)
	}()
	err = serve(ctx)
	cancel()
	<-done
	return err
}

// shownURL is a store URL without the credentials it may carry.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// withHeartbeat runs hb beside serve until ctx ends; serve's error is the
// result.
func withHeartbeat(ctx context.Context, hb *heartbeat.Heartbeat, src heartbeat.Source, serve func(context.Context) error) error {
	if hb == nil {
		return serve(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hb.Run(ctx, src)
	}()
	err := serve(ctx)
	cancel()
	<-done
	return err
}
