package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/internal/reload"
)

// Files names the PEM files of one side of a TLS connection. The zero
// value is a client that verifies servers against the system's roots and
// presents no certificate.
type Files struct {
	// CA is a bundle of the authorities to trust: those that sign the
	// servers' certificates (a client), or the clients' (a server). "":
	// the system's roots (a client), no client certificates (a server).
	CA string
	// Cert and Key are the certificate (chain) this side presents and its
	// private key: both or neither; a server needs them.
	Cert, Key string
	// ServerName verifies servers' certificates for this name instead of
	// the host dialled. Clients only.
	ServerName string
	// InsecureSkipVerify accepts any server certificate. Clients only;
	// NewClient logs a warning.
	InsecureSkipVerify bool
	// Names say how a user sets each of the above (a flag, a key of a
	// configuration file), for messages that say what to fix. Each ""
	// names the field.
	Names Names
}

// Names are how a user sets each field of Files.
type Names struct {
	CA, Cert, Key, ServerName string
}

func (f Files) names() Names {
	n := f.Names
	if n.CA == "" {
		n.CA = "Files.CA"
	}
	if n.Cert == "" {
		n.Cert = "Files.Cert"
	}
	if n.Key == "" {
		n.Key = "Files.Key"
	}
	if n.ServerName == "" {
		n.ServerName = "Files.ServerName"
	}
	return n
}

// IsZero says whether nothing is set.
func (f Files) IsZero() bool {
	return f.CA == "" && f.Cert == "" && f.Key == "" && f.ServerName == "" && !f.InsecureSkipVerify
}

// Client is the TLS configuration of a client whose files are read again
// when they change.
type Client struct {
	files Files
	pair  *reload.File[*tls.Certificate]
	roots *reload.File[*x509.CertPool]
}

// NewClient checks the files and returns the client's configuration. A
// nil logger discards.
func (f Files) NewClient(log *slog.Logger) (*Client, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{files: f}
	var err error
	if c.pair, err = f.keyPair(log); err != nil {
		return nil, err
	}
	switch {
	case f.InsecureSkipVerify:
		log.Warn("TLS: servers' certificates are not verified (insecure-skip-tls-verify): anyone on the path can read and change this traffic; give the CA bundle instead")
	case f.CA != "":
		if c.roots, err = f.pool(log); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Config returns the configuration of one new connection, with the
// files as they are on disk now. serverName is the host dialled, used
// when Files.ServerName is "".
func (c *Client) Config(serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: c.files.InsecureSkipVerify}
	if c.files.ServerName != "" {
		cfg.ServerName = c.files.ServerName
	}
	if c.roots != nil {
		pool, err := c.roots.Get()
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.pair != nil {
		pair, err := c.pair.Get()
		if err != nil {
			return nil, err
		}
		// Sent whatever authorities the server names: a server that
		// refuses it says so, where a certificate left out would only
		// be missing.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair, nil }
	}
	return cfg, nil
}

// Leaf is the client certificate as it is now, nil when there is none.
func (c *Client) Leaf() *x509.Certificate {
	if c.pair == nil {
		return nil
	}
	pair, err := c.pair.Get()
	if err != nil {
		return nil
	}
	return pair.Leaf
}

// Transport returns an HTTP transport that dials https URLs with the
// client's configuration, each connection with the files as they are
// then. Its handshakes are bounded by timeout (default 10 s).
func (c *Client) Transport(timeout time.Duration) *http.Transport {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSHandshakeTimeout = timeout
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		cfg, err := c.Config(host)
		if err != nil {
			return nil, err
		}
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn := tls.Client(raw, cfg)
		if err := conn.HandshakeContext(hctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return &alertConn{Conn: conn}, nil
	}
	return t
}

// alertConn keeps the alert a server sent after the handshake. In TLS 1.3
// a server judges the client's certificate only after the client's
// handshake ended, so its refusal reaches the transport's reader, which
// closes the connection; a request written after that fails with "use of
// closed network connection", and the transport reports that. Writes that
// fail return the alert instead, so Explain can say what to fix whichever
// side noticed first.
type alertConn struct {
	*tls.Conn
	mu    sync.Mutex
	alert error
}

func (c *alertConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "remote error" {
		c.mu.Lock()
		if c.alert == nil {
			c.alert = err
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *alertConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.mu.Lock()
		if c.alert != nil {
			err = c.alert
		}
		c.mu.Unlock()
	}
	return n, err
}

// NewServer checks the files and returns a server configuration that
// reads them again when they change. With a CA, clients are asked for a
// certificate, and one that the CA did not sign is refused; clients
// without one are let through, for the caller to authenticate otherwise
// (probes, a bearer token). A nil logger discards.
func (f Files) NewServer(log *slog.Logger) (*tls.Config, error) {
	n := f.names()
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("a TLS server needs a certificate and its key (%s, %s)", n.Cert, n.Key)
	}
	pair, err := f.keyPair(log)
	if err != nil {
		return nil, err
	}
	var roots *reload.File[*x509.CertPool]
	if f.CA != "" {
		if roots, err = f.pool(log); err != nil {
			return nil, err
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			p, err := pair.Get()
			if err != nil {
				return nil, err
			}
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*p}}
			if roots != nil {
				if cfg.ClientCAs, err = roots.Get(); err != nil {
					return nil, err
				}
				cfg.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return cfg, nil
		},
	}, nil
}

// keyPair is the certificate and key, checked now; nil when neither is
// given.
func (f Files) keyPair(log *slog.Logger) (*reload.File[*tls.Certificate], error) {
	n := f.names()
	switch {
	case f.Cert == "" && f.Key == "":
		return nil, nil
	case f.Cert == "":
		return nil, fmt.Errorf("%s %s has no certificate: give %s too", n.Key, f.Key, n.Cert)
	case f.Key == "":
		return nil, fmt.Errorf("%s %s has no key: give %s too", n.Cert, f.Cert, n.Key)
	}
	pair := reload.New(func() (*tls.Certificate, error) { return f.loadPair(time.Now()) }, log, f.Cert, f.Key)
	if _, err := pair.Get(); err != nil {
		return nil, err
	}
	return pair, nil
}

// loadPair reads the certificate and its key and checks that they belong
// together and that the certificate is valid at now.
func (f Files) loadPair(now time.Time) (*tls.Certificate, error) {
	n := f.names()
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	var pathErr *os.PathError
	switch {
	case errors.As(err, &pathErr):
		which := n.Cert
		if pathErr.Path == f.Key {
			which = n.Key
		}
		return nil, fmt.Errorf("%s: %w", which, err)
	case err != nil && err.Error() == "tls: private key does not match public key":
		return nil, fmt.Errorf("%s %s is not the key of %s %s: give the key the certificate was issued for", n.Key, f.Key, n.Cert, f.Cert)
	case err != nil:
		return nil, fmt.Errorf("%s %s, %s %s: %w", n.Cert, f.Cert, n.Key, f.Key, err)
	}
	leaf := pair.Leaf
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%s %s (%q) expired on %s: renew it", n.Cert, f.Cert, leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("%s %s (%q) is not valid before %s: check this machine's clock", n.Cert, f.Cert, leaf.Subject.CommonName, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &pair, nil
}

// pool is the CA bundle, checked now.
func (f Files) pool(log *slog.Logger) (*reload.File[*x509.CertPool], error) {
	n := f.names()
	roots := reload.New(func() (*x509.CertPool, error) {
		b, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.CA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s %s holds no PEM certificate: give the CA bundle", n.CA, f.CA)
		}
		return pool, nil
	}, log, f.CA)
	if _, err := roots.Get(); err != nil {
		return nil, err
	}
	return roots, nil
}
