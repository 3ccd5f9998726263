package soak

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"sync"
	"time"
)

// peerProxy carries the peer traffic to one member. Every member has a
// certificate of its own (common name = member name), and the proxy ends
// TLS, so it knows which member a connection comes from, whichever side
// dialled: etcd's peers send over connections either of them opened. It
// cuts the pairs the harness isolates, and their open connections.
//
// It listens only while the member does: a port that accepts and answers
// nothing means "a member may run there" to a starting wrapper, a refused
// one means "nobody", and the proxy must not turn one into the other.
type peerProxy struct {
	addr   string // where the cluster reaches the member
	name   string // the member's
	to     string // the member's own peer address
	tls    *tls.Config
	client map[string]tls.Certificate
	roots  *x509.CertPool
	cut    func(from string) bool
	mu     sync.Mutex
	ln     net.Listener        // nil while the member does not listen
	conns  map[net.Conn]string // open connections, by the member they come from
	closed bool
	done   chan struct{}
}

// startPeerProxy serves addr with the member's certificate, asks every
// peer for its certificate, and forwards to the member at to with the
// connecting member's certificate (clients, by member name). cut says
// whether traffic from a member is cut now.
func startPeerProxy(name, addr, to string, server tls.Certificate, clients map[string]tls.Certificate, roots *x509.CertPool, cut func(from string) bool) *peerProxy {
	p := &peerProxy{addr: addr, name: name, to: to, client: clients, roots: roots, cut: cut, conns: map[net.Conn]string{}, done: make(chan struct{}),
		tls: &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots, MinVersion: tls.VersionTLS12}}
	go p.follow()
	return p
}

// follow opens the proxy's port when the member's opens and closes it
// (and every connection) when the member's closes, checking every 50 ms.
func (p *peerProxy) follow() {
	for {
		select {
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		c, err := net.DialTimeout("tcp", p.to, time.Second)
		up := err == nil
		if up {
			_ = c.Close()
		}
		p.mu.Lock()
		switch {
		case p.closed:
		case up && p.ln == nil:
			if ln, err := tls.Listen("tcp", p.addr, p.tls); err == nil {
				p.ln = ln
				go p.accept(ln)
			}
		case !up && p.ln != nil:
			_ = p.ln.Close()
			p.ln = nil
			for c := range p.conns {
				_ = c.Close()
			}
		}
		p.mu.Unlock()
	}
}

func (p *peerProxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c.(*tls.Conn))
	}
}

func (p *peerProxy) serve(in *tls.Conn) {
	_ = in.SetDeadline(time.Now().Add(10 * time.Second))
	if err := in.Handshake(); err != nil {
		_ = in.Close()
		return
	}
	_ = in.SetDeadline(time.Time{})
	certs := in.ConnectionState().PeerCertificates
	from := certs[0].Subject.CommonName
	cert, ok := p.client[from]
	if !ok {
		// Not a member: a wrapper asking the peer port who runs there
		// before it starts etcd. etcd takes any certificate of its CA, so
		// the proxy presents the member's own; these are never cut.
		cert, from = p.client[p.name], ""
	}
	if from != "" && p.cut(from) {
		_ = in.Close()
		return
	}
	out, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", p.to, &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: p.roots, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		_ = in.Close()
		return
	}
	if !p.track(in, from) || !p.track(out, from) {
		_ = in.Close()
		_ = out.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
	p.untrack(in)
	p.untrack(out)
}

func (p *peerProxy) track(c net.Conn, from string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = from
	return true
}

func (p *peerProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// sever closes the open connections from members cut now; the cut decides
// the new ones.
func (p *peerProxy) sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, from := range p.conns {
		if from != "" && p.cut(from) {
			_ = c.Close()
		}
	}
}

func (p *peerProxy) close() {
	close(p.done)
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		_ = p.ln.Close()
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}
