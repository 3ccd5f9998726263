package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// ServeOptions configures Serve. Listen and a credential in Auth are
// required; the zero value of the rest serves plain HTTP and drains the
// API for at most 30 s at exit.
type ServeOptions struct {
	// Listen is the API's address; port 0 picks a free one.
	Listen string
	Auth   Auth
	// TLS, when set, serves HTTPS with it (tlsfiles.Files.NewServer
	// makes one that reads rotated files again).
	TLS *tls.Config
	// ShutdownTimeout bounds the drain of the API at exit. Default 30 s.
	ShutdownTimeout time.Duration
	// OnListening, when set, is called with the address the API listens
	// on, before the sidecar runs.
	OnListening func(addr string)
	// Handler, when set, is served instead of the API: another protocol
	// over this sidecar (package etcdbr's), with its own access rules.
	// Auth is then unused.
	Handler http.Handler
	// Profiling serves Go's runtime profiles under /debug/pprof/: behind
	// Auth's credential with the API; with Handler, as openly as
	// etcd-backup-restore serves them, except the command line, which
	// may hold a password. Default off.
	Profiling bool
}

// Serve serves the API and runs the sidecar until ctx ends; then it stops
// the sidecar (which uploads the pending delta), drains the API and
// returns Run's error. The API serves before the member runs: a wrapper
// that leaves its data dir to the sidecar waits for it.
func (s *Sidecar) Serve(ctx context.Context, o ServeOptions) error {
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	h := o.Handler
	var au *authenticator
	if h == nil {
		var err error
		if au, err = o.Auth.authenticator(s.log); err != nil {
			return err
		}
		h = s.handler(au)
	}
	if o.Profiling {
		h = withProfiles(h, au)
		s.log.Info("sidecar: profiling served at /debug/pprof/", "authenticated", au != nil)
	}
	// Refused handshakes go to the log, not to stderr in another format.
	srv := &http.Server{Handler: h, TLSConfig: o.TLS, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("sidecar: listen %s: %w", o.Listen, err)
	}
	served := make(chan error, 1)
	go func() {
		if o.TLS != nil {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	if o.OnListening != nil {
		o.OnListening(ln.Addr().String())
	}
	runErr := s.Run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(runErr, fmt.Errorf("sidecar: serve %s: %w", o.Listen, err))
	}
	return runErr
}

// withProfiles serves Go's profiles under /debug/pprof/ beside h: to
// requests au accepts, or to any when au is nil, then without the command
// line.
func withProfiles(h http.Handler, au *authenticator) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	guard := func(f http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if au != nil {
				if err := au.check(r); err != nil {
					w.Header().Set("WWW-Authenticate", `Bearer realm="etcdkit"`)
					writeError(w, http.StatusUnauthorized, err)
					return
				}
			}
			f(w, r)
		}
	}
	// Index serves every named profile (heap, goroutine, block, …).
	mux.HandleFunc("/debug/pprof/", guard(pprof.Index))
	mux.HandleFunc("/debug/pprof/profile", guard(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", guard(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", guard(pprof.Trace))
	if au != nil {
		mux.HandleFunc("/debug/pprof/cmdline", guard(pprof.Cmdline))
	} else {
		mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the command line is not served without authentication: it may hold a password", http.StatusNotFound)
		})
	}
	return mux
}
