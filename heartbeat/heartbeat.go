package heartbeat

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/member"
)

// Source is what the leases report on: a member's sidecar.
type Source interface {
	// Member is what the member last said of itself, or why it did not
	// answer.
	Member() (member.Self, error)
	// PeerURLs are the member's peer URLs as the cluster has them.
	PeerURLs(ctx context.Context) ([]string, error)
	// Uploader says whether this sidecar writes the backups now: only the
	// uploader reports them.
	Uploader() bool
	// SnapshotStatus is the state of the backups it writes.
	SnapshotStatus() capture.Status
}

// Options configures a Heartbeat. Client and Namespace are required, and
// at least one lease name.
type Options struct {
	Client    Client
	Namespace string
	// MemberLease is the member lease's name (etcd-druid's: the member's
	// name). "": no member lease.
	MemberLease string
	// FullLease and DeltaLease are the snapshot leases' names. "": that
	// lease is not written.
	FullLease, DeltaLease string
	// Period between two renewals of the member lease. Default 30 s
	// (etcd-backup-restore's --k8s-heartbeat-duration).
	Period time.Duration
	// DeltaPeriod: the delta lease is renewed this often while the
	// backups succeed, as etcd-backup-restore renews it at every delta
	// period (etcd-druid takes a delta lease older than two periods for
	// failing backups). Default 20 s.
	DeltaPeriod time.Duration
	// EtcdMember, when set, is the name of the member's EtcdMember object
	// (etcd-druid's DEP-04, druid.gardener.cloud/v1alpha1, in Namespace),
	// whose status is written through StatusClient: the member's ID,
	// cluster and role transitions, the snapshots it uploaded, its last
	// restore and defragmentation (Ran). Every Period, and within a second
	// of a change. "": none.
	EtcdMember   string
	StatusClient StatusClient
	// Create makes missing leases (and the EtcdMember); false: they are
	// etcd-druid's to make.
	Create bool
	// Timeout bounds each call to the API server. Default 30 s.
	Timeout time.Duration
	// Registry receives the metrics; nil: none.
	Registry prometheus.Registerer
	// Logger: nil discards.
	Logger *slog.Logger
}

// Lease kinds, the metrics' label values.
const (
	KindMember = "member"
	KindFull   = "full-snapshot"
	KindDelta  = "delta-snapshot"
	// KindEtcdMember labels the EtcdMember's status writes.
	KindEtcdMember = "etcd-member"
)

// Heartbeat keeps a member's leases.
type Heartbeat struct {
	o        Options
	leases   *Leases
	log      *slog.Logger
	failures *prometheus.CounterVec
	renewed  *prometheus.GaugeVec

	// mu guards the operations Ran recorded.
	mu              sync.Mutex
	restoration     *Restoration
	defragmentation *Defragmentation
}

// New checks the options and registers the metrics.
func New(o Options) (*Heartbeat, error) {
	if o.Client == nil || o.Namespace == "" {
		return nil, errors.New("heartbeat: a Kubernetes client and a namespace (POD_NAMESPACE) are required")
	}
	if o.MemberLease == "" && o.FullLease == "" && o.DeltaLease == "" && o.EtcdMember == "" {
		return nil, errors.New("heartbeat: no lease to renew")
	}
	if o.EtcdMember != "" && o.StatusClient == nil {
		return nil, errors.New("heartbeat: the EtcdMember's status needs a StatusClient")
	}
	if o.Period <= 0 {
		o.Period = 30 * time.Second
	}
	if o.DeltaPeriod <= 0 {
		o.DeltaPeriod = 20 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	h := &Heartbeat{
		o:      o,
		leases: &Leases{Client: o.Client, Namespace: o.Namespace, Create: o.Create},
		log:    logger(o.Logger),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdkit_heartbeat_failures_total",
			Help: "Writes of a Kubernetes lease that failed, by lease: member, full-snapshot, delta-snapshot (and etcd-member: the EtcdMember's status).",
		}, []string{"lease"}),
		renewed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_heartbeat_renewed_timestamp_seconds",
			Help: "When a Kubernetes lease was last written, by lease: member, full-snapshot, delta-snapshot (and etcd-member: the EtcdMember's status).",
		}, []string{"lease"}),
	}
	for kind, name := range h.names() {
		if name != "" {
			h.failures.WithLabelValues(kind)
			h.renewed.WithLabelValues(kind)
		}
	}
	if o.Registry != nil {
		for _, c := range []prometheus.Collector{h.failures, h.renewed} {
			if err := o.Registry.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return h, nil
}

func (h *Heartbeat) names() map[string]string {
	return map[string]string{KindMember: h.o.MemberLease, KindFull: h.o.FullLease, KindDelta: h.o.DeltaLease, KindEtcdMember: h.o.EtcdMember}
}

// Run keeps the leases until ctx ends.
func (h *Heartbeat) Run(ctx context.Context, src Source) {
	h.log.Info("heartbeat: renewing Kubernetes leases", "namespace", h.o.Namespace, "member", h.o.MemberLease,
		"full", h.o.FullLease, "delta", h.o.DeltaLease, "period", h.o.Period)
	var wg sync.WaitGroup
	if h.o.MemberLease != "" {
		wg.Go(func() { h.members(ctx, src) })
	}
	if h.o.FullLease != "" || h.o.DeltaLease != "" {
		wg.Go(func() { h.snapshots(ctx, src) })
	}
	if h.o.EtcdMember != "" {
		wg.Go(func() { h.etcdMember(ctx, src) })
	}
	wg.Wait()
}

// members renews the member lease every period while the member answers
// (a lease that goes stale is how etcd-druid learns that a member is
// gone), and at once when what it says changes: a new leader, or a new
// member ID after a rejoin.
func (h *Heartbeat) members(ctx context.Context, src Source) {
	r := &memberRenewal{h: h, src: src, w: h.writer(KindMember, h.o.Period)}
	tick := time.NewTicker(min(time.Second, h.o.Period))
	defer tick.Stop()
	for {
		r.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// memberRenewal is the member lease's state between two ticks.
type memberRenewal struct {
	h       *Heartbeat
	src     Source
	w       *writer
	peerTLS *bool
	silent  bool
	written string    // the holder last tried
	due     time.Time // the next renewal
}

func (r *memberRenewal) once(ctx context.Context) {
	self, err := r.src.Member()
	if err != nil || self.ID == 0 {
		// Not yet asked, or not answering: asked again at the next tick.
		if err != nil && !r.silent {
			r.h.log.Info("heartbeat: the member does not answer; its lease is not renewed until it does", "error", err)
			r.silent = true
		}
		return
	}
	r.silent = false
	m := Member{ID: self.ID, ClusterID: self.ClusterID, Leader: self.IsLeader()}
	now := time.Now()
	if now.Before(r.due) && m.HolderIdentity() == r.written {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.h.o.Timeout)
	urls, err := r.src.PeerURLs(cctx)
	cancel()
	if err == nil && len(urls) > 0 {
		// Kept when the cluster cannot say: the URLs rarely change.
		tls := allHTTPS(urls)
		r.peerTLS = &tls
	}
	m.PeerTLS = r.peerTLS
	// Tried again after the period, or the backoff after a failure; at
	// once only when what it says changes again.
	r.written, r.due = m.HolderIdentity(), now.Add(r.h.o.Period)
	if err := r.w.write(ctx, func(ctx context.Context) error { return r.h.leases.RenewMember(ctx, r.h.o.MemberLease, m) }); err != nil {
		r.due = now.Add(r.w.backoff)
	}
}

func allHTTPS(urls []string) bool {
	for _, s := range urls {
		if u, err := url.Parse(s); err != nil || u.Scheme != "https" {
			return false
		}
	}
	return true
}

// snapshots keeps the snapshot leases while this sidecar uploads: the
// full one once per new full snapshot, the delta one every delta period
// while the backups succeed and at once after a new delta.
func (h *Heartbeat) snapshots(ctx context.Context, src Source) {
	// A failed full lease is tried again within a minute, as
	// etcd-backup-restore does; a delta lease within a delta period.
	full, delta := h.writer(KindFull, time.Minute), h.writer(KindDelta, h.o.DeltaPeriod)
	var (
		fullDone   string // the key of the full snapshot written
		deltaDone  = int64(-1)
		deltaDue   time.Time
		fullRetry  time.Time
		deltaRetry time.Time
	)
	// Fine enough that the delta lease is never much older than a delta
	// period: etcd-druid takes two for failing backups.
	tick := time.NewTicker(min(time.Second, max(h.o.DeltaPeriod/4, 10*time.Millisecond)))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !src.Uploader() {
			deltaDue = time.Time{}
			continue
		}
		st := src.SnapshotStatus()
		now := time.Now()
		if f := st.LastFull; h.o.FullLease != "" && f.Key != "" && f.Key != fullDone && !now.Before(fullRetry) {
			if full.write(ctx, func(ctx context.Context) error {
				return h.leases.UpdateFull(ctx, h.o.FullLease, f.LastRevision, f.Created)
			}) == nil {
				fullDone = f.Key
			} else {
				fullRetry = now.Add(full.backoff)
			}
		}
		// Backups succeed: the store's chain was read and no attempt has
		// failed since.
		healthy := st.Running && st.Failures == 0 && st.LastFull.Key != ""
		rev := st.LastDelta.LastRevision
		due := !now.Before(deltaDue) || rev > deltaDone
		if h.o.DeltaLease != "" && healthy && due && !now.Before(deltaRetry) {
			if delta.write(ctx, func(ctx context.Context) error {
				return h.leases.UpdateDelta(ctx, h.o.DeltaLease, rev)
			}) == nil {
				deltaDone, deltaDue = rev, now.Add(h.o.DeltaPeriod)
			} else {
				deltaRetry = now.Add(delta.backoff)
			}
		}
	}
}

// writer writes one lease, counting, logging and backing off failures:
// from a second, doubling up to most.
type writer struct {
	h       *Heartbeat
	kind    string
	most    time.Duration
	fails   int
	backoff time.Duration
}

func (h *Heartbeat) writer(kind string, most time.Duration) *writer {
	return &writer{h: h, kind: kind, most: max(most, time.Second)}
}

func (w *writer) write(ctx context.Context, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, w.h.o.Timeout)
	defer cancel()
	err := f(cctx)
	if err != nil {
		if ctx.Err() != nil {
			// Stopping, not failing.
			return err
		}
		w.fails++
		w.backoff = min(max(2*w.backoff, time.Second), w.most)
		w.h.failures.WithLabelValues(w.kind).Inc()
		w.h.log.Warn("heartbeat: lease not written; trying again", "lease", w.kind, "failures", w.fails, "in", w.backoff, "error", err)
		return err
	}
	if w.fails > 0 {
		w.h.log.Info("heartbeat: lease written again", "lease", w.kind, "after_failures", w.fails)
	} else {
		w.h.log.Debug("heartbeat: lease written", "lease", w.kind)
	}
	w.fails, w.backoff = 0, 0
	w.h.renewed.WithLabelValues(w.kind).SetToCurrentTime()
	return nil
}
