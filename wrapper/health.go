package wrapper

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/startup"
)

// health serves the member's probes from inside the process, from the
// start: before etcd runs they answer 503 and say what the start-up is
// doing (a restore, or a wait for peers that do not answer), or why the
// member stays out.
type health struct {
	mu      sync.Mutex
	etcd    Etcd
	waiting string
	// refused is why a member that must stay out holds.
	refused string
	running atomic.Bool
}

// started hands the running member to the probes.
func (h *health) started(e Etcd) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.etcd, h.waiting = e, ""
	h.running.Store(true)
}

// refuse records why the member stays out: the process lives (/livez),
// etcd does not run (/readyz), and the metric says so.
func (h *health) refuse(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refused, h.waiting = reason, ""
}

// wait records why the start-up waits; "" when it no longer does.
func (h *health) wait(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting = reason
}

// member is the running member, nil before it started, and why it is
// not running yet or stays out.
func (h *health) member() (e Etcd, waiting, refused string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.etcd, h.waiting, h.refused
}

// serve starts the probes on addr ("" serves none), over TLS with tc
// when set, and returns their stop.
func (h *health) serve(addr string, tc *tls.Config) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wrapper: health endpoints on %s: %w", addr, err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	mux := http.NewServeMux()
	// livez: the process runs etcd, or holds a member that stays out; a
	// failing liveness probe restarts it, which would change nothing.
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		e, waiting, refused := h.member()
		if refused != "" {
			reply(w, http.StatusOK, map[string]any{"live": true, "refused": refused})
			return
		}
		if e == nil {
			reply(w, http.StatusServiceUnavailable, preparing("live", waiting))
			return
		}
		if !h.running.Load() {
			reply(w, http.StatusServiceUnavailable, map[string]any{"live": false})
			return
		}
		reply(w, http.StatusOK, map[string]any{"live": true})
	})
	// readyz: the member answers a read from its own state, which a
	// learner does too, and says whether it is one.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		h.read(w, r, clientv3.WithSerializable())
	})
	// healthz: the cluster answers a linearizable read through this
	// member: it has a leader and a quorum.
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if e, _, _ := h.member(); e != nil {
			if learner, err := e.Learner(r.Context()); err == nil && learner {
				h.read(w, r, clientv3.WithSerializable())
				return
			}
		}
		h.read(w, r)
	})
	// metrics: the member that stays out, as the sidecar says it too.
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _, refused := h.member()
		removed := 0
		if refused != "" {
			removed = 1
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", startup.MetricMemberRemoved, startup.HelpMemberRemoved,
			startup.MetricMemberRemoved, startup.MetricMemberRemoved, removed)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		// Shutdown closes only listeners Serve tracks already: one stopped
		// right after its start is closed here, before the port is reused.
		_ = ln.Close()
	}, nil
}

// preparing is a probe's answer before etcd runs.
func preparing(probe, waiting string) map[string]any {
	body := map[string]any{probe: false, "phase": "starting"}
	if waiting != "" {
		body["waiting"] = waiting
	}
	return body
}

func (h *health) read(w http.ResponseWriter, r *http.Request, opts ...clientv3.OpOption) {
	e, waiting, refused := h.member()
	if refused != "" {
		reply(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "refused": refused})
		return
	}
	if e == nil {
		reply(w, http.StatusServiceUnavailable, preparing("ready", waiting))
		return
	}
	if !h.running.Load() {
		reply(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "error": "etcd is stopping"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	learner, _ := e.Learner(ctx)
	_, err := e.Client().Get(ctx, "etcdkit-health", opts...)
	if errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrPermissionDenied) {
		// Authentication is on and the probe is nobody: etcd checks that
		// after the read agreed with the quorum, so the member answered,
		// as etcd's own /health takes it.
		err = nil
	}
	if err != nil {
		reply(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "learner": learner, "error": err.Error()})
		return
	}
	reply(w, http.StatusOK, map[string]any{"ready": true, "learner": learner})
}

func reply(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
