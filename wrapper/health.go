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
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// health serves the member's probes from inside the process, from the
// start: before etcd runs they answer 503 and say what the start-up is
// doing (a restore, or a wait for peers that do not answer).
type health struct {
	mu      sync.Mutex
	etcd    *embed.Etcd
	cli     *clientv3.Client
	waiting string
	running atomic.Bool
}

// started hands the running member to the probes.
func (h *health) started(e *embed.Etcd) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.etcd, h.cli, h.waiting = e, v3client.New(e.Server), ""
	h.running.Store(true)
}

// wait records why the start-up waits; "" when it no longer does.
func (h *health) wait(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting = reason
}

// member is the running member and its client, nil before it started.
func (h *health) member() (*embed.Etcd, *clientv3.Client, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.etcd, h.cli, h.waiting
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
	// livez: the process runs etcd; a failing liveness probe restarts it.
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		if e, _, waiting := h.member(); e == nil {
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
		if e, _, _ := h.member(); e != nil && e.Server.IsLearner() {
			h.read(w, r, clientv3.WithSerializable())
			return
		}
		h.read(w, r)
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
		if _, cli, _ := h.member(); cli != nil {
			_ = cli.Close()
		}
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
	e, cli, waiting := h.member()
	if e == nil {
		reply(w, http.StatusServiceUnavailable, preparing("ready", waiting))
		return
	}
	learner := e.Server.IsLearner()
	if !h.running.Load() {
		reply(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "error": "etcd is stopping"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	_, err := cli.Get(ctx, "etcdkit-health", opts...)
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
