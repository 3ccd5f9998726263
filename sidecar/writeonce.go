package sidecar

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// writeOnce asks the store, while this sidecar uploads, whether it
// refuses deletes (snapshot.ProbeProtection): at once, then every period.
type writeOnce struct {
	st     store.Store
	period time.Duration
	log    *slog.Logger
	gauge  prometheus.Gauge

	mu    sync.Mutex
	state *api.WriteOnceState
}

func newWriteOnce(st store.Store, period time.Duration, reg prometheus.Registerer, log *slog.Logger) *writeOnce {
	w := &writeOnce{st: st, period: period, log: log, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "etcdkit_store_write_once", Help: "1 when the store refused to delete a probe object (a write-once lock holds), 0 when it deleted it, -1 until asked or when the question failed.",
	})}
	w.gauge.Set(-1)
	reg.MustRegister(w.gauge)
	return w
}

// loop asks while uploading says this sidecar uploads: when it begins to,
// and every period after the last answer. uploading is polled each nudge
// of the ticker, a tenth of the period at most a minute.
func (w *writeOnce) loop(ctx context.Context, uploading func() bool) {
	tick := time.NewTicker(min(w.period/10, time.Minute))
	defer tick.Stop()
	var last time.Time
	for {
		if uploading() && (last.IsZero() || time.Since(last) >= w.period) {
			w.ask(ctx)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *writeOnce) ask(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p, err := snapshot.ProbeProtection(ctx, w.st)
	state := &api.WriteOnceState{DeletesRefused: p.DeletesRefused, Probe: p.Probe, Checked: time.Now().UTC()}
	switch {
	case err != nil:
		state.Error = err.Error()
		w.gauge.Set(-1)
		w.log.Warn("sidecar: whether the store refuses deletes is not known", "error", err)
	case p.DeletesRefused:
		w.gauge.Set(1)
	default:
		w.gauge.Set(0)
	}
	w.mu.Lock()
	changed := w.state == nil || w.state.DeletesRefused != state.DeletesRefused
	w.state = state
	w.mu.Unlock()
	if changed && err == nil {
		w.log.Info("sidecar: the store's write-once lock", "deletes_refused", p.DeletesRefused, "probe", p.Probe)
	}
}

func (w *writeOnce) current() *api.WriteOnceState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}
