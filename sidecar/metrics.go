package sidecar

import (
	"cmp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/internal/buildinfo"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
)

// metrics are the sidecar's Prometheus metrics, all prefixed etcdkit_.
type metrics struct {
	snapshotDuration *prometheus.HistogramVec
	snapshotSize     *prometheus.GaugeVec
	lastRevision     *prometheus.GaugeVec
	lastSuccess      *prometheus.GaugeVec
	failures         *prometheus.CounterVec
	chainDeltas      prometheus.Gauge
	chainRevisions   prometheus.Gauge
	durations        *prometheus.HistogramVec
	memberOps        *prometheus.CounterVec
	uploader         prometheus.Gauge
	refused          *prometheus.GaugeVec
	gcLocked         prometheus.Counter
	gcDeleted        prometheus.Counter
	deletions        prometheus.Gauge
	memberRemoved    prometheus.Gauge
	// backups are the per-backup metrics: a series per full snapshot
	// retention keeps, refreshed by each retention run.
	backupInfo, backupRevision, backupSize, backupTime *prometheus.GaugeVec
}

// newMetrics registers the metrics; pending reads the events captured and
// not yet uploaded at each scrape.
func newMetrics(reg prometheus.Registerer, pending func() float64) *metrics {
	m := &metrics{
		snapshotDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "etcdkit_snapshot_duration_seconds", Help: "Time to take and upload a snapshot, by kind (full, delta).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"kind"}),
		snapshotSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_snapshot_size_bytes", Help: "Size on the store of the last snapshot, by kind.",
		}, []string{"kind"}),
		lastRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_snapshot_last_revision", Help: "Last revision of the last snapshot, by kind.",
		}, []string{"kind"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_snapshot_last_success_timestamp_seconds", Help: "Unix time of the last successful snapshot, by kind.",
		}, []string{"kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdkit_snapshot_failures_total", Help: "Failed snapshot and GC attempts, by kind (full, delta, gc, compaction, bundle: a restore bundle not written; snapshotter: it stopped and is started again).",
		}, []string{"kind"}),
		chainDeltas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdkit_chain_deltas", Help: "Deltas in the latest chain, after its full snapshot.",
		}),
		chainRevisions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdkit_chain_revisions", Help: "Revisions the latest chain's deltas cover past its full snapshot.",
		}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "etcdkit_operation_duration_seconds", Help: "Duration of restores, validations, defragmentations and chain compactions, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 14),
		}, []string{"operation"}),
		memberOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdkit_member_operations_total", Help: "Membership operations, by operation and result.",
		}, []string{"operation", "result"}),
		uploader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdkit_uploader", Help: "1 while this sidecar is the uploader (its member leads), else 0.",
		}),
		gcDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdkit_gc_deleted_total", Help: "Snapshots deleted by retention.",
		}),
		deletions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdkit_operator_deletions", Help: "Deletions an operator asked with etcd-backup delete, as recorded on the store (etcdkit/deletions/); read by each retention run.",
		}),
		backupInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_backup_info", Help: "1 for each full snapshot retention keeps, labelled with its key, timeline and pin label (\"\": not pinned) and the rules that keep it; read by each retention run.",
		}, []string{"full", "timeline", "pin", "kept_by"}),
		backupRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_backup_last_revision", Help: "Last revision of each kept chain (its full and the deltas kept with it).",
		}, []string{"full"}),
		backupSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_backup_size_bytes", Help: "Size on the store of each kept chain.",
		}, []string{"full"}),
		backupTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_backup_timestamp_seconds", Help: "Unix time each kept chain's full snapshot was taken.",
		}, []string{"full"}),
		gcLocked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdkit_gc_locked_total", Help: "Deletes by retention a write-once lock refused (the snapshot is kept and asked again on the next run).",
		}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_backups_refused", Help: "1 while the uploader refuses to write, by reason (other-cluster: the newest chain is another cluster's; superseded: a newer timeline began on the prefix; conflict: another writer wrote an object of the same name first), else 0.",
		}, []string{"reason"}),
		memberRemoved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: startup.MetricMemberRemoved, Help: startup.HelpMemberRemoved,
		}),
	}
	reg.MustRegister(m.snapshotDuration, m.snapshotSize, m.lastRevision, m.lastSuccess, m.failures,
		m.chainDeltas, m.chainRevisions, m.durations, m.memberOps, m.uploader, m.refused, m.gcLocked, m.gcDeleted, m.deletions, m.memberRemoved,
		m.backupInfo, m.backupRevision, m.backupSize, m.backupTime,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "etcdkit_delta_pending_events", Help: "Events captured and not yet uploaded.",
		}, pending))
	// Every label a dashboard expects exists from the start, at zero.
	for _, k := range []string{"full", "delta"} {
		m.failures.WithLabelValues(k)
		m.snapshotSize.WithLabelValues(k)
		m.lastRevision.WithLabelValues(k)
		m.lastSuccess.WithLabelValues(k)
	}
	for _, r := range capture.Refusals {
		m.refused.WithLabelValues(string(r))
	}
	m.failures.WithLabelValues("gc")
	m.failures.WithLabelValues("compaction")
	m.failures.WithLabelValues("snapshotter")
	b := buildinfo.Read()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdkit_build_info", Help: "1, labelled with the binary's build: version, commit, Go and etcd versions.",
	}, []string{"version", "commit", "go_version", "etcd_version"})
	build.WithLabelValues(b.Version, b.Commit, b.Go, b.Etcd).Set(1)
	reg.MustRegister(build)
	return m
}

// result records one Snapshotter result.
func (m *metrics) result(r capture.Result) {
	kind := string(r.Op)
	if r.Op != capture.OpGC {
		refusal := capture.RefusalOf(r.Err)
		for _, x := range capture.Refusals {
			v := 0.0
			if x == refusal {
				v = 1
			}
			m.refused.WithLabelValues(string(x)).Set(v)
		}
	}
	m.gcLocked.Add(float64(len(r.Locked)))
	if r.Err != nil {
		m.failures.WithLabelValues(kind).Inc()
		return
	}
	if r.Op == capture.OpGC {
		m.gcDeleted.Add(float64(r.Deleted))
		m.deletions.Set(float64(r.Deletions))
		m.backups(r.Kept)
		return
	}
	m.snapshotDuration.WithLabelValues(kind).Observe(r.Duration.Seconds())
	m.snapshotSize.WithLabelValues(kind).Set(float64(r.Snapshot.Size))
	m.lastRevision.WithLabelValues(kind).Set(float64(r.Snapshot.LastRevision))
	m.lastSuccess.WithLabelValues(kind).Set(float64(time.Now().Unix()))
}

// backups sets the per-backup metrics to the fulls kept, each with the
// deltas kept in its chain.
func (m *metrics) backups(kept []snapshot.Kept) {
	for _, v := range []*prometheus.GaugeVec{m.backupInfo, m.backupRevision, m.backupSize, m.backupTime} {
		v.Reset()
	}
	for _, k := range kept {
		s := k.Snapshot
		if s.Kind != snapshot.KindFull {
			if k.Full != "" {
				m.backupSize.WithLabelValues(k.Full).Add(float64(s.Size))
				m.backupRevision.WithLabelValues(k.Full).Set(float64(s.LastRevision))
			}
			continue
		}
		pin := ""
		if k.Pin != nil {
			pin = cmp.Or(k.Pin.Label, "pinned")
		}
		m.backupInfo.WithLabelValues(s.Key, s.Timeline, pin, strings.Join(k.Rules, ", ")).Set(1)
		m.backupSize.WithLabelValues(s.Key).Add(float64(s.Size))
		m.backupRevision.WithLabelValues(s.Key).Set(float64(s.LastRevision))
		m.backupTime.WithLabelValues(s.Key).Set(float64(s.Created.Unix()))
	}
}

// chain records the latest chain's length.
func (m *metrics) chain(deltas int, revisions int64) {
	m.chainDeltas.Set(float64(deltas))
	m.chainRevisions.Set(float64(revisions))
}

func (m *metrics) memberOp(op string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.memberOps.WithLabelValues(op, result).Inc()
}
