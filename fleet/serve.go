package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Serve scans with e until ctx ends and serves its metrics at /metrics
// (and /healthz) on listen; onListening, when set, gets the address.
func Serve(ctx context.Context, e *Exporter, listen string, onListening func(addr string)) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(e); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(e.opts.Logger.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("fleet: listen %s: %w", listen, err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if onListening != nil {
		onListening(ln.Addr().String())
	}
	runErr := e.Run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(runErr, fmt.Errorf("fleet: serve %s: %w", listen, err))
	}
	return runErr
}
