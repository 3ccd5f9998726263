package sidecar

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/restore"
)

// standbyMetrics are the warm standby's.
type standbyMetrics struct {
	revision, applied prometheus.Gauge
}

func newStandbyMetrics(reg prometheus.Registerer) *standbyMetrics {
	m := &standbyMetrics{
		revision: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdkit_standby_revision", Help: "Revision the warm standby holds (--standby-data-dir); 0 without one.",
		}),
		applied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdkit_standby_last_applied_timestamp_seconds", Help: "Unix time the warm standby last advanced.",
		}),
	}
	reg.MustRegister(m.revision, m.applied)
	return m
}

// follow keeps the warm standby until ctx ends, then makes its state the
// data dir, as restore --follow does. It runs whichever member leads: the
// standby reads the store, not the member.
func (s *Sidecar) follow(ctx context.Context) {
	o := *s.opts.Standby
	if o.Restore.Read.Codec.Identities == nil {
		o.Restore.Read.Codec = s.opts.Backups.Snapshots.Codec
	}
	if o.Restore.Read.Logger == nil {
		o.Restore.Read.Logger = s.log
	}
	applied := o.Applied
	o.Applied = func(st restore.Standby) {
		s.standby.revision.Set(float64(st.Revision))
		s.standby.applied.Set(float64(time.Now().Unix()))
		if applied != nil {
			applied(st)
		}
	}
	res, err := restore.Follow(ctx, s.opts.Backups.Store, o)
	if err != nil {
		s.log.Error("sidecar: the warm standby stopped", "data_dir", o.Restore.Member.DataDir, "error", err)
		return
	}
	s.log.Info("sidecar: the warm standby is a data dir", "data_dir", o.Restore.Member.DataDir, "revision", res.Revision, "moved_aside", res.MovedAside)
}
