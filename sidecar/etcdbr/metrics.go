package etcdbr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
)

// Label values as etcd-backup-restore writes them: Gardener's alerts and
// dashboards match on them.
const (
	kindFull  = "Full"
	kindDelta = "Incr"
	kindChunk = "Chunk"

	restoreSingleMember = "single_member"
	restoreSingleNode   = "single_node"
)

var (
	kinds     = []string{kindFull, kindDelta, kindChunk}
	succeeded = []string{"false", "true"}
)

// metrics are etcd-backup-restore's etcdbr_* metrics, with its names,
// help, labels and default buckets, fed from the sidecar's results.
type metrics struct {
	gc                 *prometheus.CounterVec
	latestRevision     *prometheus.GaugeVec
	latestTimestamp    *prometheus.GaugeVec
	required           *prometheus.GaugeVec
	snapshotDuration   *prometheus.HistogramVec
	validationDuration *prometheus.HistogramVec
	restoreDuration    *prometheus.HistogramVec
	defragDuration     *prometheus.HistogramVec
	latestDeltas       *prometheus.GaugeVec
	latestDeltaRevs    *prometheus.GaugeVec
	failure            *prometheus.CounterVec
	clusterSize        *prometheus.GaugeVec
	isLearner          *prometheus.GaugeVec
	learnerCount       *prometheus.CounterVec
	addLearner         *prometheus.HistogramVec
	memberRemove       *prometheus.HistogramVec
	memberPromote      *prometheus.HistogramVec
}

func gaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "etcdbr", Subsystem: subsystem, Name: name, Help: help}, labels)
}

func counterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "etcdbr", Subsystem: subsystem, Name: name, Help: help}, labels)
}

func histogramVec(subsystem, name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "etcdbr", Subsystem: subsystem, Name: name, Help: help}, labels)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		gc:                 counterVec("snapshot", "gc_total", "Total number of garbage collected snapshots.", "kind", "succeeded"),
		latestRevision:     gaugeVec("snapshot", "latest_revision", "Revision number of latest snapshot taken.", "kind"),
		latestTimestamp:    gaugeVec("snapshot", "latest_timestamp", "Timestamp of latest snapshot taken.", "kind"),
		required:           gaugeVec("snapshot", "required", "Indicates whether a snapshot is required to be taken.", "kind"),
		snapshotDuration:   histogramVec("snapshot", "duration_seconds", "Total latency distribution of saving snapshot to object store.", "kind", "succeeded"),
		validationDuration: histogramVec("", "validation_duration_seconds", "Total latency distribution of validating data directory.", "succeeded"),
		restoreDuration:    histogramVec("restoration", "duration_seconds", "Total latency distribution required to restore the etcd member.", "restore", "succeeded"),
		defragDuration:     histogramVec("", "defragmentation_duration_seconds", "Total latency distribution of defragmentation of each etcd cluster member.", "succeeded", "endpoint"),
		latestDeltas:       gaugeVec("snapstore", "latest_deltas_total", "Total number of delta snapshots taken since the latest full snapshot."),
		latestDeltaRevs:    gaugeVec("snapstore", "latest_deltas_revisions_total", "Total number of revisions stored in delta snapshots taken since the latest full snapshot."),
		failure:            counterVec("snapshotter", "failure", "Total number of snapshotter errors.", "error"),
		clusterSize:        gaugeVec("", "cluster_size", "Current Etcd cluster size."),
		isLearner:          gaugeVec("", "is_learner", "Whether or not this member is a learner. 1 if is, 0 otherwise"),
		learnerCount:       counterVec("", "is_learner_count_total", "Total count when etcd member added as a learner.", "succeeded"),
		addLearner:         histogramVec("", "add_learner_duration_seconds", "Total latency to add the etcd member as a learner to the cluster.", "succeeded"),
		memberRemove:       histogramVec("", "member_remove_duration_seconds", "Total latency to remove the etcd member from the cluster.", "succeeded"),
		memberPromote:      histogramVec("", "member_promote_duration_seconds", "Total latency to promote the learner to the voting member.", "succeeded"),
	}
	reg.MustRegister(m.gc, m.latestRevision, m.latestTimestamp, m.required, m.snapshotDuration, m.validationDuration,
		m.restoreDuration, m.defragDuration, m.latestDeltas, m.latestDeltaRevs, m.failure, m.clusterSize, m.isLearner,
		m.learnerCount, m.addLearner, m.memberRemove, m.memberPromote)
	// etcd-backup-restore shows every combination of these labels from
	// the start, at zero; a dashboard's query may rely on it.
	for _, s := range succeeded {
		for _, k := range kinds {
			m.gc.WithLabelValues(k, s)
			m.snapshotDuration.WithLabelValues(k, s)
		}
		m.validationDuration.WithLabelValues(s)
		m.restoreDuration.WithLabelValues(restoreSingleMember, s)
		m.restoreDuration.WithLabelValues(restoreSingleNode, s)
		m.defragDuration.WithLabelValues(s, "")
		m.memberRemove.WithLabelValues(s)
		m.addLearner.WithLabelValues(s)
		m.memberPromote.WithLabelValues(s)
	}
	for _, k := range kinds {
		m.latestRevision.WithLabelValues(k)
		m.latestTimestamp.WithLabelValues(k)
		m.required.WithLabelValues(k)
	}
	return m
}

func ok(err error) string {
	if err != nil {
		return "false"
	}
	return "true"
}

func kindOf(op capture.Operation) string {
	if op == capture.OpFull {
		return kindFull
	}
	return kindDelta
}

// result records one Snapshotter result.
func (m *metrics) result(r capture.Result) {
	switch r.Op {
	case capture.OpGC:
		for _, s := range r.Expired {
			m.gc.WithLabelValues(string(s.Kind), "true").Inc()
		}
		if r.Err != nil {
			m.failure.WithLabelValues(r.Err.Error()).Inc()
			m.gc.WithLabelValues(kindFull, "false").Inc()
		}
		return
	case capture.OpFull, capture.OpDelta:
	default:
		return
	}
	kind := kindOf(r.Op)
	m.snapshotDuration.WithLabelValues(kind, ok(r.Err)).Observe(r.Duration.Seconds())
	if r.Err != nil {
		m.failure.WithLabelValues(r.Err.Error()).Inc()
		if r.Op == capture.OpFull {
			m.required.WithLabelValues(kindFull).Set(1)
		}
		return
	}
	m.required.WithLabelValues(kind).Set(0)
	m.latestRevision.WithLabelValues(kind).Set(float64(r.Snapshot.LastRevision))
	m.latestTimestamp.WithLabelValues(kind).Set(float64(r.Snapshot.Created.Unix()))
}

// chain records the latest chain's deltas, as etcd-backup-restore counts
// them: the revisions from the first delta's start to the last one's end.
func (m *metrics) chain(c snapshot.Chain) {
	m.latestDeltas.WithLabelValues().Set(float64(len(c.Deltas)))
	revs := 0.0
	if n := len(c.Deltas); n > 0 {
		revs = float64(c.Deltas[n-1].LastRevision - c.Deltas[0].StartRevision)
	}
	m.latestDeltaRevs.WithLabelValues().Set(revs)
}

// operation records an operation of the sidecar.
func (m *metrics) operation(op sidecar.Operation) {
	s := ok(op.Err)
	switch op.Name {
	case "validation":
		m.validationDuration.WithLabelValues(s).Observe(op.Took.Seconds())
	case "restore":
		m.restoreDuration.WithLabelValues(restoreSingleNode, s).Observe(op.Took.Seconds())
	case "remove":
		m.memberRemove.WithLabelValues(s).Observe(op.Took.Seconds())
	case "add-learner":
		m.learnerCount.WithLabelValues(s).Inc()
		m.addLearner.WithLabelValues(s).Observe(op.Took.Seconds())
		if op.Err == nil {
			m.isLearner.WithLabelValues().Set(1)
		}
	case "promote":
		m.memberPromote.WithLabelValues(s).Observe(op.Took.Seconds())
		if op.Err == nil {
			m.isLearner.WithLabelValues().Set(0)
		}
	case "defrag":
		for _, r := range op.Defrag.Members {
			if r.Skipped == "" {
				m.defragDuration.WithLabelValues(s, r.Endpoint).Observe(r.Took.Seconds())
			}
		}
	}
}

// initialized records a start-up: a member of a multi-member cluster that
// rejoined is etcd-backup-restore's single-member restoration.
func (m *metrics) initialized(p startup.Plan, took time.Duration, err error) {
	if p.Action == startup.Rejoin {
		m.restoreDuration.WithLabelValues(restoreSingleMember, ok(err)).Observe(took.Seconds())
	}
}
