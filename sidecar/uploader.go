package sidecar

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/capture"
)

// uploader runs the Snapshotter while this sidecar's member leads, and
// starts it again with backoff when it stops with an error: while this
// sidecar uploads, nobody else backs the cluster up.
type uploader struct {
	snap    *capture.Snapshotter // nil: no store, nothing to run
	log     *slog.Logger
	metrics *metrics
	// why it runs: "the member leads", or "the member answers" for a
	// sidecar that needs no leader (BackupOptions.FromOutside, kine).
	why string

	mu     sync.Mutex
	on     bool          // the member leads: the Snapshotter runs
	cancel func()        // stops the run
	done   chan struct{} // closed when the run has stopped
	// stoppedSince: the Snapshotter stopped with an error and no
	// snapshot has succeeded since; stopErr says why.
	stoppedSince time.Time
	stopErr      error
}

// start runs the Snapshotter under ctx, after prepare, unless its last
// run is still winding down; it says whether it started one.
func (u *uploader) start(ctx context.Context, prepare func(context.Context)) bool {
	u.mu.Lock()
	if u.done != nil {
		select {
		case <-u.done:
		default:
			u.mu.Unlock()
			return false
		}
	}
	uctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	u.on, u.cancel, u.done = true, cancel, done
	u.stoppedSince, u.stopErr = time.Time{}, nil
	u.mu.Unlock()
	u.metrics.uploader.Set(1)
	if u.snap == nil {
		u.log.Info("sidecar: " + u.why + "; this sidecar defragments (it has no store)")
		close(done)
		return true
	}
	u.log.Info("sidecar: " + u.why + "; this sidecar uploads")
	prepare(uctx)
	go func() {
		defer close(done)
		u.run(uctx)
	}()
	return true
}

// run runs the Snapshotter until ctx ends, again after each error.
func (u *uploader) run(ctx context.Context) {
	wait := time.Second
	for {
		err := u.snap.Run(ctx)
		switch {
		case ctx.Err() != nil, err == nil:
			return
		case errors.Is(err, ErrNotUploader):
			// Leadership moved while the last delta was being written:
			// the new uploader resumes from the store.
			u.log.Info("sidecar: snapshotter stopped; the member no longer leads", "error", err)
			return
		}
		u.metrics.failures.WithLabelValues("snapshotter").Inc()
		u.mu.Lock()
		if u.stoppedSince.IsZero() {
			u.stoppedSince = time.Now()
		}
		u.stopErr = err
		u.mu.Unlock()
		u.log.Error("sidecar: snapshotter stopped; starting it again", "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		// stoppedSince stays until a snapshot succeeds: a Snapshotter
		// that stops again at once has not recovered.
		wait = min(2*wait, 5*time.Minute)
	}
}

// stop stops the Snapshotter and waits until it has.
func (u *uploader) stop() {
	u.mu.Lock()
	cancel, done := u.cancel, u.done
	u.on, u.cancel = false, nil
	u.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
	// Leadership may have come back while the last run wound down.
	u.mu.Lock()
	if !u.on {
		u.metrics.uploader.Set(0)
	}
	u.mu.Unlock()
}

// active says whether this sidecar uploads now.
func (u *uploader) active() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.on
}

// succeeded clears a stop: a snapshot has landed since.
func (u *uploader) succeeded() {
	u.mu.Lock()
	u.stoppedSince, u.stopErr = time.Time{}, nil
	u.mu.Unlock()
}

// stopped is since when the Snapshotter has stayed stopped, and why; zero
// while it runs or since a snapshot succeeded.
func (u *uploader) stopped() (time.Time, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stoppedSince, u.stopErr
}
