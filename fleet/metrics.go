package fleet

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Exporter scans a bucket every Interval and serves the last scan as
// Prometheus metrics labelled by prefix: one seed-wide dashboard.
type Exporter struct {
	st       store.Store
	opts     ScanOptions
	interval time.Duration
	descs    metricDescs

	mu     sync.Mutex
	last   Fleet
	scans  int
	errors int
}

// NewExporter scans st every interval (default 5 min) with opts.
func NewExporter(st store.Store, opts ScanOptions, interval time.Duration) *Exporter {
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	return &Exporter{st: st, opts: opts.withDefaults(), interval: interval, descs: newMetricDescs()}
}

// Scan scans once and keeps the result for the metrics.
func (e *Exporter) Scan(ctx context.Context) (Fleet, error) {
	f, err := Scan(ctx, e.st, e.opts)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.errors++
		e.opts.Logger.Warn("fleet: scan failed; the metrics keep the last scan", "store", e.st, "error", err)
		return f, err
	}
	e.last = f
	e.scans++
	e.opts.Logger.Info("fleet: scanned", "prefixes", len(f.Clusters), "objects", f.Objects, "took", f.Took.Round(time.Millisecond))
	return f, nil
}

// Run scans now and every interval until ctx ends.
func (e *Exporter) Run(ctx context.Context) error {
	for {
		_, _ = e.Scan(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(e.interval):
		}
	}
}

// metricDescs are the exporter's metrics.
type metricDescs struct {
	rpo, lastBackup, stale, bytes, deltas, estimate, revision, drill, drillAt, problem *prometheus.Desc
	prefixes, scanAt, scanTook, scans, scanErrors                                      *prometheus.Desc
}

func newMetricDescs() metricDescs {
	byPrefix := []string{"prefix"}
	return metricDescs{
		rpo:        prometheus.NewDesc("etcdkit_fleet_rpo_seconds", "Age of the prefix's newest snapshot: the writes a loss now would take.", byPrefix, nil),
		lastBackup: prometheus.NewDesc("etcdkit_fleet_last_backup_timestamp_seconds", "Unix time the store last took a snapshot of the prefix.", byPrefix, nil),
		stale:      prometheus.NewDesc("etcdkit_fleet_stale", "1 when the prefix has had no new snapshot for longer than --stale: an orphan, or a sidecar that stopped.", byPrefix, nil),
		bytes:      prometheus.NewDesc("etcdkit_fleet_backup_bytes", "Bytes of every object of the prefix.", byPrefix, nil),
		deltas:     prometheus.NewDesc("etcdkit_fleet_chain_deltas", "Deltas of the prefix's latest chain.", byPrefix, nil),
		estimate:   prometheus.NewDesc("etcdkit_fleet_restore_estimate_seconds", "Estimated time to restore the prefix's latest chain.", byPrefix, nil),
		revision:   prometheus.NewDesc("etcdkit_fleet_backup_revision", "Last revision of the prefix's latest chain.", byPrefix, nil),
		drill: prometheus.NewDesc("etcdkit_fleet_drill_result", "1 for the result of the prefix's newest drill record (ok, mismatch, failed), 0 for the others; none before a drill.",
			[]string{"prefix", "result", "source"}, nil),
		drillAt:    prometheus.NewDesc("etcdkit_fleet_drill_timestamp_seconds", "Unix time of the prefix's newest drill record.", byPrefix, nil),
		problem:    prometheus.NewDesc("etcdkit_fleet_problem", "1 when the prefix's latest chain or records could not be read whole.", byPrefix, nil),
		prefixes:   prometheus.NewDesc("etcdkit_fleet_prefixes", "Prefixes holding backups in the last scan.", nil, nil),
		scanAt:     prometheus.NewDesc("etcdkit_fleet_scan_timestamp_seconds", "Unix time the last scan began.", nil, nil),
		scanTook:   prometheus.NewDesc("etcdkit_fleet_scan_duration_seconds", "How long the last scan took.", nil, nil),
		scans:      prometheus.NewDesc("etcdkit_fleet_scans_total", "Scans that succeeded.", nil, nil),
		scanErrors: prometheus.NewDesc("etcdkit_fleet_scan_errors_total", "Scans that failed (the metrics keep the last scan then).", nil, nil),
	}
}

// Describe is prometheus.Collector's: every metric, scanned or not yet.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	descs := e.descs
	for _, d := range []*prometheus.Desc{descs.rpo, descs.lastBackup, descs.stale, descs.bytes, descs.deltas, descs.estimate, descs.revision,
		descs.drill, descs.drillAt, descs.problem, descs.prefixes, descs.scanAt, descs.scanTook, descs.scans, descs.scanErrors} {
		ch <- d
	}
}

// Collect is prometheus.Collector's: the last scan.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	f, scans, errs := e.last, e.scans, e.errors
	e.mu.Unlock()
	descs := e.descs
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ch <- prometheus.MustNewConstMetric(descs.scans, prometheus.CounterValue, float64(scans))
	ch <- prometheus.MustNewConstMetric(descs.scanErrors, prometheus.CounterValue, float64(errs))
	if scans == 0 {
		return
	}
	gauge(descs.prefixes, float64(len(f.Clusters)))
	gauge(descs.scanAt, float64(f.At.Unix()))
	gauge(descs.scanTook, f.Took.Seconds())
	for _, c := range f.Clusters {
		p := c.Prefix
		gauge(descs.lastBackup, float64(c.LastBackupAt.Unix()), p)
		gauge(descs.stale, b2f(c.Stale), p)
		gauge(descs.bytes, float64(c.Bytes), p)
		gauge(descs.problem, b2f(c.Problem != ""), p)
		if c.NewestFull != "" {
			gauge(descs.rpo, c.RPOSeconds, p)
			gauge(descs.deltas, float64(c.ChainDeltas), p)
			gauge(descs.estimate, c.EstimatedRestoreSeconds, p)
			gauge(descs.revision, float64(c.Revision), p)
		}
		if d := c.Drill; d != nil {
			gauge(descs.drillAt, float64(d.At.Unix()), p)
			for _, r := range []snapshot.DrillResult{snapshot.DrillOK, snapshot.DrillMismatch, snapshot.DrillFailed} {
				gauge(descs.drill, b2f(r == d.Result), p, string(r), string(d.Source))
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
