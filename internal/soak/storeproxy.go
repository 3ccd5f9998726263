package soak

import (
	"context"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// storeMode is what the store proxy does to a request.
type storeMode int

const (
	storePass    storeMode = iota
	storeOutage            // the connection is closed unanswered: an endpoint that is down
	storeLatency           // every request waits first
	storeErrors            // a share of the requests gets S3's 500 InternalError
)

// storeProxy stands between the sidecars and wrappers and the store's
// server, so the harness can take the store away, slow it or make it
// fail. The harness itself reads the store directly.
type storeProxy struct {
	srv      *http.Server
	addr     string
	mu       sync.Mutex
	mode     storeMode
	latency  time.Duration
	rnd      *rand.Rand
	requests atomic.Int64
	failed   atomic.Int64
}

// startStoreProxy forwards to target (an http URL) from a loopback port.
// The Host header is kept: S3's signatures cover it, and the clients
// signed for the proxy's address.
func startStoreProxy(target string, seed uint64) (*storeProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &storeProxy{addr: ln.Addr().String(), rnd: rand.New(rand.NewPCG(seed, 7))}
	rp := httputil.NewSingleHostReverseProxy(u)
	// A request cut by an outage is the point, not news.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p.srv = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *storeProxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.mu.Lock()
		mode, latency := p.mode, p.latency
		fail := mode == storeErrors && p.rnd.IntN(2) == 0
		p.mu.Unlock()
		switch {
		case mode == storeOutage:
			p.failed.Add(1)
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case mode == storeLatency:
			select {
			case <-time.After(latency):
			case <-r.Context().Done():
				return
			}
		case fail:
			p.failed.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>injected by the soak</Message></Error>`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// set changes the mode; latency matters for storeLatency only.
func (p *storeProxy) set(mode storeMode, latency time.Duration) {
	p.mu.Lock()
	p.mode, p.latency = mode, latency
	p.mu.Unlock()
}

func (p *storeProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}
