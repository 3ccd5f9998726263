package emulator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Etcd35, Etcd36 and Etcd37 are etcd servers of the releases etcdkit
// runs, built from the versions pinned in tools/etcd35 and tools/etcd36,
// and from this module for the 3.7 it embeds: the tests back them up,
// restore for each, and run them under the wrapper.
const (
	Etcd35 Kind = "etcd-3.5"
	Etcd36 Kind = "etcd-3.6"
	Etcd37 Kind = "etcd-3.7"
)

// EtcdKinds are the etcd servers, oldest first.
var EtcdKinds = []Kind{Etcd35, Etcd36, Etcd37}

// isEtcd says whether kind is an etcd server.
func isEtcd(kind Kind) bool { return slices.Contains(EtcdKinds, kind) }

// EtcdProgram is the path of an etcd server's binary, as
// tools/install-emulators.sh installs it.
func EtcdProgram(kind Kind) (string, error) {
	if !isEtcd(kind) {
		return "", fmt.Errorf("emulator: %s is not an etcd server", kind)
	}
	return program(kind)
}

// RequireEtcdProgram is EtcdProgram for a test that runs the binary
// itself (under the wrapper): skipped when it is not installed, failed
// under ETCDKIT_REQUIRE_EMULATORS=1.
func RequireEtcdProgram(t testing.TB, kind Kind) string {
	t.Helper()
	p, err := EtcdProgram(kind)
	if err != nil {
		needed(t, err)
	}
	return p
}

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
	// DataDir, when set, is a data dir to start on (a restore's), as the
	// member Name (default "old") at PeerURL, which it was built for; ""
	// starts a new member in a new directory.
	DataDir, Name, PeerURL string
	// InitialCluster, when set, is the cluster ("name=peerURL,…") the
	// member Name at PeerURL starts in, new, instead of one of its own
	// (StartEtcdCluster).
	InitialCluster string
	// Args are more of the server's flags, after the ones it is given.
	Args []string
}

// Etcd is a single etcd member of an older version, one process.
type Etcd struct {
	// ClientURL serves the member's clients.
	ClientURL string
	// DataDir is the member's data dir.
	DataDir string
	// Version is what the binary says it is, such as 3.5.35.
	Version string

	o       EtcdOptions
	peerURL string
	client  *http.Client
}

// StartEtcd starts a one-member cluster of an older etcd and waits until
// it is healthy.
func StartEtcd(ctx context.Context, kind Kind, o EtcdOptions) (*Server, error) {
	if !isEtcd(kind) {
		return nil, fmt.Errorf("emulator: %s is not an etcd server", kind)
	}
	s, err := prepare(kind, Options{Dir: o.Dir})
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = "old"
	}
	e := &Etcd{DataDir: filepath.Join(s.dir, "data"), o: o, client: &http.Client{Timeout: 2 * time.Second}}
	if o.DataDir != "" {
		e.DataDir = o.DataDir
	}
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
	e.peerURL = o.PeerURL
	if e.peerURL == "" {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		e.peerURL = fmt.Sprintf("http://127.0.0.1:%d", port)
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

// StartEtcdCluster starts a new cluster of n members of an older etcd,
// m0 to m(n-1), one process each and all at once (a member is healthy
// only once a quorum runs), each as o says but for its name, peer URL
// and directory, and waits until every one is healthy.
func StartEtcdCluster(ctx context.Context, kind Kind, n int, o EtcdOptions) ([]*Server, error) {
	opts := make([]EtcdOptions, n)
	var initial []string
	for i := range opts {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		opts[i] = o
		opts[i].Name, opts[i].PeerURL, opts[i].Dir, opts[i].DataDir = fmt.Sprintf("m%d", i), fmt.Sprintf("http://127.0.0.1:%d", port), "", ""
		initial = append(initial, opts[i].Name+"="+opts[i].PeerURL)
	}
	members := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range opts {
		opts[i].InitialCluster = strings.Join(initial, ",")
		wg.Go(func() { members[i], errs[i] = StartEtcd(ctx, kind, opts[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range members {
			if m != nil {
				m.Stop()
			}
		}
		return nil, err
	}
	return members, nil
}

// RequireEtcdCluster starts a cluster of an older etcd for a test, as
// RequireEtcd starts one member, and stops it when the test ends.
func RequireEtcdCluster(t testing.TB, kind Kind, n int, o EtcdOptions) []*Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	members, err := StartEtcdCluster(ctx, kind, n, o)
	if err != nil {
		needed(t, err)
	}
	for _, m := range members {
		t.Cleanup(m.Stop)
	}
	return members
}

func (e *Etcd) args(port int) []string {
	scheme := "http"
	if e.o.CA != "" {
		scheme = "https"
	}
	e.ClientURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	peer := e.peerURL
	initial := e.o.Name + "=" + peer
	if e.o.InitialCluster != "" {
		initial = e.o.InitialCluster
	}
	args := []string{
		"--name=" + e.o.Name, "--data-dir=" + e.DataDir,
		"--listen-client-urls=" + e.ClientURL, "--advertise-client-urls=" + e.ClientURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + initial, "--initial-cluster-state=new", "--initial-cluster-token=etcdkit-old",
		"--log-level=warn",
	}
	if e.o.CA != "" {
		args = append(args, "--cert-file="+e.o.Cert, "--key-file="+e.o.Key, "--trusted-ca-file="+e.o.CA, "--client-cert-auth")
	}
	return append(args, e.o.Args...)
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
