package soak

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/internal/freeport"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// node is one member: an etcd-wrapper process (etcd runs inside it) and an
// etcd-backup serve beside it.
type node struct {
	name                 string
	root, dataDir, spool string
	config               string
	client               string // https URL of etcd's clients
	peerListen           string // the member's own peer address
	peerAdvertised       string // its proxy's address, the one the cluster knows
	health               string // the wrapper's /livez, /readyz
	api                  string // the sidecar's https URL
	standby              string // the warm standby's data dir; "": none
	cert                 pki.Leaf
	proxy                *peerProxy
	// The current runs of its processes: the faults and the supervisor
	// start new ones from their goroutines.
	mu               sync.Mutex
	wrapper, sidecar *proc
	// etcd is the etcd server binary the wrapper runs as its child; "":
	// the etcd built into it.
	etcd string
}

func (nd *node) wrapperProc() *proc {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.wrapper
}

func (nd *node) sidecarProc() *proc {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.sidecar
}

// clockFile holds the offset of the sidecar's clock from the machine's.
func (nd *node) clockFile() string { return filepath.Join(nd.root, "clock-offset") }

// cluster is the system under test and what the harness holds around it.
type cluster struct {
	o         Options
	dir       string
	nodes     []*node
	ca        *pki.CA
	certs     map[string]pki.Leaf // wrapper, backup, api, operator
	roots     *x509.CertPool
	storeURL  string   // the processes' store URL: through the proxy
	env       []string // the processes' environment (store credentials)
	token     string
	store     *storeProxy
	mu        sync.Mutex
	isolated  map[string]bool
	clientTLS *tls.Config
	http      *http.Client
}

func (c *cluster) pw(user string) string { return filepath.Join(c.dir, user+".password") }

// newCluster lays out three members with certificates of their own and
// etcd's configuration files.
func newCluster(o Options, dir, storeURL string, env []string, store *storeProxy) (*cluster, error) {
	c := &cluster{o: o, dir: dir, storeURL: storeURL, env: env, store: store, certs: map[string]pki.Leaf{}, isolated: map[string]bool{}}
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	var err error
	if c.ca, err = pki.MakeCA(pkiDir, "soak-ca"); err != nil {
		return nil, err
	}
	for name, lo := range map[string]pki.LeafOptions{
		"wrapper":  {CommonName: "etcd-wrapper", ClientOnly: true},
		"backup":   {CommonName: "etcd-backup"},
		"api":      {CommonName: "sidecar-api"},
		"operator": {CommonName: "operator", ClientOnly: true},
	} {
		if c.certs[name], err = c.ca.Make(name, lo); err != nil {
			return nil, err
		}
	}
	for _, u := range []string{"root", "backup"} {
		if err := os.WriteFile(c.pw(u), []byte("pw-of-"+u+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	c.token = filepath.Join(dir, "token")
	if err := os.WriteFile(c.token, []byte("soak-token"), 0o600); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.ca.File)
	if err != nil {
		return nil, err
	}
	c.roots = x509.NewCertPool()
	c.roots.AppendCertsFromPEM(caPEM)
	op, err := tls.LoadX509KeyPair(c.certs["operator"].CertFile, c.certs["operator"].KeyFile)
	if err != nil {
		return nil, err
	}
	c.clientTLS = &tls.Config{Certificates: []tls.Certificate{op}, RootCAs: c.roots, MinVersion: tls.VersionTLS12}
	c.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.clientTLS}}

	ports := make([]int, 0, 5*3)
	for range 5 * 3 {
		p, err := freeport.Pick()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	for i := range 3 {
		name := fmt.Sprintf("m%d", i)
		root := filepath.Join(dir, name)
		nd := &node{name: name, root: root, dataDir: filepath.Join(root, "data"), spool: filepath.Join(root, "spool"),
			config:         filepath.Join(root, "etcd.yaml"),
			client:         fmt.Sprintf("https://127.0.0.1:%d", ports[5*i]),
			peerListen:     fmt.Sprintf("127.0.0.1:%d", ports[5*i+1]),
			peerAdvertised: fmt.Sprintf("127.0.0.1:%d", ports[5*i+2]),
			health:         fmt.Sprintf("127.0.0.1:%d", ports[5*i+3]),
			api:            fmt.Sprintf("https://127.0.0.1:%d", ports[5*i+4]),
			etcd:           o.StepFrom,
		}
		if i == 2 {
			nd.standby = filepath.Join(root, "standby")
		}
		if err := os.MkdirAll(nd.spool, 0o700); err != nil {
			return nil, err
		}
		if nd.cert, err = c.ca.Make(name, pki.LeafOptions{CommonName: name}); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, nd)
	}
	var initial []string
	for _, nd := range c.nodes {
		initial = append(initial, nd.name+"=https://"+nd.peerAdvertised)
	}
	for _, nd := range c.nodes {
		cfg := fmt.Sprintf(`name: %[1]s
data-dir: %[2]s
listen-peer-urls: https://%[3]s
initial-advertise-peer-urls: https://%[4]s
listen-client-urls: %[5]s
advertise-client-urls: %[5]s
initial-cluster: %[6]s
initial-cluster-token: soak
initial-cluster-state: new
heartbeat-interval: 100
election-timeout: 1000
snapshot-count: 10000
log-level: warn
client-transport-security:
  cert-file: %[7]s
  key-file: %[8]s
  client-cert-file: %[9]s
  client-key-file: %[10]s
  client-cert-auth: true
  trusted-ca-file: %[11]s
peer-transport-security:
  cert-file: %[7]s
  key-file: %[8]s
  client-cert-auth: true
  trusted-ca-file: %[11]s
`, nd.name, nd.dataDir, nd.peerListen, nd.peerAdvertised, nd.client, strings.Join(initial, ","),
			nd.cert.CertFile, nd.cert.KeyFile, c.certs["wrapper"].CertFile, c.certs["wrapper"].KeyFile, c.ca.File)
		if err := os.WriteFile(nd.config, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// startProxies puts a proxy in front of every member's peer port.
func (c *cluster) startProxies() error {
	clients := map[string]tls.Certificate{}
	for _, nd := range c.nodes {
		kp, err := tls.LoadX509KeyPair(nd.cert.CertFile, nd.cert.KeyFile)
		if err != nil {
			return err
		}
		clients[nd.name] = kp
	}
	for _, nd := range c.nodes {
		to := nd.name
		nd.proxy = startPeerProxy(nd.name, nd.peerAdvertised, nd.peerListen, clients[to], clients, c.roots, func(from string) bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.isolated[from] || c.isolated[to]
		})
	}
	return nil
}

// isolate cuts (or restores) every peer connection of the member.
func (c *cluster) isolate(nd *node, on bool) {
	c.mu.Lock()
	c.isolated[nd.name] = on
	c.mu.Unlock()
	for _, o := range c.nodes {
		o.proxy.sever()
	}
}

func (c *cluster) peerEndpoints(except *node) string {
	var out []string
	for _, o := range c.nodes {
		if o != except {
			out = append(out, o.client)
		}
	}
	return strings.Join(out, ",")
}

func (c *cluster) startWrapper(nd *node) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	args := []string{"--config", nd.config, "--listen", nd.health, "--store", c.storeURL, "--store-timeout", "30s",
		"--peer-endpoints", c.peerEndpoints(nd), "--keep-moved-aside", "-1", "--log-format", "text"}
	if nd.etcd != "" {
		args = append(args, "--etcd", nd.etcd)
	}
	p, err := startProc("wrapper "+nd.name, c.o.WrapperBin, filepath.Join(c.dir, "logs", nd.name+"-wrapper.log"), c.env, args...)
	if err != nil {
		return err
	}
	nd.wrapper = p
	return nil
}

func (c *cluster) startSidecar(nd *node) error {
	var peers []string
	for _, o := range c.nodes {
		if o != nd {
			peers = append(peers, o.name+"="+o.api)
		}
	}
	s := c.o.Sidecar
	args := []string{"serve", "--store", c.storeURL, "--store-timeout", "30s",
		"--endpoints", c.peerEndpoints(nil), "--member-endpoint", nd.client,
		"--listen", strings.TrimPrefix(nd.api, "https://"), "--token-file", c.token, "--peers", strings.Join(peers, ","),
		"--delta-period", s.DeltaPeriod.String(), "--full-schedule", s.FullSchedule,
		"--gc-period", s.GCPeriod.String(), "--retention-policy", "limit-based", "--max-fulls", strconv.Itoa(s.MaxFulls),
		"--compact-after", strconv.FormatInt(s.CompactAfter, 10),
		"--defrag-schedule", s.DefragSchedule, "--drill-period", s.DrillPeriod.String(),
		"--max-backup-age", s.MaxBackupAge.String(), "--follow-interval", "200ms",
		"--work-dir", nd.spool, "--keep-moved-aside", "-1", "--log-format", "text",
		"--cacert", c.ca.File, "--cert", c.certs["backup"].CertFile, "--key", c.certs["backup"].KeyFile,
		"--user", "backup", "--password-file", c.pw("backup"),
		"--tls-cert", c.certs["api"].CertFile, "--tls-key", c.certs["api"].KeyFile, "--client-ca", c.ca.File,
		"--sidecar-cacert", c.ca.File, "--sidecar-cert", c.certs["backup"].CertFile, "--sidecar-key", c.certs["backup"].KeyFile,
	}
	if nd.standby != "" {
		args = append(args, "--standby-data-dir", nd.standby, "--standby-name", nd.name, "--standby-peer-urls", "https://"+nd.peerAdvertised)
	}
	env := append(slices.Clone(c.env), "SOAK_CLOCK_OFFSET_FILE="+nd.clockFile())
	p, err := startProc("sidecar "+nd.name, c.o.BackupBin, filepath.Join(c.dir, "logs", nd.name+"-sidecar.log"), env, args...)
	if err != nil {
		return err
	}
	nd.mu.Lock()
	nd.sidecar = p
	nd.mu.Unlock()
	return nil
}

// client connects as root with the operator's certificate. Its requests
// fail over between the members as etcd's client does.
func (c *cluster) client(endpoints ...string) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		for _, nd := range c.nodes {
			endpoints = append(endpoints, nd.client)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := c.certs["operator"]
	return etcdclient.New(ctx, etcdclient.Config{
		Endpoints: endpoints, TLS: tlsfiles.Files{CA: c.ca.File, Cert: op.CertFile, Key: op.KeyFile},
		User: "root", PasswordFile: c.pw("root"), DialTimeout: 5 * time.Second,
	})
}

// enableAuth adds root, backup and the wrapper's certificate user, each
// with the root role, and turns authentication on, as an operator does
// once the cluster runs.
func (c *cluster) enableAuth(ctx context.Context, cli *clientv3.Client) error {
	for _, u := range []string{"root", "backup", "etcd-wrapper"} {
		var err error
		if u == "etcd-wrapper" {
			_, err = cli.UserAddWithOptions(ctx, u, "", &clientv3.UserAddOptions{NoPassword: true})
		} else {
			var b []byte
			if b, err = os.ReadFile(c.pw(u)); err == nil {
				_, err = cli.UserAdd(ctx, u, strings.TrimSpace(string(b)))
			}
		}
		if err == nil {
			_, err = cli.UserGrantRole(ctx, u, "root")
		}
		if err != nil {
			return fmt.Errorf("user %s: %w", u, err)
		}
	}
	_, err := cli.AuthEnable(ctx)
	return err
}

// healthy asks the wrapper's /healthz: the cluster answers a
// linearizable read through the member (a learner: a read of its own).
func (c *cluster) healthy(nd *node) bool {
	ok, _ := c.health(nd)
	return ok
}

// health asks the wrapper's /healthz and says why it fails: its answer,
// or the error of the request.
func (c *cluster) health(nd *node) (bool, string) {
	resp, err := c.http.Get("http://" + nd.health + "/healthz")
	if err != nil {
		return false, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%s %s", resp.Status, strings.TrimSpace(string(body)))
}

// sidecarReady asks the sidecar's /readyz: 503 while its backups fail.
func (c *cluster) sidecarReady(nd *node) (int, error) {
	resp, err := c.http.Get(nd.api + "/readyz")
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// mountSpool puts each sidecar's spool on a small tmpfs of its own, which
// the spool-full fault fills. It needs root.
func (c *cluster) mountSpool(nd *node) error {
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", c.o.SpoolMiB), "tmpfs", nd.spool).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mounting a %d MiB tmpfs on %s (the spool-full fault needs root): %s", c.o.SpoolMiB, nd.spool, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *cluster) unmountSpools() {
	for _, nd := range c.nodes {
		_ = exec.Command("umount", "-l", nd.spool).Run()
	}
}

// metric sums every series of a metric the sidecar exports.
func (c *cluster) metric(nd *node, name string) (float64, error) {
	resp, err := c.http.Get(nd.api + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
