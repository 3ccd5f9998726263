package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// secondary copies the store's snapshots to a second site while this
// sidecar uploads (etcd-backup-restore's dual-site sync): what the second
// site lacks, after each snapshot written and every period, then the same
// retention there. A second site that fails never stops the backups; it
// catches up when it answers again.
type secondary struct {
	src, dst  store.Store
	period    time.Duration
	retention *snapshot.Retention // nil: none applied there
	gc        snapshot.GCOptions
	log       *slog.Logger
	nudge     chan struct{}

	syncedAt prometheus.Gauge
	failures prometheus.Counter

	mu sync.Mutex
	// waiting is when the oldest snapshot the second site may lack was
	// written (zero: it lacks none); synced when the last copy that
	// found everything began.
	waiting, synced time.Time
	lastErr         error
}

func newSecondary(o Options, reg prometheus.Registerer, log *slog.Logger) *secondary {
	s := &secondary{src: o.Backups.Store, dst: o.Backups.Secondary, period: o.Backups.SecondaryPeriod, log: log, nudge: make(chan struct{}, 1),
		gc: snapshot.GCOptions{Logger: log, Codec: o.Backups.Snapshots.Codec, SpoolDir: o.WorkDir, Checked: &snapshot.CheckedFulls{}},
		syncedAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdkit_secondary_last_sync_timestamp_seconds", Help: "Unix time at which the last copy that left the second site holding every snapshot began.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "etcdkit_secondary_failures_total", Help: "Copies to the second site, or its retention, that failed.",
		}),
	}
	if s.period <= 0 {
		s.period = time.Hour
	}
	switch b := o.Backups; {
	case b.SecondaryKeepsAll:
	case b.SecondaryRetention != nil:
		r := *b.SecondaryRetention
		s.retention = &r
	case b.Snapshots.RetentionPeriod >= 0:
		r := b.Snapshots.Retention
		s.retention = &r
	}
	reg.MustRegister(s.syncedAt, s.failures, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "etcdkit_secondary_lag_seconds", Help: "How long the oldest snapshot the second site lacks has waited; 0 when it holds them all.",
	}, func() float64 { return s.state().LagSeconds }))
	return s
}

// written is told of each snapshot the uploader wrote.
func (s *secondary) written() {
	s.mu.Lock()
	if s.waiting.IsZero() {
		s.waiting = time.Now()
	}
	s.mu.Unlock()
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// loop copies while uploading says this sidecar uploads, until ctx ends.
func (s *secondary) loop(ctx context.Context, uploading func() bool) {
	tick := time.NewTicker(s.period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.nudge:
		case <-tick.C:
		}
		if uploading() {
			s.sync(ctx)
		}
	}
}

// sync copies what the second site lacks and applies the retention there.
func (s *secondary) sync(ctx context.Context) {
	began := time.Now()
	// Never into another store's copies: its retention would delete them.
	err := snapshot.ClaimMirror(ctx, s.src, s.dst)
	// The first site's pins keep their chains here too; not knowing them
	// is no reason to delete.
	var pins snapshot.Pins
	if err == nil {
		pins, err = snapshot.ReadPins(ctx, s.src)
	}
	var res snapshot.CopyResult
	if err == nil {
		// Only what this site's retention keeps: a shorter one than the
		// first's would otherwise delete what each copy writes.
		res, err = snapshot.Copy(ctx, s.src, s.dst, snapshot.CopyOptions{Logger: s.log, Retention: s.retention, Pins: pins, Now: s.gc.Now})
	}
	if err == nil && s.retention != nil {
		gc := s.gc
		gc.Pins = pins
		_, err = snapshot.GC(ctx, s.dst, *s.retention, gc)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.lastErr == nil {
			s.log.Warn("sidecar: the second site lacks snapshots; the next copy tries again (the backups go on)", "store", s.dst, "error", err)
		}
		s.lastErr = err
		s.failures.Inc()
		if s.waiting.IsZero() {
			s.waiting = began
		}
		return
	}
	if s.lastErr != nil {
		s.log.Info("sidecar: the second site holds every snapshot again", "store", s.dst)
	}
	s.lastErr, s.synced = nil, began
	if !s.waiting.After(began) {
		s.waiting = time.Time{}
	}
	s.syncedAt.Set(float64(began.Unix()))
	if len(res.Copied) > 0 {
		s.log.Debug("sidecar: copied to the second site", "store", s.dst, "objects", len(res.Copied))
	}
}

// state is the second site's, as /readyz shows it.
func (s *secondary) state() *api.SecondaryState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &api.SecondaryState{Store: fmt.Sprint(s.dst), LastSync: s.synced.UTC()}
	if !s.waiting.IsZero() {
		out.LagSeconds = time.Since(s.waiting).Seconds()
	}
	if s.lastErr != nil {
		out.LastError = s.lastErr.Error()
	}
	return out
}
