package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	if h == nil {
		var err error
		if h, err = s.Handler(o.Auth); err != nil {
			return err
		}
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
