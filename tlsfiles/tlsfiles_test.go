package tlsfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

var flags = tlsfiles.Names{CA: "--cacert", Cert: "--cert", Key: "--key", ServerName: "--server-name"}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// server is an HTTPS server that requires client certificates from its
// pool and records the common name of each request's certificate.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	names []string
	cert  tls.Certificate
}

func newServer(t *testing.T, cert pki.Leaf, clientCAs ...*pki.CA) *server {
	t.Helper()
	s := &server{}
	s.setCert(t, cert)
	pool := x509.NewCertPool()
	for _, ca := range clientCAs {
		b, err := os.ReadFile(ca.File)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(b)
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.names = append(s.names, r.TLS.PeerCertificates[0].Subject.CommonName)
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	s.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{s.cert},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{s.cert},
				ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}, nil
		}}
	// Refused handshakes are what these tests are about.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *server) setCert(t *testing.T, l pki.Leaf) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.cert = pair
	s.mu.Unlock()
}

func (s *server) lastName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.names) == 0 {
		return ""
	}
	return s.names[len(s.names)-1]
}

// get makes one request on a new connection.
func get(c *tlsfiles.Client, url string) error {
	tr := c.Transport(5 * time.Second)
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// A client certificate and a CA bundle replaced on disk are used by the
// next connection, without a new client.
func TestClientReadsRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	ca1 := pki.NewCA(t, dir, "ca1")
	ca2 := pki.NewCA(t, dir, "ca2")
	srv := newServer(t, ca1.Issue(t, "server1", pki.LeafOptions{ServerOnly: true}), ca1, ca2)
	caFile := filepath.Join(dir, "ca.pem")
	must(t, pki.Bundle(caFile, ca1))
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	must(t, ca1.Issue(t, "a", pki.LeafOptions{CommonName: "client-a", ClientOnly: true}).Install(cert, key))
	c, err := tlsfiles.Files{CA: caFile, Cert: cert, Key: key, Names: flags}.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(c, srv.URL); err != nil || srv.lastName() != "client-a" {
		t.Fatalf("first request: %v, certificate %q", err, srv.lastName())
	}
	must(t, ca2.Issue(t, "b", pki.LeafOptions{CommonName: "client-b", ClientOnly: true}).Install(cert, key))
	if err := get(c, srv.URL); err != nil || srv.lastName() != "client-b" {
		t.Fatalf("after the client certificate's rotation: %v, certificate %q", err, srv.lastName())
	}

	// The server moves to a certificate of the second CA: refused until
	// the client's bundle has it, then accepted.
	srv.setCert(t, ca2.Issue(t, "server2", pki.LeafOptions{ServerOnly: true}))
	err = get(c, srv.URL)
	var tlsErr *tlsfiles.Error
	if !errors.As(c.Explain(err), &tlsErr) || !strings.Contains(tlsErr.Hint, "not signed by a CA of --cacert "+caFile) {
		t.Fatalf("a server certificate of another CA: %v, explained %v", err, c.Explain(err))
	}
	must(t, pki.Bundle(caFile, ca2))
	if err := get(c, srv.URL); err != nil {
		t.Fatalf("after the CA bundle's rotation: %v", err)
	}
}

// A server's certificate and client CA replaced on disk are used by the
// next handshake.
func TestServerReadsRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	ca1 := pki.NewCA(t, dir, "ca1")
	ca2 := pki.NewCA(t, dir, "ca2")
	certFile, keyFile, clientCA := filepath.Join(dir, "srv.pem"), filepath.Join(dir, "srv-key.pem"), filepath.Join(dir, "clients.pem")
	s1 := ca1.Issue(t, "s1", pki.LeafOptions{CommonName: "server-1"})
	must(t, s1.Install(certFile, keyFile))
	must(t, pki.Bundle(clientCA, ca1))
	cfg, err := tlsfiles.Files{CA: clientCA, Cert: certFile, Key: keyFile}.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.VerifiedChains) == 0 {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()

	caBoth := filepath.Join(dir, "both.pem")
	must(t, pki.Bundle(caBoth, ca1, ca2))
	clientLeaf := ca2.Issue(t, "c", pki.LeafOptions{CommonName: "client"})
	c, err := tlsfiles.Files{CA: caBoth, Cert: clientLeaf.CertFile, Key: clientLeaf.KeyFile}.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	conn := func() error {
		cfg, err := c.Config("127.0.0.1")
		if err != nil {
			return err
		}
		conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		if err := conn.Handshake(); err != nil {
			return err
		}
		seen = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
		// A refused client certificate shows at the first read in TLS 1.3.
		_, _ = io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n")
		b, err := io.ReadAll(conn)
		if err == nil && !strings.HasPrefix(string(b), "HTTP/1.0 200") {
			err = errors.New(strings.SplitN(string(b), "\n", 2)[0])
		}
		return err
	}
	if err := conn(); err == nil || seen != "server-1" {
		t.Fatalf("a client certificate of a CA the server does not trust yet was accepted (%v), server %q", err, seen)
	}
	s2 := ca1.Issue(t, "s2", pki.LeafOptions{CommonName: "server-2"})
	must(t, s2.Install(certFile, keyFile))
	must(t, pki.Bundle(clientCA, ca1, ca2))
	if err := conn(); err != nil || seen != "server-2" {
		t.Fatalf("after rotation: %v, server %q", err, seen)
	}
}

// Files that cannot work fail when the client or server is made, with a
// message naming the setting and the file.
func TestBadFilesFailAtStart(t *testing.T) {
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	good := ca.Issue(t, "good", pki.LeafOptions{CommonName: "good"})
	other := ca.Issue(t, "other", pki.LeafOptions{CommonName: "other"})
	expired := ca.Issue(t, "expired", pki.LeafOptions{CommonName: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	future := ca.Issue(t, "future", pki.LeafOptions{CommonName: "new", NotBefore: time.Now().Add(time.Hour)})
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files tlsfiles.Files
		want  []string
	}{
		{"a key that is not the certificate's", tlsfiles.Files{Cert: good.CertFile, Key: other.KeyFile}, []string{"--key " + other.KeyFile + " is not the key of --cert " + good.CertFile}},
		{"an expired certificate", tlsfiles.Files{Cert: expired.CertFile, Key: expired.KeyFile}, []string{"--cert " + expired.CertFile, "expired on", "renew it"}},
		{"a certificate not valid yet", tlsfiles.Files{Cert: future.CertFile, Key: future.KeyFile}, []string{"is not valid before", "clock"}},
		{"a certificate without its key", tlsfiles.Files{Cert: good.CertFile}, []string{"has no key: give --key too"}},
		{"a key without its certificate", tlsfiles.Files{Key: good.KeyFile}, []string{"has no certificate: give --cert too"}},
		{"a missing CA file", tlsfiles.Files{CA: filepath.Join(dir, "missing.pem")}, []string{"--cacert", "missing.pem", "no such file"}},
		{"a CA file without a certificate", tlsfiles.Files{CA: notPEM}, []string{"--cacert " + notPEM + " holds no PEM certificate"}},
		{"a missing key file", tlsfiles.Files{Cert: good.CertFile, Key: filepath.Join(dir, "nokey.pem")}, []string{"--key", "nokey.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.files.Names = flags
			_, err := tc.files.NewClient(nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
	if _, err := (tlsfiles.Files{CA: ca.File}).NewServer(nil); err == nil || !strings.Contains(err.Error(), "needs a certificate and its key") {
		t.Errorf("a server without a certificate: %v", err)
	}
}

// A failed handshake is explained with the setting that fixes it.
func TestExplain(t *testing.T) {
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	stranger := pki.NewCA(t, dir, "stranger")
	srv := newServer(t, ca.Issue(t, "server", pki.LeafOptions{ServerOnly: true}), ca)
	elsewhere := newServer(t, ca.Issue(t, "elsewhere", pki.LeafOptions{ServerOnly: true, Hosts: []string{"etcd.example"}}), ca)
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	client := ca.Issue(t, "client", pki.LeafOptions{CommonName: "client", ClientOnly: true})
	serverOnly := ca.Issue(t, "server-only", pki.LeafOptions{CommonName: "server-only", ServerOnly: true})
	foreign := stranger.Issue(t, "foreign", pki.LeafOptions{CommonName: "foreign"})
	for _, tc := range []struct {
		name  string
		files tlsfiles.Files
		url   string
		want  string
	}{
		{"no CA bundle", tlsfiles.Files{}, srv.URL, "signed by an authority this machine does not trust: give the CA bundle that signed it with --cacert"},
		{"the wrong CA bundle", tlsfiles.Files{CA: stranger.File}, srv.URL, "not signed by a CA of --cacert " + stranger.File},
		{"another name", tlsfiles.Files{CA: ca.File}, elsewhere.URL, `is not for "127.0.0.1": dial a name it is for (etcd.example), or set --server-name to one`},
		{"no client certificate", tlsfiles.Files{CA: ca.File}, srv.URL, "the server requires a client certificate: give one with --cert and --key"},
		{"a client certificate of another CA", tlsfiles.Files{CA: ca.File, Cert: foreign.CertFile, Key: foreign.KeyFile}, srv.URL, "the server does not trust the client certificate --cert " + foreign.CertFile},
		{"a certificate not for clients", tlsfiles.Files{CA: ca.File, Cert: serverOnly.CertFile, Key: serverOnly.KeyFile}, srv.URL, "it is not for client use"},
		{"a server without TLS", tlsfiles.Files{CA: ca.File}, strings.Replace(plain.URL, "http://", "https://", 1), "does not speak TLS at this address: use an http:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.files.Names = flags
			c, err := tc.files.NewClient(nil)
			if err != nil {
				t.Fatal(err)
			}
			err = get(c, tc.url)
			if err == nil {
				t.Fatal("the request went through")
			}
			explained := c.Explain(err)
			var tlsErr *tlsfiles.Error
			if !errors.As(explained, &tlsErr) || !strings.Contains(tlsErr.Hint, tc.want) {
				t.Fatalf("%v\nexplained as %v\nwant %q", err, explained, tc.want)
			}
		})
	}
	good, err := tlsfiles.Files{CA: ca.File, Cert: client.CertFile, Key: client.KeyFile}.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(good, srv.URL); err != nil {
		t.Fatalf("the right files: %v", err)
	}
	if e := good.Explain(errors.New("connection refused")); e != nil {
		t.Fatalf("an error that is not TLS's was explained: %v", e)
	}
}

// A request written after the transport's reader saw the server refuse
// the client (TLS 1.3 refuses after the client's handshake ended) fails
// with that refusal, not with the closed connection it left.
func TestRefusalSeenBeforeTheRequestIsExplained(t *testing.T) {
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	srv := newServer(t, ca.Issue(t, "server", pki.LeafOptions{ServerOnly: true}), ca)
	c, err := tlsfiles.Files{CA: ca.File, Names: flags}.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.Transport(5*time.Second).DialTLSContext(t.Context(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the server did not refuse a client without a certificate")
	}
	_ = conn.Close()
	_, err = conn.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	var tlsErr *tlsfiles.Error
	if explained := c.Explain(err); !errors.As(explained, &tlsErr) || !strings.Contains(tlsErr.Hint, "requires a client certificate") {
		t.Fatalf("write after the refusal: %v, explained as %v", err, explained)
	}
}
