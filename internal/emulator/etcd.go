package emulator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Etcd35 and Etcd36 are etcd servers of the minor versions before the
// module's own, built from the versions pinned in tools/etcd35 and
// tools/etcd36: the tests back them up and restore with etcd 3.7.
const (
	Etcd35 Kind = "etcd-3.5"
	Etcd36 Kind = "etcd-3.6"
)

// EtcdOptions for StartEtcd. The zero value serves plain http.
type EtcdOptions struct {
	// Dir holds the data dir; "" means a new temporary directory, removed
	// by Stop.
	Dir string
	// CA, Cert and Key, when set, serve clients over https with Cert (for
	// 127.0.0.1) and require client certificates CA signed.
	CA, Cert, Key string
	// ClientCert and ClientKey are what the readiness check presents.
	ClientCert, ClientKey string
}

// Etcd is a single etcd member of an older version, one process.
type Etcd struct {
	// ClientURL serves the member's clients.
	ClientURL string
	// DataDir is the member's data dir.
	DataDir string
	// Version is what the binary says it is, such as 3.5.35.
	Version string

	o        EtcdOptions
	peerPort int
	client   *http.Client
}

// StartEtcd starts a one-member cluster of an older etcd and waits until
// it is healthy.
func StartEtcd(ctx context.Context, kind Kind, o EtcdOptions) (*Server, error) {
	if kind != Etcd35 && kind != Etcd36 {
		return nil, fmt.Errorf("emulator: %s is not an etcd server", kind)
	}
	s, err := prepare(kind, Options{Dir: o.Dir})
	if err != nil {
		return nil, err
	}
	e := &Etcd{DataDir: filepath.Join(s.dir, "data"), o: o, client: &http.Client{Timeout: 2 * time.Second}}
	s.Etcd = e
	fail := func(err error) (*Server, error) {
		if s.ownDir {
			_ = os.RemoveAll(s.dir)
		}
		return nil, fmt.Errorf("emulator %s: %w", kind, err)
	}
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(vctx, s.prog, "--version").Output()
	if err != nil {
		return fail(err)
	}
	if _, v, ok := strings.Cut(strings.SplitN(string(out), "\n", 2)[0], "etcd Version: "); ok {
		e.Version = strings.TrimSpace(v)
	}
	if o.CA != "" {
		ca, err := os.ReadFile(o.CA)
		if err != nil {
			return fail(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if o.ClientCert != "" {
			pair, err := tls.LoadX509KeyPair(o.ClientCert, o.ClientKey)
			if err != nil {
				return fail(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		e.client.Transport = &http.Transport{TLSClientConfig: cfg}
	}
	if e.peerPort, err = freePort(); err != nil {
		return fail(err)
	}
	if err := s.run(ctx, Options{Dir: o.Dir}); err != nil {
		return nil, err
	}
	return s, nil
}

// RequireEtcd starts an older etcd for a test, as Require starts a store
// emulator, and stops it when the test ends.
func RequireEtcd(t testing.TB, kind Kind, o EtcdOptions) *Server {
	t.Helper()
	// The server outlives the deadline: it bounds the start only.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := StartEtcd(ctx, kind, o)
	return required(t, s, err)
}

func (e *Etcd) args(port int) []string {
	scheme := "http"
	if e.o.CA != "" {
		scheme = "https"
	}
	e.ClientURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	peer := fmt.Sprintf("http://127.0.0.1:%d", e.peerPort)
	args := []string{
		"--name=old", "--data-dir=" + e.DataDir,
		"--listen-client-urls=" + e.ClientURL, "--advertise-client-urls=" + e.ClientURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=old=" + peer, "--initial-cluster-state=new", "--initial-cluster-token=etcdkit-old",
		"--log-level=warn",
	}
	if e.o.CA != "" {
		args = append(args, "--cert-file="+e.o.Cert, "--key-file="+e.o.Key, "--trusted-ca-file="+e.o.CA, "--client-cert-auth")
	}
	return args
}

// healthy says whether the member answers /health with a leader.
func (e *Etcd) healthy() bool {
	resp, err := e.client.Get(e.ClientURL + "/health")
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`)
}
