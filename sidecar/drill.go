package sidecar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
)

// Drill is the last restore drill: the latest chain replayed in the work
// dir and compared with the live cluster at its revision.
type Drill struct {
	At       time.Time
	Result   string // ok, mismatch, failed
	Err      error
	Report   restore.Report
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
	for _, r := range []string{snapshot.DrillOK, snapshot.DrillMismatch, snapshot.DrillFailed} {
		m.result.WithLabelValues(r)
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.DrillPeriod):
		}
		if s.Uploader() {
			s.RunDrill(ctx)
		}
	}
}

// RunDrill restores the latest chain in the work dir without a data dir,
// compares it with the live cluster at its revision, and records the
// result and the speed it measured.
func (s *Sidecar) RunDrill(ctx context.Context) Drill {
	if s.snap == nil {
		return Drill{At: time.Now(), Result: snapshot.DrillFailed, Err: ErrNoStore}
	}
	d := Drill{Result: snapshot.DrillFailed}
	rep, err := restore.Verify(ctx, s.opts.Store, restore.VerifyOptions{
		Source: restore.Source{Codec: s.opts.Snapshots.Codec, Logger: s.log}, WorkDir: s.opts.WorkDir})
	d.Report = rep
	if err == nil {
		var live restore.Digest
		live, err = restore.LiveDigest(ctx, s.opts.Client, rep.Digest.Revision)
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			// Only the chain could be checked; it replayed whole.
			d.Result, err = snapshot.DrillOK, nil
		case err == nil && live != rep.Digest:
			d.Result, err = snapshot.DrillMismatch, fmt.Errorf("the backup has %s; the cluster has %s", rep.Digest, live)
		case err == nil:
			d.Result, d.Compared = snapshot.DrillOK, true
		}
	}
	d.Err, d.At = err, time.Now()
	m := s.drills.m
	m.lastRun.Set(float64(d.At.Unix()))
	for _, r := range []string{snapshot.DrillOK, snapshot.DrillMismatch, snapshot.DrillFailed} {
		v := 0.0
		if r == d.Result {
			v = 1
		}
		m.result.WithLabelValues(r).Set(v)
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
	// On the store first: whoever sees the drill here finds its record
	// there.
	s.recordDrill(ctx, d)
	s.drills.record(d, rep.Chain)
	s.estimate()
	return d
}

// recordDrill keeps the drill's result on the store, where etcd-backup
// fleet reads it and a fleet drill finds the digest to check a restore
// against.
func (s *Sidecar) recordDrill(ctx context.Context, d Drill) {
	rep := d.Report
	r := snapshot.DrillRecord{At: d.At, Source: snapshot.DrillBySidecar, Result: d.Result, Full: rep.Chain.Full.Key,
		Revision: rep.Digest.Revision, Keys: rep.Digest.Keys, SHA256: rep.Digest.SHA256, Compared: d.Compared, TookSeconds: rep.Took.Seconds()}
	if d.Err != nil {
		r.Error = d.Err.Error()
	}
	if key, err := snapshot.WriteDrill(ctx, s.opts.Store, r); err != nil {
		s.log.Warn("sidecar: the drill's record was not written", "error", err)
	} else {
		s.log.Debug("sidecar: drill recorded", "key", key)
	}
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
	return e, s.opts.MaxRestoreTime > 0 && revs > 0 && e > s.opts.MaxRestoreTime
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
