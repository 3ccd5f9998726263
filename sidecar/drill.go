package sidecar

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/drill"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
)

// Drill is the last restore drill: the latest chain replayed in the work
// dir and compared with the live cluster at its revision.
type Drill struct {
	At       time.Time
	Result   snapshot.DrillResult
	Err      error
	Report   history.Report
	Compared bool // false: the cluster had compacted past the revision
}

// drills are the restore drills' results and the speed they measured on
// this node.
type drills struct {
	m *drillMetrics

	mu       sync.Mutex
	last     Drill
	verified snapshot.Chain // the last chain a drill found equal to the cluster
	speed    restore.Speed
}

// record keeps a drill's result, and the chain it verified when it did.
func (d *drills) record(dr Drill, chain snapshot.Chain) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last = dr
	if dr.Result == snapshot.DrillOK {
		d.verified = chain
	}
}

// measured keeps what a drill measured as this node's speed: a chain of
// a full alone measures no replay, and the last replay measured stays.
func (d *drills) measured(sp restore.Speed) restore.Speed {
	d.mu.Lock()
	defer d.mu.Unlock()
	if sp.BytesPerSecond > 0 {
		d.speed.BytesPerSecond = sp.BytesPerSecond
	}
	if sp.RevisionsPerSecond > 0 {
		d.speed.RevisionsPerSecond = sp.RevisionsPerSecond
	}
	return d.speed
}

func (d *drills) speedNow() restore.Speed {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.speed
}

// verifiedAge is the age of the newest snapshot of the last verified
// chain, 0 before any drill succeeded.
func (d *drills) verifiedAge() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.verified.Full.Key == "" {
		return 0
	}
	newest := d.verified.Full.Created
	for _, s := range d.verified.Deltas {
		if s.Created.After(newest) {
			newest = s.Created
		}
	}
	return time.Since(newest).Seconds()
}

func (d *drills) lastDrill() Drill {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// drillMetrics are the drills' and the RPO's metrics.
type drillMetrics struct {
	lastRun, lastVerified, verifiedRevision prometheus.Gauge
	result                                  *prometheus.GaugeVec
	estimate, speedBytes, speedRevisions    prometheus.Gauge
	budget                                  prometheus.Gauge
}

func newDrillMetrics(reg prometheus.Registerer, verifiedAge, rpo func() float64) *drillMetrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &drillMetrics{
		lastRun:          g("etcdkit_drill_last_run_timestamp_seconds", "Unix time the last restore drill ended."),
		lastVerified:     g("etcdkit_drill_last_success_timestamp_seconds", "Unix time of the last drill that found the backup equal to the live cluster."),
		verifiedRevision: g("etcdkit_drill_verified_revision", "Revision of the last backup a drill verified."),
		result: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "etcdkit_drill_result", Help: "1 for the last drill's result (ok, mismatch, failed), 0 for the others.",
		}, []string{"result"}),
		estimate:       g("etcdkit_restore_estimate_seconds", "Estimated time to restore the latest chain on this node, from its size and the speed the last drill measured."),
		speedBytes:     g("etcdkit_restore_speed_bytes_per_second", "Full snapshot bytes the last drill downloaded and decoded per second."),
		speedRevisions: g("etcdkit_restore_speed_revisions_per_second", "Revisions the last drill replayed per second."),
		budget:         g("etcdkit_restore_budget_seconds", "The restore-time budget past which the chain is compacted (--max-restore-time); 0: none."),
	}
	for _, r := range []snapshot.DrillResult{snapshot.DrillOK, snapshot.DrillMismatch, snapshot.DrillFailed} {
		m.result.WithLabelValues(string(r))
	}
	reg.MustRegister(m.lastRun, m.lastVerified, m.verifiedRevision, m.result, m.estimate, m.speedBytes, m.speedRevisions, m.budget,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "etcdkit_drill_verified_backup_age_seconds", Help: "Age of the newest snapshot of the last chain a drill verified; 0 before one.",
		}, verifiedAge),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "etcdkit_rpo_seconds", Help: "Age of the newest uploaded snapshot while this sidecar uploads: the writes a loss now would take; 0 otherwise.",
		}, rpo))
	return m
}

// drillLoop runs a drill every DrillPeriod while this sidecar uploads.
func (s *Sidecar) drillLoop(ctx context.Context) {
	skipped := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.Backups.DrillPeriod):
		}
		if !s.Uploader() {
			continue
		}
		// An uploader that has not placed its backups, or is refused, backs
		// this cluster up into no chain yet (the store's may be another
		// cluster's, or another writer's): its chain compared with this
		// cluster would be a verdict on neither.
		st := s.SnapshotStatus()
		if st.Refused != "" || !st.Placed {
			if st.Refused != "" && !skipped {
				s.log.Info("sidecar: no restore drill while the backups are refused", "refused", st.Refused)
				skipped = true
			}
			continue
		}
		skipped = false
		s.RunDrill(ctx)
	}
}

// RunDrill restores the latest chain in the work dir without a data dir,
// compares it with the live cluster at its revision (drill.Live), and
// records the result and the speed it measured.
func (s *Sidecar) RunDrill(ctx context.Context) Drill {
	if s.snap == nil {
		return Drill{At: time.Now(), Result: snapshot.DrillFailed, Err: ErrNoStore}
	}
	// On the store first: whoever sees the drill here finds its record
	// there.
	out, werr := drill.Live(ctx, s.opts.Backups.Store, s.opts.Client, drill.Options{
		Read: restore.ReadOptions{Codec: s.opts.Backups.Snapshots.Codec, Logger: s.log}, WorkDir: s.opts.WorkDir})
	if werr != nil {
		s.log.Warn("sidecar: the drill's record was not written", "error", werr)
	}
	rep, err := out.Report, out.Err
	d := Drill{At: out.Record.At, Result: out.Record.Result, Err: err, Report: rep, Compared: out.Record.Compared}
	m := s.drills.m
	m.lastRun.Set(float64(d.At.Unix()))
	for _, r := range []snapshot.DrillResult{snapshot.DrillOK, snapshot.DrillMismatch, snapshot.DrillFailed} {
		v := 0.0
		if r == d.Result {
			v = 1
		}
		m.result.WithLabelValues(string(r)).Set(v)
	}
	s.ran(Operation{Name: "drill", Took: rep.Took, Err: err})
	if d.Result != snapshot.DrillOK {
		s.metrics.failures.WithLabelValues("drill").Inc()
		s.log.Error("sidecar: restore drill failed", "result", d.Result, "error", err)
	} else {
		m.lastVerified.Set(float64(d.At.Unix()))
		m.verifiedRevision.Set(float64(rep.Digest.Revision))
		sp := s.drills.measured(rep.Speed())
		m.speedBytes.Set(sp.BytesPerSecond)
		m.speedRevisions.Set(sp.RevisionsPerSecond)
		s.log.Info("sidecar: restore drill", "revision", rep.Digest.Revision, "compared", d.Compared, "took", rep.Took.Round(time.Millisecond),
			"revisions_per_s", int64(sp.RevisionsPerSecond))
	}
	s.drills.record(d, rep.Chain)
	s.estimate()
	return d
}

// estimate is the latest chain's restore time at this node's speed, into
// its metric; with MaxRestoreTime, it says whether the chain needs a
// compaction.
func (s *Sidecar) estimate() (time.Duration, bool) {
	chain := s.chain.shape()
	e := restore.EstimateRestore(chain, s.drills.speedNow())
	s.drills.m.estimate.Set(e.Seconds())
	// A chain of a full alone has nothing a compaction would shorten.
	revs := chain.LastRevision() - chain.Full.LastRevision
	return e, s.opts.Backups.MaxRestoreTime > 0 && revs > 0 && e > s.opts.Backups.MaxRestoreTime
}

// rpo is the age of the newest uploaded snapshot while this sidecar
// uploads, 0 otherwise.
func (s *Sidecar) rpo() float64 {
	last := s.chain.lastUploaded()
	if !s.up.active() || last.IsZero() {
		return 0
	}
	return time.Since(last).Seconds()
}

// LastDrill is the last restore drill; zero before one.
func (s *Sidecar) LastDrill() Drill { return s.drills.lastDrill() }
